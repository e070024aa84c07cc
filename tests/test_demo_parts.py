"""The demo's parts: the stages share one context, the BioDivergence part runs on its own, forget configs are
told apart by the config-name grammar."""

from __future__ import annotations

import inspect

import pytest

from medunlearn.demo import QUICK, DemoContext, biodivergence
from medunlearn.demo.amnesia import (
    build_base_model,
    collateral_finding,
    evaluate_model,
    finetune_model,
    is_disease_level,
    unlearn_model,
)


@pytest.mark.parametrize(
    "name, disease",
    [
        ("disease_cancer_forget_10", True),
        ("disease_infection_immune_forget_5", True),
        ("forget_10", False),
        ("retain_90", False),
        ("notes", False),  # outside the grammar: not disease-level, no error
    ],
)
def test_is_disease_level(name, disease):
    assert is_disease_level(name) is disease


def test_collateral_finding_skips_random_level_rows_even_with_an_interval():
    collateral = {
        "delta_mu_same_disease": {"estimate": -0.3},
        "delta_mu_out_of_disease": {"estimate": -0.1},
        "difference": {"estimate": -0.2, "low": -0.3, "high": -0.1},
        "verdict": "appears",
        "bootstrap": None,
    }
    rows = [
        {"method": "GradDiff", "forget_config": "forget_10", "collateral": collateral},
        {"method": "SimNPO", "forget_config": "disease_cancer_forget_10", "collateral": collateral},
    ]
    finding = collateral_finding(rows)
    assert [entry["method"] for entry in finding["per_method"]] == ["SimNPO"] and finding["appears"] is True


def test_every_stage_takes_the_demo_context_first():
    stages = (
        build_base_model,
        finetune_model,
        unlearn_model,
        evaluate_model,
        biodivergence.run_biodivergence,
    )
    for stage in stages:
        parameters = list(inspect.signature(stage).parameters)
        assert parameters[0] == "context", stage.__name__
        assert not {"settings", "seed", "progress"} & set(parameters), stage.__name__
        assert len(parameters) <= 6, stage.__name__


def test_biodivergence_part_runs_alone_and_its_gap_is_pairlevel_minus_article_disjoint(tmp_path, capsys):
    result = biodivergence.run_biodivergence(DemoContext(QUICK, seed=0, progress=False), tmp_path / "bio")
    assert "audit passed" in capsys.readouterr().out
    assert set(result["baselines"]) == {"majority", "lexical"}
    for scores in result["baselines"].values():
        pairlevel, disjoint = scores["v1.0-pairlevel"], scores["v1.0"]
        assert pairlevel["n"] > 0 and disjoint["n"] > 0
        for _, key in biodivergence.BIODIVERGENCE_METRICS:
            assert scores["gap"][key] == pytest.approx(pairlevel["scores"][key] - disjoint["scores"][key])
    assert sum(result["split_sizes"].values()) > 0


def _variant(types):
    return {"predicted_types": types}


def test_a_baseline_that_predicts_one_type_throughout_is_said_not_to_have_learned():
    """The demo's fine-tuned row is read as "has not learned" only when both test splits got one and the same
    predicted conflict type; a baseline predicting two types on either split gets no such sentence."""
    one = {"v1.0-pairlevel": _variant(["direct"]), "v1.0": _variant(["direct"])}
    warning = biodivergence.one_class_warning(one)
    assert "predicts 'direct' on every test pair" in warning and "has not learned" in warning
    two_types = {"v1.0-pairlevel": _variant(["contextual", "direct"]), "v1.0": _variant(["direct"])}
    assert biodivergence.one_class_warning(two_types) == ""
    different = {"v1.0-pairlevel": _variant(["contextual"]), "v1.0": _variant(["direct"])}
    assert biodivergence.one_class_warning(different) == ""
