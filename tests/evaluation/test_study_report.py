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


# ---------------------------------------------------------------------------------------------------------
# Several training seeds: the intervals resample seeds, then patients (docs/study.md, "Intervals").


def _run_table(population_levels: dict, shift: float, patients: int) -> pd.DataFrame:
    """One run's per-example scores: every patient's two QA at a fixed level plus a fixed per-patient and
    per-QA part (the same in every run), plus ``shift``, the run's training-seed effect."""
    rng = np.random.default_rng(0)
    rows = []
    for population, level in population_levels.items():
        for patient in range(patients):
            effect = rng.normal(0, 0.05)
            for qa_type in TYPES:
                rows.append(
                    {
                        "example_id": f"{population}-{patient}-{qa_type}",
                        "population": population,
                        "patient_id": f"{population[0]}{patient}",
                        "qa_type": qa_type,
                        "similarity": float(np.clip(level + effect + rng.normal(0, 0.02) + shift, 0, 1)),
                    }
                )
    return pd.DataFrame(rows)


def _balanced(table: pd.DataFrame, population: str) -> float:
    return float(table[table["population"] == population].groupby("qa_type")["similarity"].mean().mean())


def _afe(after: pd.DataFrame, before: pd.DataFrame) -> float:
    seen = lambda t: t[t["population"] == "forget_seen"]["similarity"].sum()  # noqa: E731
    return float(np.clip(1 - seen(after) / seen(before), 0, 1))


def _multi_seed_results(root, shifts, patients=30) -> tuple[dict, list[pd.DataFrame], pd.DataFrame]:
    """A ``collect_results`` payload: the fine-tuned baseline and one method over ``len(shifts)`` seeds on
    forget_10, each run's scores shifted by its seed's entry of ``shifts`` (planted training variance)."""
    before = _run_table({"forget_seen": 0.8, "retain_same_disease": 0.8}, 0.0, patients)
    runs = [_run_table({"forget_seen": 0.4, "retain_same_disease": 0.6}, shift, patients) for shift in shifts]
    common = {"forget_config": "forget_10", "split": "random", "disease": None, "forget_size": 10}
    rows = []
    for kind, label, seed, table in [("baseline", "finetuned", None, before)] + [
        ("cell", "grad_diff", seed, table) for seed, table in enumerate(runs)
    ]:
        eval_dir = root / f"{label}-{seed}"
        eval_dir.mkdir(parents=True)
        table.to_parquet(eval_dir / "per_example.parquet", index=False)
        for population in ("forget_seen", "retain_same_disease"):
            row = {**common, "kind": kind, "label": label, "seed": seed, "eval_dir": str(eval_dir)}
            row.update(population=population, qa_type="all")
            if population == "forget_seen":
                row["answer_forgetting"] = _afe(table, before)
            else:
                row["model_utility"] = _balanced(table, population)
            rows.append(row)
    return {"study": "seeds", "rows": rows}, runs, before


def _point(results, config):
    from medunlearn.evaluation.report import study_points

    return next(p for p in study_points(results, config) if p["label"] == "grad_diff")


def _width(interval) -> float:
    return interval[1] - interval[0]


def test_planted_seed_variance_widens_the_study_interval(tmp_path):
    """Three seeds whose runs differ by ±0.1 in every score: the patient-only interval of the pooled rows is
    about ±0.02 wide and misses that spread; the two-level interval holds it. With no seed variance (three
    identical runs) the interval is exactly the patient-only interval of one run."""
    from medunlearn.evaluation.uncertainty import mu_interval

    config = BootstrapConfig(n_resamples=400, seed=3)
    same, runs, before = _multi_seed_results(tmp_path / "same", (0.0, 0.0, 0.0))
    point = _point(same, config)
    one_run = mu_interval(runs[0], "retain_same_disease", "all", config)
    assert point["mu_same_ci"] == pytest.approx([one_run.low, one_run.high], rel=1e-12)
    one_afe = afe_interval(runs[0], before, "forget_seen", "all", config)
    assert point["afe_ci"] == pytest.approx([one_afe.low, one_afe.high], rel=1e-12)

    varied, runs, before = _multi_seed_results(tmp_path / "varied", (-0.1, 0.0, 0.1))
    point = _point(varied, config)
    pooled = mu_interval(pd.concat(runs), "retain_same_disease", "all", config)  # patients only
    assert _width(point["mu_same_ci"]) > 4 * (pooled.high - pooled.low)
    means = [_balanced(run, "retain_same_disease") for run in runs]
    assert point["mu_same"] == pytest.approx(np.mean(means))
    assert point["mu_same_ci"][0] < np.mean(means) - 0.05 and point["mu_same_ci"][1] > np.mean(means) + 0.05
    afes = [_afe(run, before) for run in runs]
    assert _width(point["afe_ci"]) > 0.1 and point["afe_ci"][0] < np.mean(afes) < point["afe_ci"][1]


