"""Recovered share against hand computations, the robustness summary, the table, the plot and the card."""

from __future__ import annotations

import math

import pytest

from medunlearn.attacks.summary import (
    MIN_FORGOTTEN,
    markdown_table,
    model_card_section,
    normalised_recovered_share,
    recovered_share,
    robustness_summary,
    write_robustness_plot,
)


def test_recovered_share_matches_hand_computation():
    # before 0.90, after unlearning 0.30: 0.60 was forgotten; the attack brings similarity to 0.45,
    # i.e. 0.15 of the 0.60 back: 0.15 / 0.60 = 0.25.
    assert recovered_share(0.90, 0.30, 0.45) == pytest.approx(0.25)
    assert recovered_share(0.90, 0.30, 0.90) == pytest.approx(1.0)  # all of it
    assert recovered_share(0.90, 0.30, 0.30) == pytest.approx(0.0)  # nothing
    assert recovered_share(0.90, 0.30, 0.15) == pytest.approx(-0.25)  # erased more (not clipped)
    assert recovered_share(0.50, 0.10, 0.70) == pytest.approx(1.5)  # overshoot stays visible


@pytest.mark.parametrize(
    ("before", "unlearned", "attacked"),
    [
        (0.4, 0.4, 0.6),  # before == after unlearning: nothing forgotten, no division by zero
        (0.0, 0.0, 0.0),
        (0.4, 0.4 - MIN_FORGOTTEN / 2, 0.6),  # less than MIN_FORGOTTEN forgotten
        (0.3, 0.5, 0.6),  # unlearning raised the similarity
        (0.8, None, 0.5),
        (0.8, 0.2, math.nan),
    ],
)
def test_recovered_share_is_none_when_undefined(before, unlearned, attacked):
    assert recovered_share(before, unlearned, attacked) is None


def test_normalised_share_agrees_with_the_plain_one_on_one_question_set():
    assert normalised_recovered_share(0.45, 0.9, 0.30, 0.9) == pytest.approx(recovered_share(0.9, 0.3, 0.45))
    # holdout: ŝ = 0.3 / 0.6 = 0.5; seen after unlearning: ŝ = 0.2 / 0.8 = 0.25 → (0.5 − 0.25) / 0.75 = 1/3
    assert normalised_recovered_share(0.3, 0.6, 0.2, 0.8) == pytest.approx(1 / 3)
    assert normalised_recovered_share(0.3, 0.0, 0.2, 0.8) is None


ROWS = [
    {"attack": "relearn", "variant": "k=5", "population": "forget_seen", "n": 6, "before": 0.9,
     "unlearned": 0.3, "attacked": 0.45, "recovered_share": 0.25},
    {"attack": "relearn", "variant": "k=50", "population": "forget_seen", "n": 6, "before": 0.9,
     "unlearned": 0.3, "attacked": 0.75, "recovered_share": 0.75},
    {"attack": "quantize", "variant": "nf4", "population": "forget_holdout", "n": 2, "before": 0.5,
     "unlearned": 0.5, "attacked": 0.5, "recovered_share": None},
]  # fmt: skip


def test_robustness_summary_takes_the_worst_case_over_attacks():
    summary = robustness_summary("GradDiff", ROWS, afe=0.67, mu=0.4)
    assert summary["worst_case_recovery"] == 0.75
    assert summary["worst_case_attack"] == "relearn k=50 (forget_seen)"
    assert summary["worst_recovery_per_attack"] == {"relearn": 0.75, "quantize": None}
    assert (summary["afe"], summary["mu"]) == (0.67, 0.4)
    assert robustness_summary("none", ROWS[2:], 0.0, 0.5)["worst_case_recovery"] is None


def test_table_plot_and_card(tmp_path):
    summaries = [
        robustness_summary("GradDiff", ROWS, 0.67, 0.4),
        robustness_summary("RMU", ROWS[:1], 0.2, 0.6),
    ]
    table = markdown_table(ROWS, summaries)
    assert "| relearn | k=50 | forget_seen | 6 | 0.900 | 0.300 | 0.750 | +0.750 |" in table
    assert "| quantize | nf4 | forget_holdout | 2 | 0.500 | 0.500 | 0.500 | – |" in table
    assert "| GradDiff | 0.670 | 0.400 | +0.750 | relearn k=50 (forget_seen) |" in table
    with_method = markdown_table([{**ROWS[0], "method": "RMU"}])
    assert (
        with_method.splitlines()[2]
        == "| RMU | relearn | k=5 | forget_seen | 6 | 0.900 | 0.300 | 0.450 | +0.250 | – |"
    )  # no per-example sample: no interval
    plot = write_robustness_plot(summaries, tmp_path / "attacks.png")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert write_robustness_plot([robustness_summary("x", [], None, None)], tmp_path / "none.png") is None
    card = model_card_section(summaries[0], ROWS)
    assert card.startswith("## Robustness of forgetting")
    assert "+75.0% of what unlearning removed" in card and "docs/attacks.md" in card


def test_the_formula_in_attacks_json_says_what_the_code_does():
    """attacks.json's formula names the threshold ``recovered_share`` applies (MIN_FORGOTTEN), not
    ``s_before == s_unlearned``: a share is null below a 0.01 difference, equal or not."""
    from medunlearn.attacks.summary import RECOVERED_SHARE_FORMULA

    assert f"s_before - s_unlearned < {MIN_FORGOTTEN}" in RECOVERED_SHARE_FORMULA
    assert "==" not in RECOVERED_SHARE_FORMULA
    assert recovered_share(0.405, 0.4, 0.6) is None  # 0.005 apart, not equal: null, as the formula says


def test_attack_rows_compare_the_same_questions_before_and_after():
    """The before and unlearned similarities of a row are over the questions the attack scored only (here:
    not the relearned ``b``), by example id; the holdout probe by hand."""
    import pandas as pd

    from medunlearn.attacks.run import Reference, holdout_probe_row

    ids = ["forget_seen/a", "forget_seen/b", "forget_holdout/c"]
    reference = Reference(
        before=pd.Series([0.9, 0.5, 0.6], index=ids), unlearned=pd.Series([0.1, 0.5, 0.3], index=ids)
    )
    attacked = pd.DataFrame(
        {"example_id": ["forget_seen/a"], "population": ["forget_seen"], "similarity": [0.5]}
    )
    (row,) = reference.rows("relearn", "k=5", attacked)
    assert (row["n"], row["before"], row["unlearned"], row["attacked"]) == (1, 0.9, 0.1, 0.5)
    assert row["recovered_share"] == pytest.approx((0.5 - 0.1) / (0.9 - 0.1))
    examples = pd.DataFrame({"example_id": ids, "population": [i.split("/")[0] for i in ids]})
    probe = holdout_probe_row(reference, examples, "eval")
    # seen: 0.7 → 0.3 (ratio 3/7); holdout: 0.6 → 0.3 (ratio 1/2): (1/2 − 3/7) / (1 − 3/7) = 1/8
    assert probe["recovered_share"] == pytest.approx(0.125)
    assert probe["unlearned"] == pytest.approx(0.3 / 0.7 * 0.6)


@pytest.mark.parametrize(
    "module",
    [
        "medunlearn.attacks.summary",
        "medunlearn.attacks.relearning",
        "medunlearn.attacks.hidden_probe",
    ],
)
def test_module_doctests(module):
    import doctest
    import importlib

    loaded = importlib.import_module(module)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder(exclude_empty=True).find(loaded, loaded.__name__):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
