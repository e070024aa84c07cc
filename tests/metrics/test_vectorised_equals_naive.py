"""The vectorised implementations equal straightforward per-example loops (property tests)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medunlearn.metrics.degeneration import DegenerationConfig, degeneration_components, tokenize
from medunlearn.metrics.mia import min_k_score
from medunlearn.metrics.probability import extraction_strength, pad_token_values

answers = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "dd", "e", "!", "7"]), max_size=14).map(" ".join),
    min_size=1,
    max_size=6,
)


def naive_components(text: str, config: DegenerationConfig) -> tuple[float, float]:
    tokens = tokenize(text)
    grams = [tuple(tokens[i : i + config.ngram_size]) for i in range(len(tokens) - config.ngram_size + 1)]
    repetition = 1 - len(set(grams)) / len(grams) if grams else 0.0
    if len(tokens) < config.min_tokens_for_entropy:
        entropy = 1.0
    else:
        counts = np.array(list(Counter(tokens).values()), dtype=float)
        p = counts / counts.sum()
        entropy = float(-(p * np.log2(p)).sum() / math.log2(len(tokens)))
    return repetition, entropy


@settings(max_examples=150, deadline=None)
@given(texts=answers, ngram_size=st.integers(1, 4), min_tokens=st.integers(2, 6))
def test_degeneration_components_equal_a_per_answer_loop(texts, ngram_size, min_tokens):
    config = DegenerationConfig(ngram_size=ngram_size, min_tokens_for_entropy=min_tokens)
    parts = degeneration_components(texts, config=config)
    expected = np.array([naive_components(text, config) for text in texts])
    np.testing.assert_allclose(parts["repetition"], expected[:, 0], atol=1e-12)
    np.testing.assert_allclose(parts["token_entropy"], expected[:, 1], atol=1e-12)


rows = st.lists(st.lists(st.floats(-10, 0), min_size=1, max_size=9), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(values=rows, k=st.sampled_from([0.1, 0.2, 0.4, 0.5, 1.0]))
def test_min_k_equals_sorting_each_row(values, k):
    logprobs, mask = pad_token_values(values)
    expected = [-np.mean(sorted(row)[: math.ceil(k * len(row))]) for row in values]
    np.testing.assert_allclose(min_k_score(logprobs, mask, k=k), expected)


@settings(max_examples=150, deadline=None)
@given(matches=st.lists(st.lists(st.booleans(), min_size=1, max_size=9), min_size=1, max_size=6))
def test_extraction_strength_equals_the_prefix_search(matches):
    def naive(row):
        for k in range(len(row) + 1):
            if all(row[k:]):
                return 1 - k / len(row)
        raise AssertionError("unreachable")

    padded, mask = pad_token_values(matches, dtype=bool)
    assert extraction_strength(padded, mask) == pytest.approx([naive(row) for row in matches])
