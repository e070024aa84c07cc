"""The shipped SmolLM2 CPU study file: the real pretrained model with LoRA, the four paper methods, the cancer
forget sets 5-25% (docs/study.md, "Sizing the SmolLM2 CPU study")."""

from __future__ import annotations

from pathlib import Path

from medunlearn.study.config import load_study

STUDY = Path(__file__).resolve().parents[2] / "recipes" / "studies" / "smollm2-cpu.yaml"


def test_smollm2_cpu_study_validates_with_the_four_paper_methods_and_cancer_5_to_25():
    from medunlearn.study.grid import validate_study

    study = load_study(STUDY)
    assert study.model["model_name_or_path"] == "smollm2-135m" and study.model["lora"]
    assert sorted(m.method for m in study.methods) == ["grad_diff", "kl_min", "rmu", "simnpo"]
    assert study.forget == [f"disease_cancer_forget_{size}" for size in (5, 10, 15, 20, 25)]
    grid = validate_study(study)
    assert grid is None or len(grid.cells) == 20
