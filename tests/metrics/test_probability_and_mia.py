"""Log-prob statistics, truth ratio, forget quality and MIA against hand computations."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from scipy.special import comb

from medunlearn.metrics.forget_quality import forget_quality
from medunlearn.metrics.mia import (
    loss_score,
    mia_auc,
    min_k_plus_plus_score,
    min_k_score,
    privleak,
    zlib_score,
)
from medunlearn.metrics.probability import (
    answer_probability,
    exact_memorization,
    extraction_strength,
    mean_nll,
    mean_token_entropy,
    pad_token_values,
)
from medunlearn.metrics.truth_ratio import truth_ratio, truth_ratio_score

LOGPROBS, MASK = pad_token_values([np.log([0.5, 0.25, 0.5]), np.log([0.125])])


def test_padding_layout_and_ignored_padding():
    assert MASK.tolist() == [[True, True, True], [True, False, False]]
    padded = LOGPROBS.copy()
    padded[1, 1:] = np.nan  # values under a False mask are ignored, even NaN
    np.testing.assert_allclose(mean_nll(padded, MASK), mean_nll(LOGPROBS, MASK))


def test_answer_probability_is_the_geometric_mean_token_probability():
    np.testing.assert_allclose(answer_probability(LOGPROBS, MASK), [(0.5 * 0.25 * 0.5) ** (1 / 3), 0.125])
    np.testing.assert_allclose(mean_nll(LOGPROBS, MASK), [-np.log(0.0625) / 3, np.log(8)])


def test_exact_memorization_and_extraction_strength():
    matches = [[True, False, True, True, True], [True, True, True, True, False], [True] * 5, [False] * 5]
    mask = [[True] * 5, [True] * 5, [True] * 5, [True] * 5]
    np.testing.assert_allclose(exact_memorization(matches, mask), [0.8, 0.8, 1.0, 0.0])
    # last mismatch at 1 -> k = 2 -> 1 - 2/5; last token wrong -> 0; all right -> 1; all wrong -> 0
    np.testing.assert_allclose(extraction_strength(matches, mask), [0.6, 0.0, 1.0, 0.0])
    short, short_mask = pad_token_values([[1, 1], [0, 1, 1, 1]], dtype=np.int64)
    np.testing.assert_allclose(extraction_strength(short.astype(bool), short_mask), [1.0, 0.75])


def test_mean_token_entropy():
    entropy, mask = pad_token_values([[1.0, 2.0], [0.5]])
    np.testing.assert_allclose(mean_token_entropy(entropy, mask), [1.5, 0.5])


def test_mia_scores_by_hand():
    logprobs, mask = pad_token_values([[-0.5, -4.0, -1.0, -2.0], [-3.0]])
    np.testing.assert_allclose(loss_score(logprobs, mask), [1.875, 3.0])
    # k = 0.5: ceil(2) lowest log-probs of row 0 are -4, -2 -> 3.0; row 1: ceil(0.5) = 1 token -> 3.0
    np.testing.assert_allclose(min_k_score(logprobs, mask, k=0.5), [3.0, 3.0])
    texts = ["abc", "hello hello"]
    expected = [1.875 / len(zlib.compress(b"abc")), 3.0 / len(zlib.compress(b"hello hello"))]
    np.testing.assert_allclose(zlib_score(logprobs, mask, texts), expected)
    mu, _ = pad_token_values([[-1.0, -1.0, -1.0, -1.0], [-1.0]])
    sigma, _ = pad_token_values([[1.0, 1.0, 0.5, 2.0], [2.0]], fill=1.0)
    # z = [0.5, -3, 0, -0.5]; 2 lowest: -3, -0.5 -> 1.75. row 1: z = -1 -> 1
    np.testing.assert_allclose(min_k_plus_plus_score(logprobs, mask, mu, sigma, k=0.5), [1.75, 1.0])


def test_mia_auc_on_separable_and_tied_scores():
    assert mia_auc([0.1, 0.2, 0.3], [0.5, 0.6]) == 1.0
    assert mia_auc([0.5, 0.6], [0.1, 0.2, 0.3]) == 0.0
    # pairs (member, non-member): (1, 1) tie = 0.5, (1, 2) = 1, (3, 1) = 0, (3, 2) = 0 -> 1.5 / 4
    assert mia_auc([1.0, 3.0], [1.0, 2.0]) == pytest.approx(0.375)


def test_privleak_sign_follows_muse():
    assert privleak(0.5, 0.5) == 0.0
    assert privleak(1.0, 0.5) == pytest.approx(-100.0)  # forget set fully recognisable: under-unlearning
    assert privleak(0.25, 0.5) == pytest.approx(50.0)
    with pytest.raises(ValueError, match="auc_retrained"):
        privleak(0.5, 1.0)


def test_truth_ratio_and_its_aggregates():
    ratios = truth_ratio([0.5, 0.1], [[0.2, 0.3], [0.4, 0.2]])
    np.testing.assert_allclose(ratios, [0.5, 3.0])
    assert truth_ratio_score(ratios) == pytest.approx((0.5 + 1 / 3) / 2)
    assert truth_ratio_score(ratios, "true_better") == pytest.approx(0.25)
    with pytest.raises(ValueError, match="mode"):
        truth_ratio_score(ratios, "bigger")


def test_forget_quality_is_the_exact_ks_p_value():
    # disjoint samples of 3 and 3: D = 1 and the exact two-sided p-value is 2 / C(6, 3)
    result = forget_quality([0.1, 0.2, 0.3], [0.7, 0.8, 0.9])
    assert result["ks_statistic"] == 1.0
    assert result["forget_quality"] == pytest.approx(2 / comb(6, 3))
    identical = forget_quality([0.1, 0.2, 0.3], [0.1, 0.2, 0.3])
    assert identical["ks_statistic"] == 0.0 and identical["forget_quality"] == pytest.approx(1.0)
    # samples of different sizes are fine (KS does not pair them)
    assert forget_quality([0.1, 0.2], [0.15, 0.25, 0.35])["ks_statistic"] == pytest.approx(2 / 3)


BAD = [
    (lambda: mean_nll([[-1.0]], [[True], [True]]), "mask"),
    (lambda: mean_nll(None, [[True]]), "token_logprobs"),
    (lambda: mean_nll([[-1.0]], None), "mask"),
    (lambda: mean_nll(np.empty((0, 3)), np.empty((0, 3), dtype=bool)), "token_logprobs"),
    (lambda: mean_nll([[math.nan, -1.0]], [[True, True]]), "token_logprobs"),
    (lambda: mean_nll([[-1.0, -1.0]], [[False, False]]), "mask"),
    (lambda: mean_nll([[0.5]], [[True]]), "token_logprobs"),
    (lambda: exact_memorization(None, [[True]]), "argmax_match"),
    (lambda: extraction_strength([[True, True]], [[False, True]]), "mask"),
    (lambda: mean_token_entropy([[math.nan]], [[True]]), "token_entropy"),
    (lambda: pad_token_values([]), "rows"),
    (lambda: zlib_score([[-1.0]], [[True]], ["a", "b"]), "texts"),
    (lambda: min_k_score([[-1.0]], [[True]], k=0.0), "k"),
    (lambda: min_k_plus_plus_score([[-1.0]], [[True]], [[-1.0]], [[0.0]]), "vocab_std"),
    (lambda: mia_auc([], [0.1]), "member_scores"),
    (lambda: mia_auc([0.1], None), "nonmember_scores"),
    (lambda: mia_auc([0.1], [math.nan]), "nonmember_scores"),
    (lambda: truth_ratio([0.5], [[0.1], [0.2]]), "perturbed_probabilities"),
    (lambda: truth_ratio([math.nan], [[0.1]]), "paraphrased_probability"),
    (lambda: truth_ratio([0.0], [[0.1]]), "paraphrased_probability"),
    (lambda: forget_quality([], [0.1]), "unlearned_truth_ratios"),
    (lambda: forget_quality([0.1], None), "retain_truth_ratios"),
    (lambda: forget_quality([0.1], [math.nan]), "retain_truth_ratios"),
]


@pytest.mark.parametrize(("call", "named"), BAD)
def test_bad_input_names_the_argument(call, named):
    with pytest.raises(ValueError, match=f"`{named}`"):
        call()
