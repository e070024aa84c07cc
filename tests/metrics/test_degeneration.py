"""DS components against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medunlearn.metrics.degeneration import (
    DegenerationConfig,
    degeneration,
    degeneration_components,
    vocabulary_from_texts,
)


def test_empty_outputs_are_degenerate():
    parts = degeneration_components(["", "   ", "?!", "Aspirin."])
    assert parts["empty"].tolist() == [True, True, True, False]
    assert parts["degenerate"].tolist() == [True, True, True, False]


def test_repetition_is_the_repeated_ngram_share():
    # "a b a b a b" has 4 trigrams (aba, bab, aba, bab), 2 distinct: 1 - 2/4
    parts = degeneration_components(
        ["a b a b a b", "one two three four"], config=DegenerationConfig(ngram_size=3)
    )
    np.testing.assert_allclose(parts["repetition"], [0.5, 0.0])
    # bigrams: 5, distinct 2 -> 0.6
    bigram = degeneration_components(["a b a b a b"], config=DegenerationConfig(ngram_size=2))
    np.testing.assert_allclose(bigram["repetition"], [0.6])
    assert bigram["degenerate"].tolist() == [True]


def test_repetition_does_not_cross_answers():
    # each answer alone has no repeated trigram; concatenated they would
    parts = degeneration_components(["x y z", "x y z"])
    np.testing.assert_allclose(parts["repetition"], [0.0, 0.0])


def test_normalised_token_entropy_by_hand():
    # 8 tokens, frequencies a:4 b:4 -> H = 1 bit; log2(8) = 3
    text = "a b a b a b a b"
    parts = degeneration_components([text], config=DegenerationConfig(ngram_size=8))
    np.testing.assert_allclose(parts["token_entropy"], [1 / 3])
    assert parts["degenerate"].tolist() == [True]  # repetition 0 with n=8, but entropy 1/3 < 0.5
    # 9 distinct tokens: entropy 1; 7 tokens: below min_tokens_for_entropy, reported as 1
    many = degeneration_components(
        ["a b c d e f g h i", "a a a a a a a"], config=DegenerationConfig(ngram_size=8)
    )
    np.testing.assert_allclose(many["token_entropy"], [1.0, 1.0])


def test_non_words_with_and_without_vocabulary():
    vocabulary = vocabulary_from_texts(["The troponin was high.", "Chest pain"])
    parts = degeneration_components(["troponin zzkq 2.4 pain", "xqzt"], vocabulary=vocabulary)
    # tokens: troponin, zzkq, 2, 4, pain -> 1 of 5 is a non-word (numbers always count as words)
    np.testing.assert_allclose(parts["non_word"], [0.2, 1.0])
    assert parts["degenerate"].tolist() == [False, True]
    long_token = "a" * 31
    plain = degeneration_components([f"fine {long_token} x_y"])
    # no vocabulary: "fine" is a word; 31 letters is too long; "x_y" is not alphabetic
    np.testing.assert_allclose(plain["non_word"], [2 / 3])


def test_score_and_rates_by_hand():
    result = degeneration(["", "no no no no no no no no no", "The right coronary artery was occluded.", "ok"])
    assert result["degeneration_score"] == pytest.approx(0.5)
    assert result["empty_rate"] == pytest.approx(0.25)
    assert result["repetition_rate"] == pytest.approx(0.25)
    assert result["low_entropy_rate"] == pytest.approx(0.25)
    assert result["non_word_rate"] == 0.0


def test_config_rejects_bad_thresholds():
    with pytest.raises(ValueError, match="repetition_threshold"):
        DegenerationConfig(repetition_threshold=1.5)
    with pytest.raises(ValueError, match="ngram_size"):
        DegenerationConfig(ngram_size=0)


@pytest.mark.parametrize(
    ("predictions", "named"),
    [
        ([], "predictions"),
        (None, "predictions"),
        (["a", None], "predictions"),
        ([math.nan], "predictions"),
        ([3], "predictions"),
    ],
)
def test_bad_input_names_the_argument(predictions, named):
    with pytest.raises(ValueError, match=f"`{named}`"):
        degeneration(predictions)