def _by_patient(table: pd.DataFrame, population: str) -> dict[str, list]:
    """``{patient: [(qa_type, similarity, example_id), ...]}`` of one population."""
    grouped: dict[str, list] = {}
    for row in table[table["population"] == population].itertuples():
        grouped.setdefault(row.patient_id, []).append((row.qa_type, row.similarity, row.example_id))
    return grouped


def test_the_two_level_interval_equals_an_independent_computation(tmp_path):
    """Plain loops: per resample, draw the patients (one matrix of draws from ``default_rng(seed)``), then the
    seeds (a second matrix from the same generator); the statistic is the mean, over the drawn seeds, of each
    drawn run's statistic on the drawn patients: its type-balanced MU, or its AFE against the one before
    model, clip(1 − Σ after / Σ before, 0, 1)."""
    config = BootstrapConfig(n_resamples=200, seed=5)
    results, runs, before = _multi_seed_results(tmp_path, (-0.08, 0.03, 0.05, 0.1), patients=9)
    point = _point(results, config)
    prior = dict(zip(before["example_id"], before["similarity"]))

    def mu(grouped, drawn):
        per_type: dict[str, list] = {}
        for patient in drawn:
            for qa_type, similarity, _ in grouped[patient]:
                per_type.setdefault(qa_type, []).append(similarity)
        return np.mean([np.mean(v) for v in per_type.values()])

    def afe(grouped, drawn):
        after_sum = sum(s for patient in drawn for _, s, _ in grouped[patient])
        before_sum = sum(prior[e] for patient in drawn for _, _, e in grouped[patient])
        return np.clip(1 - after_sum / before_sum, 0, 1)

    for key, population, statistic in (
        ("mu_same_ci", "retain_same_disease", mu),
        ("afe_ci", "forget_seen", afe),
    ):
        by_run = [_by_patient(run, population) for run in runs]
        patients = sorted(by_run[0])
        rng = np.random.default_rng(5)
        patient_draws = rng.integers(0, len(patients), (200, len(patients)))
        seed_draws = rng.integers(0, len(runs), (200, len(runs)))
        values = [
            np.mean([statistic(by_run[seed], [patients[i] for i in drawn]) for seed in seeds])
            for drawn, seeds in zip(patient_draws, seed_draws)
        ]
        low, high = np.percentile(values, [2.5, 97.5])
        assert point[key] == [pytest.approx(low), pytest.approx(high)], key


def test_the_captions_say_which_interval(tmp_path, monkeypatch):
    """The table caption and the figures' band captions name the two-level bootstrap and its level."""
    from medunlearn.evaluation import plots
    from medunlearn.evaluation.report import write_study_report

    drawn = {}

    def record_figures(points, out_dir, bootstrap, intervals=None):
        drawn["bands"] = intervals
        return []

    monkeypatch.setattr(plots, "write_study_figures", record_figures)
    config = BootstrapConfig(n_resamples=50, level=0.9, seed=2)
    results, _, _ = _multi_seed_results(tmp_path / "study", (-0.1, 0.0, 0.1), patients=6)
    payload = write_study_report(results, tmp_path / "report", bootstrap=config)
    assert "90% two-level bootstrap: training seeds, then patients" in payload["caption"]
    assert drawn["bands"].startswith("90% two-level bootstrap: training seeds, then patients, 50 resamples")
    assert "50 resamples, seed 2" in payload["caption"]
    assert payload["bootstrap"]["clusters"] == "training seeds, then patients"
    assert payload["caption"] in (tmp_path / "report" / "table2.md").read_text()
