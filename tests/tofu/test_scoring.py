"""TOFU metric functions on hand-computed values, and the scoring conventions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medunlearn.tofu.conventions import TofuConventions, preset
from medunlearn.tofu.scoring import (
    aggregate_truth_ratio,
    cut_at_stop_strings,
    min_k_score,
    normalised_probability,
    token_statistics,
    truth_ratio_per_question,
)


def test_truth_ratio_is_a_geometric_mean_over_the_correct_answers_probability():
    # correct p = 0.5; perturbed p = 0.1 and 0.4: geometric mean 0.2 -> TR = 0.4
    ratio = truth_ratio_per_question([-np.log(0.5)], [-np.log(0.1), -np.log(0.4)], [0, 0])
    assert ratio[0] == pytest.approx(0.4)


def test_truth_ratio_handles_questions_with_different_numbers_of_perturbed_answers():
    # question 1: geometric mean of 0.5, 0.125, 0.25 is 0.25, over 0.5
    ratio = truth_ratio_per_question(-np.log([0.5, 0.5]), -np.log([0.5, 0.5, 0.125, 0.25]), [0, 1, 1, 1])
    assert ratio == pytest.approx([1.0, 0.5])


def test_aggregates_with_the_reference_epsilon():
    assert aggregate_truth_ratio([4.0], "closer_to_1_better", 1e-10) == pytest.approx(0.25)
    assert aggregate_truth_ratio([0.25, 3.0], "true_better") == pytest.approx(0.375)
    with pytest.raises(ValueError, match="mode"):
        aggregate_truth_ratio([1.0], "higher")


def test_normalised_probability_sums_every_wrong_option():
    value = normalised_probability(-np.log([0.3, 0.1]), -np.log([0.1, 0.2, 0.3, 0.3]), [0, 0, 1, 1])
    assert value == pytest.approx([0.5, 0.1 / 0.7])


def test_min_k_floor_and_ceil_counts():
    logprobs = [[-1.0, -2.0, -3.0, -4.0, -5.0, 0.0]]
    mask = [[True] * 5 + [False]]
    assert min_k_score(logprobs, mask, 0.4, "floor") == pytest.approx([4.5])  # int(2.0) = 2 tokens: 5, 4
    assert min_k_score(logprobs, mask, 0.3, "floor") == pytest.approx([5.0])  # int(1.5) = 1
    assert min_k_score(logprobs, mask, 0.3, "ceil") == pytest.approx([4.5])  # ceil(1.5) = 2
    assert min_k_score([[-1.0, -2.0]], [[True, True]], 0.4, "floor") == pytest.approx([2.0])  # max(1, 0)


def _outputs(logprobs, argmax):
    return pd.DataFrame(
        {
            "example_id": [f"e{i}" for i in range(len(logprobs))],
            "token_logprobs": [np.asarray(x) for x in logprobs],
            "token_is_argmax": [np.asarray(x) for x in argmax],
        }
    )


def test_token_conventions_drop_the_eos_token_where_the_reference_does():
    # three answer tokens then the EOS; the EOS is mispredicted
    outputs = _outputs([[-1.0, -2.0, -3.0, -6.0]], [[False, True, True, False]])
    ours = token_statistics(outputs, TofuConventions()).iloc[0]
    reference = token_statistics(outputs, preset("open-unlearning")).iloc[0]
    assert ours["avg_loss"] == pytest.approx(3.0) and reference["avg_loss"] == pytest.approx(3.0)
    assert ours["exact_memorization"] == pytest.approx(0.5)
    assert reference["exact_memorization"] == pytest.approx(2 / 3)
    assert ours["extraction_strength"] == 0.0  # the last token is wrong: no suffix is reproduced
    assert reference["extraction_strength"] == pytest.approx(2 / 3)  # tokens 1, 2 reproduced after 1 of 3
    assert ours["min_k"] == pytest.approx(4.5)  # ceil(1.6) = 2 lowest of 4: 6, 3
    assert reference["min_k"] == pytest.approx(3.0)  # max(1, int(1.2)) = 1 lowest of 3


def test_reference_extraction_strength_never_goes_below_one_over_n():
    outputs = _outputs([[-1.0, -1.0, -1.0, -1.0, -1.0]], [[True, True, True, False, True]])
    reference = token_statistics(outputs, preset("open-unlearning")).iloc[0]
    assert reference["extraction_strength"] == pytest.approx(1 / 4)  # k loops to n - 1 = 3


def test_score_eos_off_leaves_the_eos_out_of_prob():
    outputs = _outputs([[-1.0, -3.0, -8.0]], [[True, True, True]])
    assert token_statistics(outputs, TofuConventions(score_eos=False)).iloc[0]["avg_loss"] == pytest.approx(
        2.0
    )


def test_stop_strings_cut_then_strip():
    assert cut_at_stop_strings([" A.\nQuestion: B", "C"], ["\nQuestion"]) == ["A.", "C"]
    assert cut_at_stop_strings(["  x  "], []) == ["x"]


def test_conventions_validate_their_choices():
    with pytest.raises(ValueError, match="min_k_count"):
        TofuConventions(min_k_count="round")
    with pytest.raises(ValueError, match="unknown conventions preset"):
        preset("tofu-2023")
    assert TofuConventions().with_options(max_new_tokens=None, stop_strings=("\n",)).stop_strings == ("\n",)


def test_comparison_with_a_reference_summary_reads_both_of_its_shapes():
    from medunlearn.tofu.scoring import compare_summaries

    ours = {
        "metrics": {},
        "open_unlearning": {"forget_Q_A_Prob": 0.5, "model_utility": 0.25, "privleak": None},
    }
    rows = compare_summaries(
        ours, {"forget_Q_A_Prob": 0.75, "model_utility": {"agg_value": 0.5}, "mia_gradnorm": 0.1}
    )
    by_name = {row["metric"]: row for row in rows}
    assert by_name["forget_Q_A_Prob"]["abs_difference"] == pytest.approx(0.25)
    assert by_name["model_utility"]["reference"] == 0.5
    assert by_name["mia_gradnorm"]["ours"] is None and by_name["privleak"]["abs_difference"] is None
    assert [row["metric"] for row in rows][-1] == "mia_gradnorm"  # reference-only metrics come last


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_vectorised_truth_ratio_and_min_k_equal_their_loop_definitions(data):
    n = data.draw(st.integers(1, 6))
    counts = data.draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    losses = st.floats(0.0, 8.0, allow_nan=False)
    correct = np.array(data.draw(st.lists(losses, min_size=n, max_size=n)))
    wrong = np.array(data.draw(st.lists(losses, min_size=sum(counts), max_size=sum(counts))))
    question = np.repeat(np.arange(n), counts)
    expected = [np.exp(-wrong[question == i].mean()) / (np.exp(-correct[i]) + 1e-10) for i in range(n)]
    assert truth_ratio_per_question(correct, wrong, question, 1e-10) == pytest.approx(expected, rel=1e-9)
    tokens = data.draw(st.lists(st.floats(-20.0, 0.0, allow_nan=False), min_size=1, max_size=12))
    taken = max(1, int(len(tokens) * 0.4))
    assert min_k_score([tokens], [[True] * len(tokens)], 0.4, "floor")[0] == pytest.approx(
        -np.mean(sorted(tokens)[:taken])
    )
