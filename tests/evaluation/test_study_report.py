"""``medunlearn report STUDYDIR``: figures against forget size and the Table 2 layout, on a planted study
folder (per-example scores chosen here, so every value is known)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from medunlearn.cli import main
from medunlearn.evaluation.uncertainty import afe_interval
from medunlearn.metrics.bootstrap import BootstrapConfig, afe_cluster_bootstrap

FORGET = ("forget_5", "forget_10", "disease_cancer_forget_5", "disease_cancer_forget_10")
METHODS = ("grad_diff", "simnpo")
TYPES = ("factual", "reasoning")


def _per_example(rng, forget: str, level: dict) -> pd.DataFrame:
    """Two QA per patient (one per type) in every population; similarities around ``level[population]``."""
    rows = []
    for population, patients in (
        ("forget_seen", 5),
        ("forget_holdout", 5),
        ("retain_same_disease", 6),
        ("retain_out_of_disease", 6),
    ):
        prefix = "f" if population.startswith("forget") else population.split("_")[1][0]
        for patient in range(patients):
            for qa_type in TYPES:
                value = float(np.clip(level[population] + rng.normal(0, 0.1), 0, 1))
                rows.append(
                    {
                        "example_id": f"{forget}-{population}-{patient}-{qa_type}",
                        "population": population,
                        "patient_id": f"{prefix}{patient}",
                        "qa_type": qa_type,
                        "similarity": value,
                        "degenerate": False,
                    }
                )
    return pd.DataFrame(rows)


def _summary(table: pd.DataFrame, before: pd.DataFrame | None, name: str, forget: str) -> dict:
    populations = {}
    for population, rows in table.groupby("population"):
        cells = {}
        for qa_type in (*TYPES, "all"):
            selected = rows if qa_type == "all" else rows[rows["qa_type"] == qa_type]
            cell = {"n": len(selected), "leakage_score": 0.01, "degeneration_score": 0.2}
            if population.startswith("retain"):
                per_type = selected.groupby("qa_type")["similarity"].mean()
                cell["model_utility"] = float(per_type.mean())
            else:
                paired = before.set_index("example_id").loc[selected["example_id"], "similarity"]
                cell["answer_forgetting"] = float(
                    np.clip(1 - selected["similarity"].mean() / paired.mean(), 0, 1)
                )
            cells[qa_type] = cell
        populations[population] = cells
    return {"name": name, "forget_config": forget, "populations": populations}


@pytest.fixture(scope="module")
def planted_study(tmp_path_factory):
    """A study folder as ``medunlearn study`` leaves it: study.json, done.json markers, eval folders."""
    root = tmp_path_factory.mktemp("planted") / "study"
    rng = np.random.default_rng(3)
    grid = {"baselines": [], "cells": []}
    before_level = {
        "forget_seen": 0.8,
        "forget_holdout": 0.6,
        "retain_same_disease": 0.8,
        "retain_out_of_disease": 0.8,
    }
    for forget in FORGET:
        size = int(forget.rsplit("_", 1)[1])
        stages = [("baseline", f"finetuned-{forget}", "finetuned", f"baseline/{forget}", before_level)]
        for index, method in enumerate(METHODS):
            level = {
                "forget_seen": 0.6 - 0.03 * size,
                "forget_holdout": 0.5,
                "retain_same_disease": 0.75 - 0.02 * size * (index + 1),
                "retain_out_of_disease": 0.78,
            }
            stages.append(("cell", f"{method}-{forget}-s0", method, f"cells/{method}-{forget}-s0", level))
        before = None
        for kind, name, label, folder, level in stages:
            eval_dir = root / folder / "eval"
            eval_dir.mkdir(parents=True)
            table = _per_example(rng, forget, level)
            if kind == "baseline":
                before = table
            table.to_parquet(eval_dir / "per_example.parquet", index=False)
            (eval_dir / "summary.json").write_text(json.dumps(_summary(table, before, name, forget)))
            fingerprint = f"fp-{name}"
            (root / folder / "done.json").write_text(json.dumps({"fingerprint": fingerprint}))
            if kind == "baseline":
                grid["baselines"].append({"name": name, "forget": forget, "fingerprint": fingerprint})
            else:
                grid["cells"].append(
                    {
                        "name": name,
                        "label": label,
                        "method": label,
                        "forget": forget,
                        "seed": 0,
                        "fingerprint": fingerprint,
                    }
                )
    (root / "study.json").write_text(json.dumps({"name": "planted", "grid": grid}))
    return root


def test_report_of_a_study_folder_writes_the_figures_and_both_tables(planted_study, tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(planted_study), "--out", str(out), "--resamples", "200", "--seed", "4"]) == 0
    payload = json.loads((out / "study_report.json").read_text())
    assert payload["bootstrap"] == {
        "n_resamples": 200,
        "level": 0.95,
        "seed": 4,
        "clusters": "patients",
        "applies_to": "every *_ci (AFE and MU)",
    }
    assert "200 resamples, seed 4" in payload["caption"]
    for name in payload["figures"]:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(payload["figures"]) == {
        "study_mu_vs_forget_size.png",
        "study_afe_vs_forget_size.png",
        "study_ls_ds.png",
        "study_factual_vs_reasoning.png",
        "study_holdout.png",
    }
    markdown, latex = (out / "table2.md").read_text(), (out / "table2.tex").read_text()
    assert "**random**" in markdown and "**disease cancer**" in markdown
    for marker in (r"\toprule", r"\midrule", r"\bottomrule", r"\cmidrule", "grad\\_diff"):
        assert marker in latex

    # Every table value is the cell's summary value.
    points = {(p["label"], p["forget_config"]): p for p in payload["points"]}
    assert len(points) == len(FORGET) * (1 + len(METHODS))
    for (label, forget), point in points.items():
        folder = "baseline/" + forget if label == "finetuned" else f"cells/{label}-{forget}-s0"
        summary = json.loads((planted_study / folder / "eval" / "summary.json").read_text())["populations"]
        assert point["mu_same"] == summary["retain_same_disease"]["all"]["model_utility"]
        assert point["mu_out"] == summary["retain_out_of_disease"]["all"]["model_utility"]
        assert point["afe"] == summary["forget_seen"]["all"]["answer_forgetting"]
        assert point["afe_holdout"] == summary["forget_holdout"]["all"]["answer_forgetting"]
        assert point["afe_reasoning"] == summary["forget_seen"]["reasoning"]["answer_forgetting"]
        assert (point["ls"], point["ds"]) == (0.01, 0.2)
        series = "random" if forget.startswith("forget") else "disease cancer"
        assert point["series"] == series and point["forget_size"] == int(forget.rsplit("_", 1)[1])
        line = f"| {label} | {point['forget_size']} | {point['afe']:.3f} | {point['afe_holdout']:.3f} |"
        assert line in markdown.split(f"**{series}**")[1].split("**")[0]
        assert point["mu_same_ci"][0] <= point["mu_same"] <= point["mu_same_ci"][1]


def test_afe_interval_equals_a_direct_patient_bootstrap(planted_study):
    after = pd.read_parquet(planted_study / "cells/simnpo-forget_10-s0/eval/per_example.parquet")
    before = pd.read_parquet(planted_study / "baseline/forget_10/eval/per_example.parquet")
    config = BootstrapConfig(n_resamples=300, seed=7)
    interval = afe_interval(after, before, "forget_seen", "all", config)

    # Directly: draw patients with replacement (the same generator and draws), recompute AFE on each resample.
    rows = after[after["population"] == "forget_seen"]
    prior = before.set_index("example_id").loc[rows["example_id"], "similarity"].to_numpy()
    patients = sorted(rows["patient_id"].unique())
    draws = np.random.default_rng(7).integers(0, len(patients), size=(300, len(patients)))
    values = []
    for draw in draws:
        chosen = [patients[i] for i in draw]
        mask_rows = [np.flatnonzero(rows["patient_id"].to_numpy() == p) for p in chosen]
        taken = np.concatenate(mask_rows)
        values.append(np.clip(1 - rows["similarity"].to_numpy()[taken].sum() / prior[taken].sum(), 0, 1))
    low, high = np.percentile(values, [2.5, 97.5])
    expected = np.clip(1 - rows["similarity"].mean() / prior.mean(), 0, 1)
    assert interval.estimate == pytest.approx(expected)
    assert (interval.low, interval.high) == (pytest.approx(low), pytest.approx(high))
    assert interval.low < interval.estimate < interval.high
    direct = afe_cluster_bootstrap(rows["similarity"], prior, rows["patient_id"].tolist(), config)
    assert (direct.low, direct.high) == (interval.low, interval.high)


def test_a_study_with_attack_stages_reports_worst_case_recovery(planted_study, tmp_path):
    """Cells with a finished attack stage (cells/<cell>/attacks/, done.json matching the grid's
    attack_fingerprint) get a worst-case recovery column and the AFE-vs-worst-case plot."""
    study = tmp_path / "study"
    shutil.copytree(planted_study, study)
    state = json.loads((study / "study.json").read_text())
    for index, cell in enumerate(state["grid"]["cells"]):
        cell["attack_fingerprint"] = f"afp-{cell['name']}"
        if index == 0:
            continue  # one attack stage not finished: listed as missing
        folder = study / "cells" / cell["name"] / "attacks"
        folder.mkdir()
        (folder / "done.json").write_text(json.dumps({"fingerprint": cell["attack_fingerprint"]}))
        summary = {"method": cell["name"], "worst_case_recovery": 0.1 * index, "worst_case_attack": "holdout"}
        (folder / "attacks.json").write_text(json.dumps({"summaries": [summary]}))
    (study / "study.json").write_text(json.dumps(state))
    out = tmp_path / "report"
    assert main(["report", str(study), "--out", str(out), "--resamples", "50"]) == 0
    payload = json.loads((out / "study_report.json").read_text())
    assert payload["missing"] == [f"attacks-{state['grid']['cells'][0]['name']}"]
    assert "study_afe_vs_worst_case_recovery.png" in payload["figures"]
    points = {(p["label"], p["forget_config"]): p for p in payload["points"]}
    second = state["grid"]["cells"][1]
    assert points[(second["label"], second["forget"])]["worst_case_recovery"] == pytest.approx(0.1)
    markdown = (out / "table2.md").read_text()
    assert "Worst-case recovery" in markdown and "| 0.100 |" in markdown
    assert "Worst-case recovery" in (out / "table2.tex").read_text()
