"""``medunlearn demo``: the pure pieces on hand-made numbers, and one ``--quick`` run end to end."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from medunlearn.cli import main, subcommand_parser
from medunlearn.demo import (
    BIODIVERGENCE_METRICS,
    DISPLAY_NAMES,
    QUICK,
    RANDOM_METHODS,
    collateral_finding,
    comparison_row,
    finding_sentence,
    split_gap,
)


def _summary(mu_same, mu_out, afe=0.5):
    def cell(**values):
        return {"all": values}

    return {
        "populations": {
            "forget_seen": cell(answer_forgetting=afe, leakage_score=0.1, degeneration_score=0.0),
            "retain_same_disease": cell(model_utility=mu_same),
            "retain_out_of_disease": cell(model_utility=mu_out),
        }
    }


def test_comparison_row_deltas_are_after_minus_before():
    row = comparison_row("GradDiff", "disease_cancer_forget_10", _summary(0.6, 0.85), _summary(0.9, 0.95))
    assert row["delta_mu_same_disease"] == pytest.approx(-0.3)
    assert row["delta_mu_out_of_disease"] == pytest.approx(-0.1)
    assert row["afe"] == 0.5 and row["leakage_score"] == 0.1


def test_missing_population_gives_no_delta():
    after = _summary(0.6, None)
    row = comparison_row("RMU", "forget_10", after, _summary(0.9, 0.95))
    assert row["mu_out_of_disease"] is None and row["delta_mu_out_of_disease"] is None


def _row(method, forget, same, out, interval=None, baseline=False):
    """A table row; ``interval`` = (low, high) of D = ΔMU same − ΔMU out gives it a collateral comparison."""
    row = {
        "method": method,
        "forget_config": forget,
        "delta_mu_same_disease": same,
        "delta_mu_out_of_disease": out,
        "baseline": baseline,
    }
    if interval is not None:
        low, high = interval
        verdict = "appears" if high < 0 else "opposite" if low > 0 else "not distinguishable at this size"
        row["collateral"] = {
            "delta_mu_same_disease": {"estimate": same},
            "delta_mu_out_of_disease": {"estimate": out},
            "difference": {"estimate": same - out, "low": low, "high": high, "p_value": 0.01},
            "verdict": verdict,
            "bootstrap": {"n_resamples": 2000, "level": 0.95, "seed": 0},
        }
    return row


def test_finding_is_judged_from_the_interval_of_the_difference_per_disease_level_method():
    rows = [
        _row("fine-tuned", "disease_cancer_forget_10", 0.0, 0.0, (0.0, 0.0), baseline=True),  # reference row
        _row("GradDiff", "forget_10", -0.5, 0.0, (-0.6, -0.4)),  # random split: not the paper's comparison
        _row("GradDiff", "disease_cancer_forget_10", -0.20, -0.05, (-0.25, -0.05)),
        _row("SimNPO", "disease_cancer_forget_10", -0.10, -0.02, (-0.12, -0.03)),
    ]
    finding = collateral_finding(rows)
    assert finding["appears"] is True
    assert [e["method"] for e in finding["per_method"]] == ["GradDiff", "SimNPO"]
    assert finding["per_method"][0]["difference"]["estimate"] == pytest.approx(-0.15)
    sentence = finding_sentence(finding)
    assert "APPEARS" in sentence and "D -0.150 [-0.250, -0.050]" in sentence and "2000 resamples" in sentence


def test_a_point_difference_inside_an_interval_that_holds_zero_is_not_a_finding():
    """The demo once called ΔMU −0.231 vs −0.219 a finding: with an interval around 0 it is noise."""
    noisy = [_row("SimNPO", "disease_cancer_forget_10", -0.231, -0.219, (-0.09, 0.07))]
    finding = collateral_finding(noisy)
    assert finding["appears"] == "not distinguishable"
    sentence = finding_sentence(finding)
    assert "not distinguishable at this size" in sentence and "[-0.090, +0.070]" in sentence
    assert "APPEARS" not in sentence


def test_finding_absent_mixed_and_undecidable():
    against = [_row("GradDiff", "disease_cancer_forget_10", -0.01, -0.05, (0.01, 0.07))]
    assert collateral_finding(against)["appears"] is False
    assert "does NOT appear" in finding_sentence(collateral_finding(against))
    mixed = against + [_row("SimNPO", "disease_cancer_forget_10", -0.3, -0.1, (-0.3, -0.1))]
    assert collateral_finding(mixed)["appears"] == "mixed"
    assert collateral_finding([_row("GradDiff", "disease_cancer_forget_10", None, -0.1)])["appears"] is None


def test_split_gap_is_pairlevel_minus_article_disjoint():
    pair = {key: 0.5 for _, key in BIODIVERGENCE_METRICS}
    disjoint = {key: 0.25 for _, key in BIODIVERGENCE_METRICS}
    assert split_gap(pair, disjoint) == {key: 0.25 for _, key in BIODIVERGENCE_METRICS}


def test_too_few_patients_is_a_clear_error(tmp_path, capsys):
    assert main(["demo", "--quick", "--patients", "5", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--patients" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
    """``medunlearn demo --quick`` at the default output level, in a fresh process (the libraries read their
    output settings at import), as a log captures it: stdout and stderr in one stream, kept as bytes until
    here (text mode would turn tqdm's carriage returns into line ends)."""
    out = tmp_path_factory.mktemp("demo") / "demo-quick"
    level_variables = (
        "TQDM_DISABLE",
        "TQDM_MININTERVAL",
        "HF_DATASETS_DISABLE_PROGRESS_BARS",
        "HF_HUB_DISABLE_PROGRESS_BARS",
        "PYTHONWARNINGS",
    )
    env = {k: v for k, v in os.environ.items() if k not in level_variables and not k.endswith("_VERBOSITY")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    finished = subprocess.run(
        [sys.executable, "-m", "medunlearn.cli", "demo", "--quick", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        timeout=1800,
    )
    return finished.returncode, out, finished.stdout.decode()


@pytest.mark.slow  # the whole --quick study: about a minute on a loaded 2-core machine
def test_quick_demo_prints_table_and_report_path_and_writes_the_report(quick_demo):
    rc, out, printed = quick_demo
    assert rc == 0
    report = out / "report"
    assert f"report folder: {report.resolve()}" in printed
    for name in (
        "demo_summary.json",
        "table.txt",
        "report.json",
        "mu_afe_tradeoff.png",
        "mu_same_vs_out_of_disease.png",
        "leakage_vs_degeneration.png",
    ):
        assert (report / name).is_file() and (report / name).stat().st_size > 0, name
    summary = json.loads((report / "demo_summary.json").read_text())
    methods_run = {(row["method"], row["forget_config"]) for row in summary["amnesia_rows"]}
    for method in RANDOM_METHODS:
        assert (DISPLAY_NAMES[method], "forget_10") in methods_run
        assert DISPLAY_NAMES[method] in printed
    assert ("GradDiff", "disease_cancer_forget_10") in methods_run
    for header in ("AFE", "LS", "DS", "MU same-dis.", "MU out-of-dis."):
        assert header in printed


# Issue 25: what `make demo` prints fits on a screen or two; the quick demo, smaller, must fit it too.
LINE_BUDGET = 150


@pytest.mark.slow
def test_quick_demo_prints_under_the_line_budget_one_bar_per_stage_and_no_warning(quick_demo):
    """Counted as `wc -l` counts a captured log (line ends), which is also what a terminal shows (a bar is one
    line redrawn in place). In a log a bar's redraws stay on its line, one a minute at most rather than ten a
    second, so that a viewer that starts a line at each carriage return is not flooded either. The bars:
    writing the folder, the two fine-tuning stages, one per unlearning run and one for the evaluations; no
    library bar, no Trainer log line, no warning."""
    rc, _, printed = quick_demo
    assert rc == 0, printed[-3000:]
    assert printed.count("\n") < LINE_BUDGET
    for line in printed.split("\n"):
        elapsed = re.search(r"\[(?:(\d+):)?(\d+):(\d+)<", line.rsplit("\r", 1)[-1])  # the bar's last state
        if elapsed:
            hours, minutes, seconds = (int(part or 0) for part in elapsed.groups())
            # the first draw, one a minute, the last update and the close
            assert line.count("\r") <= 3 + (3600 * hours + 60 * minutes + seconds) // 60, line
    finished_bars = [line.rsplit("\r", 1)[-1] for line in printed.split("\n")]
    descriptions = [re.match(r"^(?:(.*?):)?\s*\d+%\|", line) for line in finished_bars]
    described = [(match.group(1) or "").strip() for match in descriptions if match]
    unlearning_runs = len(RANDOM_METHODS) + len(QUICK.disease_methods)
    assert described == ["Writing parquet", "", ""] + [""] * unlearning_runs + ["evaluating"]
    assert "train_runtime" not in printed and "'loss'" not in printed
    assert not re.search(r"\w+Warning\b|\bwarn", printed)


@pytest.mark.slow
def test_quick_demo_finding_and_gap_follow_from_its_own_numbers(quick_demo):
    _, out, printed = quick_demo
    summary = json.loads((out / "report" / "demo_summary.json").read_text())
    recomputed = collateral_finding(summary["amnesia_rows"])
    assert summary["finding"]["appears"] == recomputed["appears"]
    assert summary["finding"]["sentence"] == finding_sentence(recomputed)
    assert " ".join(summary["finding"]["sentence"].split()) in " ".join(printed.split())
    for baseline in ("majority", "lexical"):
        scores = summary["biodivergence"]["baselines"][baseline]
        expected = split_gap(scores["v1.0-pairlevel"]["scores"], scores["v1.0"]["scores"])
        assert scores["gap"] == pytest.approx(expected)
    sizes = summary["biodivergence"]["split_sizes"]
    assert sizes["test"] == summary["biodivergence"]["baselines"]["lexical"]["v1.0"]["n"]


def test_the_quick_example_in_the_help_is_the_one_tested():
    epilog = subcommand_parser("demo").epilog
    quick = next(line for line in epilog.splitlines() if "--quick" in line)
    argv = shlex.split(quick.split("#")[0])
    assert argv[:2] == ["medunlearn", "demo"] and "--quick" in argv
    args = subcommand_parser("demo").parse_args(argv[2:])
    assert args.quick and args.out == "runs/demo-quick"


def test_degenerate_method_gets_a_caution_in_the_verdict():
    rows = [
        _row("GradDiff", "disease_cancer_forget_10", -0.9, -0.7, (-0.3, -0.1)) | {"degeneration_score": 1.0},
        _row("SimNPO", "disease_cancer_forget_10", -0.3, -0.2, (-0.15, -0.05)) | {"degeneration_score": 0.0},
    ]
    sentence = finding_sentence(collateral_finding(rows))
    assert "APPEARS" in sentence and "Caution: GradDiff" in sentence and "SimNPO answers" not in sentence
    assert "ΔMU same-disease -0.900, out-of-disease -0.700, D -0.200 [-0.300, -0.100] (appears)" in sentence
