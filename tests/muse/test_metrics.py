"""The MUSE metric definitions against independent computations written differently here (hand sorting,
pairwise counting, the reference's loops transcribed, hand ROUGE), under both presets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medunlearn.metrics.knowledge_memorization import KNOWMEM_STOP_STRINGS, few_shot_prompt, knowmem_scores
from medunlearn.metrics.privleak import min_k_scores, privleak_percent, privleak_summary
from medunlearn.metrics.verbatim_memorization import (
    cut_generation,
    extraction_strength_scores,
    reference_ground_truth,
    rouge_l_f1,
    verbmem_scores,
)
from medunlearn.muse.conventions import MUSE_PRESETS, muse_preset
from medunlearn.muse.scoring import MuseOutputs, score_muse


def _ragged(rng, rows: int, low: int = 1, high: int = 12):
    return [list(-rng.exponential(2.0, size=int(rng.integers(low, high)))) for _ in range(rows)]


def _padded(rows, fill=0.0, dtype=float):
    width = max(len(row) for row in rows)
    values = np.full((len(rows), width), fill, dtype=dtype)
    mask = np.zeros((len(rows), width), dtype=bool)
    for i, row in enumerate(rows):
        values[i, : len(row)] = row
        mask[i, : len(row)] = True
    return values, mask


# ---- Min-K% ----


def _min_k_by_hand(row: list[float], k: float, count: str, drop_last: bool) -> float:
    tokens = row[:-1] if drop_last else row
    if not tokens:
        return 0.0  # open-unlearning@d3d7cf9 src/evals/metrics/mia/min_k.py:21-22
    if count == "floor":
        taken = max(1, int(len(tokens) * k))  # min_k.py:24, as written there
    else:
        taken = -(-len(tokens) * 2 // 5) if k == 0.4 else math.ceil(len(tokens) * k)  # exact ceil(2T/5)
    lowest = sorted(tokens)[:taken]
    return -sum(lowest) / len(lowest)


@pytest.mark.parametrize("count", ["floor", "ceil"])
@pytest.mark.parametrize("drop_last", [False, True])
def test_min_k_equals_sorting_by_hand(count, drop_last):
    rows = _ragged(np.random.default_rng(7), 60)
    values, mask = _padded(rows)
    got = min_k_scores(values, mask, k=0.4, count=count, drop_last_token=drop_last)
    expected = [_min_k_by_hand(row, 0.4, count, drop_last) for row in rows]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_floor_and_ceil_differ_where_they_should():
    row = [-5.0, -4.0, -3.0, -2.0, -1.0, -0.5, -0.1]  # T = 7: floor(2.8) = 2, ceil(2.8) = 3 tokens
    values, mask = _padded([row])
    assert min_k_scores(values, mask, count="floor").tolist() == [4.5]
    assert min_k_scores(values, mask, count="ceil").tolist() == [4.0]


# ---- AUC and PrivLeak ----


def _auc_by_pairs(forget, holdout) -> float:
    """P(holdout scores higher than forget) + ½ P(tie), counted over every pair."""
    wins = sum((h > f) + 0.5 * (h == f) for f in forget for h in holdout)
    return wins / (len(forget) * len(holdout))


def test_auc_equals_pairwise_counting_with_ties():
    rng = np.random.default_rng(3)
    forget = list(np.round(rng.normal(1.0, 1.0, 40), 1))  # rounded: ties occur
    holdout = list(np.round(rng.normal(1.5, 1.0, 35), 1))
    assert privleak_summary(forget, holdout)["auc"] == pytest.approx(
        _auc_by_pairs(forget, holdout), abs=1e-12
    )


@pytest.mark.parametrize(("auc", "retain"), [(0.9, 0.55), (0.5, 0.5), (0.2, 0.6), (0.999, 0.4)])
def test_privleak_is_the_relative_change_of_one_minus_auc(auc, retain):
    by_hand = ((1 - auc) - (1 - retain)) / (1 - retain) * 100
    assert privleak_percent(auc, retain) == pytest.approx(by_hand, rel=1e-12)
    assert privleak_percent(auc, retain, epsilon=1e-10) == pytest.approx(by_hand, rel=1e-8)


def test_privleak_when_the_retain_auc_is_one_ours_refuses_the_reference_divides_by_epsilon():
    with pytest.raises(ValueError, match="auc_retrained"):
        privleak_percent(0.5, 1.0)
    assert privleak_percent(0.5, 1.0, epsilon=1e-10) == pytest.approx(0.5 / 1e-10 * 100)


def test_without_a_retain_model_ours_reports_no_privleak_the_reference_uses_half():
    ours = privleak_summary([0.1, 0.2], [0.15, 0.3])
    reference = privleak_summary([0.1, 0.2], [0.15, 0.3], default_retain_auc=0.5, epsilon=1e-10)
    assert ours["privleak"] is None and ours["auc"] == 0.75
    assert reference["privleak"] == pytest.approx(((1 - 0.75) - 0.5) / 0.5 * 100)
    assert reference["retain_auc_measured"] is False


# ---- extraction strength ----


def _es_reference_loop(preds: list[int], labels: list[int]) -> float:
    """open-unlearning@d3d7cf9 src/evals/metrics/memorization.py:234-254, transcribed (labels already cut)."""
    valid_len = len(labels)
    k = 0
    for k in range(valid_len):
        if preds[k:] == labels[k:]:
            break
    if valid_len == 0:
        return 0.0
    return 1 - k / valid_len


def _es_ours(preds: list[int], labels: list[int]) -> float:
    """Smallest k in 0..n with a matching suffix (the empty suffix always matches): 1 - k/n."""
    n = len(labels)
    return 1 - next(k for k in range(n + 1) if preds[k:] == labels[k:]) / n


def test_extraction_strength_equals_both_definitions_on_random_rows():
    rng = np.random.default_rng(11)
    labels = [list(rng.integers(0, 3, size=int(rng.integers(1, 9)))) for _ in range(300)]
    preds = [[t if rng.random() < 0.7 else (t + 1) % 3 for t in row] for row in labels]
    matches, mask = _padded([[p == t for p, t in zip(a, b)] for a, b in zip(preds, labels)], False, bool)
    ours = extraction_strength_scores(matches, mask)
    reference = extraction_strength_scores(matches, mask, drop_last_token=True, floor_at_one_token=True)
    np.testing.assert_allclose(ours, [_es_ours(p, t) for p, t in zip(preds, labels)], atol=1e-12)
    expected = [_es_reference_loop(p[:-1], t[:-1]) for p, t in zip(preds, labels)]  # utils.py:173-175
    np.testing.assert_allclose(reference, expected, atol=1e-12)


def test_the_two_quirks_one_at_a_time():
    # Last token wrong, rest right: ours 0 (k = n); the reference drops that token and scores 1.
    row, mask = [[True, True, True, False]], [[True] * 4]
    assert extraction_strength_scores(row, mask).tolist() == [0.0]
    assert extraction_strength_scores(row, mask, drop_last_token=True).tolist() == [1.0]
    # Nothing right: ours 0, the floor alone gives 1/n.
    row = [[False] * 4]
    assert extraction_strength_scores(row, mask).tolist() == [0.0]
    assert extraction_strength_scores(row, mask, floor_at_one_token=True).tolist() == [0.25]


# ---- ROUGE, the cut, the prompt ----


def test_rouge_l_f1_on_hand_examples():
    # stemmed: [the cat sat on a mat] vs [the cat sat on the mat]: LCS 5 of 6 and 6 -> F1 5/6.
    assert rouge_l_f1(["The cats sat on a mat."], ["the cat sat on the mat"]).tolist() == [
        pytest.approx(5 / 6)
    ]
    # LCS of [a b c d] and [b d a] is 2 (b d): P = 2/4, R = 2/3, F1 = 2PR/(P+R) = 4/7.
    assert rouge_l_f1(["alpha bravo charlie delta"], ["bravo delta alpha"]).tolist() == [pytest.approx(4 / 7)]
    assert rouge_l_f1([""], ["anything"]).tolist() == [0.0]


def _cut_reference(text: str, stopwords: list[str], eos: str) -> str:
    """open-unlearning@d3d7cf9 src/evals/metrics/utils.py:307-316, transcribed."""
    for word in [eos, *stopwords]:
        if word and word in text:
            text = text.split(word)[0]
    return text.strip()


@pytest.mark.parametrize(
    "text",
    [
        " Gideon Okonkwo\n\nQuestion: next",
        " Saturday\nQuestion: Who",
        "a flood wall</s> and more",
        " Question: echoed",
        "no stop at all  ",
        "x\nQuestion:\n\ny",
    ],
)
def test_cut_is_the_reference_loop(text):
    expected = _cut_reference(text, list(KNOWMEM_STOP_STRINGS), "</s>")
    assert cut_generation(text, KNOWMEM_STOP_STRINGS, "</s>") == expected


def test_few_shot_prompt_and_knowmem_scores():
    shots = [{"question": "Who leads it?", "answer": "Ada"}, {"question": "Where?", "answer": "Dunmere"}]
    expected = (
        "Question: Who leads it?\nAnswer: Ada\n\n"
        "Question: Where?\nAnswer: Dunmere\n\n"
        "Question: When?\nAnswer: "
    )
    assert few_shot_prompt(shots, "When?") == expected
    scores = knowmem_scores([" On Saturday\n\nQuestion: x", "Gideon"], ["Saturday", "Gideon Okonkwo"])
    assert scores.tolist() == [pytest.approx(2 * 0.5 * 1 / 1.5), pytest.approx(2 / 3)]


def test_reference_ground_truth_removes_the_prompt_and_verbmem_scores_against_it():
    assert reference_ground_truth("On Monday the board met", "On Monday") == "the board met"
    assert verbmem_scores(["the board met today"], ["the board met"]).tolist() == [pytest.approx(6 / 7)]


# ---- the summary under both presets ----


def _outputs():
    return MuseOutputs(
        knowmem_forget_generations=[" Ada\n\nQuestion: more", " Dunmere"],
        knowmem_forget_references=["Ada", "Harrowgate"],
        knowmem_retain_generations=[" 20 thousand crowns"],
        knowmem_retain_references=["20 thousand crowns"],
        verbmem_generations=["plans for a footbridge over the canal"],
        verbmem_references=["plans for a footbridge over the river"],
        verbmem_argmax_match=[[True, True, True, False], [False, False, False]],
        privleak_forget_logprobs=[[-0.1, -0.2, -0.3, -9.0], [-0.2, -0.1, -0.4]],
        privleak_holdout_logprobs=[[-2.0, -3.0, -1.0, -0.01], [-1.5, -2.5]],
    )


def test_score_muse_under_both_presets():
    ours = score_muse(_outputs(), MUSE_PRESETS["medunlearn"])
    reference = score_muse(_outputs(), MUSE_PRESETS["open-unlearning"])
    for summary in (ours, reference):
        assert summary["metrics"]["knowmem_f"] == pytest.approx(0.5)
        assert summary["metrics"]["knowmem_r"] == 1.0
        assert summary["metrics"]["verbmem_f"] == pytest.approx(6 / 7)  # 7 words each, 6 in common
        assert summary["open_unlearning"]["forget_knowmem_ROUGE"] == summary["metrics"]["knowmem_f"]
    # ES: ours 0 and 0; the reference drops the wrong last token (1.0) and floors the other at 1/2.
    assert ours["per_example"]["extraction_strength"] == [0.0, 0.0]
    assert reference["per_example"]["extraction_strength"] == [1.0, 0.5]
    # Min-K: ours ceil(1.6) = 2 lowest incl. -9 -> forget 4.65, 0.3; holdout 2.5, 2.5: AUC 0.5.
    # The reference drops the last token: forget 0.3, 0.2; holdout 3.0, 1.5: AUC 1.
    assert ours["metrics"]["mia_min_k_auc"] == 0.5 and ours["metrics"]["privleak"] is None
    assert reference["metrics"]["mia_min_k_auc"] == 1.0
    assert reference["metrics"]["privleak"] == pytest.approx(-100.0)
    assert score_muse(_outputs(), MUSE_PRESETS["medunlearn"], retain_auc=0.5)["metrics"]["privleak"] == 0.0


def test_preset_lookup_names_the_known_presets():
    from medunlearn.errors import InputError

    assert muse_preset("open-unlearning").min_k_count == "floor"
    with pytest.raises(InputError, match="open-unlearning"):
        muse_preset("muse")


def test_cut_order_is_the_lists_order_when_stop_strings_overlap():
    # "bc" is cut first, leaving "xa", where "ab" no longer occurs; cutting at the earliest match gives "x".
    assert cut_generation("xabc", ["bc", "ab"]) == _cut_reference("xabc", ["bc", "ab"], "") == "xa"
