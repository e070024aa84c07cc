"""A study with an ``attacks:`` mapping: one cell of the tiny mini-study gets its attack stage (holdout probe
and 4-bit NF4, the cheap attacks), skipped on rerun; the study report shows its worst-case recovery; the
cell's own model card gets the robustness section."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from medunlearn.cli import main
from medunlearn.study import run_study

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "recipes" / "studies" / "mini.yaml"
CELL = "grad_diff-forget_10-s0"


def one_cell_study(folder: Path) -> Path:
    raw = yaml.safe_load(MINI.read_text())
    raw["data"]["build"]["patients"] = 40
    raw["finetune"].update(notes_epochs=0.0, qa_epochs=2.0)
    raw["methods"] = {"grad_diff": {**raw["methods"]["grad_diff"], "max_steps": 1}}
    raw["forget"] = ["forget_10"]
    raw["evaluation"] = {
        "runner": {"max_new_tokens": 4, "batch_size": 32},
        "populations": {"max_retain_patients": 4},
    }
    raw["attacks"] = {"attacks": ["holdout", "quantize"], "quantizations": ["nf4"]}
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_attack_stage_runs_after_the_cell_is_skipped_on_rerun_and_reaches_the_report(tmp_path):
    study_file = one_cell_study(tmp_path)
    result = run_study(study_file, tmp_path / "study", jobs=1)
    study_dir = Path(result["study_dir"])
    assert sorted(result["ran"]) == sorted(["finetune", "finetuned-forget_10", CELL, f"attacks-{CELL}"])
    attack_dir = study_dir / "cells" / CELL / "attacks"
    payload = json.loads((attack_dir / "attacks.json").read_text())
    assert payload["attacks"] == ["holdout", "quantize"]
    assert {r["attack"] for r in payload["rows"]} <= {"holdout", "quantize"}
    assert payload["methods"][0]["model"] == f"cells/{CELL}/model"  # inside the study: the folder moves
    state = json.loads((study_dir / "study.json").read_text())
    cell = state["grid"]["cells"][0]
    assert json.loads((attack_dir / "done.json").read_text())["fingerprint"] == cell["attack_fingerprint"]
    assert state["status"][f"attacks-{CELL}"]["status"] == "done"
    card = (study_dir / "cells" / CELL / "model" / "README.md").read_text()
    assert card.count("## Robustness of forgetting") == 1 and card.startswith("---")

    rows = [r for r in result["results"]["rows"] if r["stage"] == CELL]
    assert rows and all("worst_case_recovery" in r for r in rows)
    assert rows[0]["worst_case_recovery"] == payload["summaries"][0]["worst_case_recovery"]

    again = run_study(study_file, study_dir, jobs=1)
    assert not again["ran"] and f"attacks-{CELL}" in again["skipped"]

    out = tmp_path / "report"
    assert main(["report", str(study_dir), "--out", str(out), "--resamples", "50"]) == 0
    assert "Worst-case recovery" in (out / "table2.md").read_text()
    report = json.loads((out / "study_report.json").read_text())
    point = next(p for p in report["points"] if p["kind"] == "cell")
    assert "worst_case_recovery" in point and not report["missing"]
