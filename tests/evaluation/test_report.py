"""Report: table, report.json and PNG plots from two evaluation folders."""

from __future__ import annotations

import json

import pytest

from medunlearn.cli import main
from medunlearn.evaluation.report import ReportError, report_rows, write_report


def _summary(name, afe, leakage, degeneration, mu_same, mu_out):
    def cell(n, **values):
        return {"n": n, "rouge_l_f1": 0.5, "prob": 0.25, **values}

    forget = {
        "factual": cell(4, answer_forgetting=afe, leakage_score=leakage, degeneration_score=degeneration),
        "reasoning": cell(4, answer_forgetting=afe, leakage_score=leakage, degeneration_score=degeneration),
        "all": cell(8, answer_forgetting=afe, leakage_score=leakage, degeneration_score=degeneration),
    }
    return {
        "name": name,
        "forget_config": "disease_cancer_forget_10",
        "populations": {
            "forget_seen": forget,
            "retain_same_disease": {"all": cell(6, model_utility=mu_same, degeneration_score=0.0)},
            "retain_out_of_disease": {"all": cell(6, model_utility=mu_out, degeneration_score=0.0)},
        },
    }


@pytest.fixture()
def two_eval_dirs(tmp_path):
    dirs = []
    for name, values in (
        ("grad_diff", (0.93, 0.002, 0.8, 0.41, 0.7)),
        ("simnpo", (0.6, 0.05, 0.1, 0.37, 0.93)),
    ):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "summary.json").write_text(json.dumps(_summary(name, *values)))
        dirs.append(folder)
    return dirs


def test_rows_carry_each_method_population_and_qa_type(two_eval_dirs):
    rows = report_rows(two_eval_dirs)
    keys = [(r["method"], r["population"], r["qa_type"]) for r in rows]
    assert keys[:5] == [
        ("grad_diff", "forget_seen", "factual"),
        ("grad_diff", "forget_seen", "reasoning"),
        ("grad_diff", "forget_seen", "all"),
        ("grad_diff", "retain_same_disease", "all"),
        ("grad_diff", "retain_out_of_disease", "all"),
    ]
    assert len(rows) == 10
    grad_diff_forget = rows[2]
    assert (grad_diff_forget["answer_forgetting"], grad_diff_forget["leakage_score"]) == (0.93, 0.002)
    assert grad_diff_forget["degeneration_score"] == 0.8
    assert grad_diff_forget["model_utility"] is None  # MU is a retained-population metric


def test_report_writes_json_and_plots(two_eval_dirs, tmp_path):
    from rich.console import Console

    console = Console(record=True, width=160)
    payload = write_report(two_eval_dirs, tmp_path / "report", console=console)
    on_disk = json.loads((tmp_path / "report" / "report.json").read_text())
    assert on_disk == payload
    assert {m["method"]: m["mu_same_disease"] for m in payload["methods"]} == {
        "grad_diff": 0.41,
        "simnpo": 0.37,
    }
    for name in payload["plots"]:
        png = (tmp_path / "report" / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    text = console.export_text()
    for header in ("MU", "AFE", "LS", "DS", "ROUGE-L", "Prob"):
        assert header in text
    assert "0.930" in text and "0.002" in text


def test_same_method_name_twice_is_told_apart(two_eval_dirs, tmp_path):
    copy = tmp_path / "grad_diff_seed1"
    copy.mkdir()
    (copy / "summary.json").write_text((two_eval_dirs[0] / "summary.json").read_text())
    methods = {r["method"] for r in report_rows([two_eval_dirs[0], copy])}
    assert methods == {"grad_diff (grad_diff)", "grad_diff (grad_diff_seed1)"}


def test_missing_summary_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(ReportError, match="no summary.json"):
        report_rows([tmp_path])
    code = main(["report", str(tmp_path), "--out", str(tmp_path / "out")])
    assert code == 2
    assert f"{tmp_path}: no summary.json" in capsys.readouterr().err


def test_retained_mu_gets_a_patient_bootstrap_interval_from_the_per_example_scores(two_eval_dirs, tmp_path):
    import pandas as pd

    from medunlearn.metrics.bootstrap import BootstrapConfig, cluster_bootstrap

    folder = two_eval_dirs[0]
    similarity = [0.2, 0.4, 0.9, 0.7, 0.5, 0.6, 0.1, 0.3]
    per_example = pd.DataFrame(
        {
            "population": ["retain_same_disease"] * 8,
            "patient_id": ["p1", "p1", "p2", "p2", "p3", "p3", "p4", "p4"],
            "qa_type": ["factual", "reasoning"] * 4,
            "similarity": similarity,
        }
    )
    per_example.to_parquet(folder / "per_example.parquet", index=False)
    config = BootstrapConfig(n_resamples=300, seed=5)
    rows = report_rows([folder], config)
    same = next(r for r in rows if r["population"] == "retain_same_disease" and r["qa_type"] == "all")
    expected = cluster_bootstrap(
        similarity, per_example["qa_type"].tolist(), per_example["patient_id"].tolist(), config
    )
    assert same["model_utility_ci"] == [expected.low, expected.high]
    assert expected.low < expected.estimate < expected.high
    forget = next(r for r in rows if r["population"] == "forget_seen" and r["qa_type"] == "all")
    out = next(r for r in rows if r["population"] == "retain_out_of_disease")
    assert forget["model_utility_ci"] is None and out["model_utility_ci"] is None  # no rows for them
    payload = write_report([folder], tmp_path / "r", bootstrap=config)
    assert payload["bootstrap"]["n_resamples"] == 300 and payload["bootstrap"]["clusters"] == "patients"


def _attacks_json(folder, summaries):
    """An attack folder as ``medunlearn attack`` writes it (the parts the report reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "attacks.json").write_text(json.dumps({"rows": [], "summaries": summaries}))
    return folder


def test_attack_results_join_the_report_beside_afe_and_mu(two_eval_dirs, tmp_path):
    """An attacks.json in an evaluation's attacks/ folder (one method) and an attack folder named with
    --attacks (several methods, matched by name) add worst-case recovery and the AFE-vs-worst-case plot."""
    _attacks_json(
        two_eval_dirs[0] / "attacks",
        [{"method": "model", "afe": 0.9, "worst_case_recovery": 0.62, "worst_case_attack": "relearn k=5"}],
    )
    elsewhere = _attacks_json(
        tmp_path / "attack_runs",
        [
            {"method": "other", "worst_case_recovery": 0.9, "worst_case_attack": "x"},
            {"method": "simnpo", "worst_case_recovery": -0.05, "worst_case_attack": "quantize nf4"},
        ],
    )
    out = tmp_path / "report"
    assert main(["report", *map(str, two_eval_dirs), "--attacks", str(elsewhere), "--out", str(out)]) == 0
    payload = json.loads((out / "report.json").read_text())
    methods = {m["method"]: m for m in payload["methods"]}
    assert methods["grad_diff"]["worst_case_recovery"] == 0.62
    assert methods["grad_diff"]["afe"] == 0.93  # the report's AFE, beside the attack's worst case
    assert methods["simnpo"]["worst_case_attack"] == "quantize nf4"
    assert "afe_vs_worst_case_recovery.png" in payload["plots"]
    assert (out / "afe_vs_worst_case_recovery.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    from rich.console import Console

    console = Console(record=True, width=220)
    write_report(two_eval_dirs, tmp_path / "r2", console=console)  # no --attacks: only grad_diff's
    text = console.export_text()
    assert "worst-case recovery" in text and "+0.620" in text and "relearn k=5" in text
    assert "quantize nf4" not in text


def test_a_report_without_attack_results_is_unchanged(two_eval_dirs, tmp_path):
    payload = write_report(two_eval_dirs, tmp_path / "report")
    assert all("worst_case_recovery" not in m for m in payload["methods"])
    assert "afe_vs_worst_case_recovery.png" not in payload["plots"]


def test_the_table_header_names_the_interval_level_asked_for(two_eval_dirs, tmp_path):
    from rich.console import Console

    from medunlearn.metrics.bootstrap import BootstrapConfig

    for level, header, other in ((0.9, "MU 90% CI", "95%"), (0.95, "MU 95% CI", "90%")):
        console = Console(record=True, width=200)
        config = BootstrapConfig(n_resamples=20, level=level)
        payload = write_report(two_eval_dirs, tmp_path / f"r{level}", console=console, bootstrap=config)
        text = console.export_text()
        assert header in text and other not in text
        assert payload["bootstrap"]["level"] == level
