r"""Degeneration score (DS) and its components — the definitions are ours (docs/benchmarks/amnesia.md, "Metric
formulas").

Unlearning methods such as gradient ascent can make a model forget by making it babble; a low leakage score
then means nothing, which is why DS is reported next to LS. Each generated answer is split into word tokens
(lower-cased runs of ``\w`` characters, apostrophes and hyphens inside a word kept), and four components are
computed per answer:

* ``empty``: the answer has no word token at all (blank, only punctuation or symbols).
* ``repetition``: share of repeated word n-grams, ``1 - distinct_ngrams / total_ngrams`` with
  ``n = config.ngram_size`` (0 when the answer has fewer than n tokens). "a b a b a b" with n=2: 5 bigrams,
  2 distinct, repetition 0.6.
* ``non_word``: share of tokens that are not words. A token is a word if it is a number, or if it is
  alphabetic (letters with inner hyphens/apostrophes), at most ``config.max_word_length`` letters long, and,
  when a vocabulary is given (e.g. :func:`vocabulary_from_texts` over the reference answers and questions),
  in that vocabulary.
* ``token_entropy``: normalised Shannon entropy of the answer's token frequencies, ``H / log2(n_tokens)``
  in [0, 1] (1 when every token differs). Answers shorter than ``config.min_tokens_for_entropy`` get 1.0:
  a short answer ("Aspirin.") is legitimately low in entropy.

An answer is degenerate if it is empty, or repetition >= ``repetition_threshold``, or non_word >=
``non_word_threshold``, or token_entropy < ``entropy_threshold``. DS is the share of degenerate answers;
the component rates are reported too (share of answers over each threshold).

The per-token work is vectorised: all answers' tokens are mapped to integer ids once, and the n-gram
counts and entropies of every answer come from numpy ``unique`` / ``bincount`` over the flattened ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np

from medunlearn.metrics.validation import check_sequence

__all__ = [
    "DegenerationConfig",
    "degeneration",
    "degeneration_components",
    "tokenize",
    "vocabulary_from_texts",
]

_TOKEN = re.compile(r"\w+(?:['\-]\w+)*")
_WORD = re.compile(r"[^\W\d_]+(?:['\-][^\W\d_]+)*")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class DegenerationConfig:
    """Thresholds of the degeneration components (our defaults; see the module docstring for definitions).

    Args:
        ngram_size: n of the repeated n-gram share.
        repetition_threshold: an answer with at least this share of repeated n-grams is degenerate.
        non_word_threshold: an answer with at least this share of non-word tokens is degenerate.
        entropy_threshold: an answer whose normalised token entropy is below this is degenerate.
        min_tokens_for_entropy: answers shorter than this are not judged by entropy.
        max_word_length: alphabetic tokens longer than this are non-words (no medical word is this long).
    """

    ngram_size: int = 3
    repetition_threshold: float = 0.5
    non_word_threshold: float = 0.5
    entropy_threshold: float = 0.5
    min_tokens_for_entropy: int = 8
    max_word_length: int = 30

    def __post_init__(self):
        if self.ngram_size < 1:
            raise ValueError(f"`ngram_size` must be >= 1, got {self.ngram_size}")
        if self.min_tokens_for_entropy < 2:
            raise ValueError(f"`min_tokens_for_entropy` must be >= 2, got {self.min_tokens_for_entropy}")
        for name in ("repetition_threshold", "non_word_threshold", "entropy_threshold"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"`{name}` must be in [0, 1], got {value}")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of ``text``.

    >>> tokenize("Troponin I was 2.4 ng/mL; non-ST  elevation!")
    ['troponin', 'i', 'was', '2', '4', 'ng', 'ml', 'non-st', 'elevation']
    """
    return _TOKEN.findall(text.lower())


def vocabulary_from_texts(texts: Iterable[str]) -> frozenset[str]:
    """The set of word tokens of ``texts`` (e.g. reference answers, questions and notes).

    >>> sorted(vocabulary_from_texts(["Chest pain.", "chest X-ray"]))
    ['chest', 'pain', 'x-ray']
    """
    return frozenset(token for text in texts for token in tokenize(text))


def _is_word(token: str, vocabulary: frozenset[str] | None, max_word_length: int) -> bool:
    if _NUMBER.fullmatch(token):
        return True
    if len(token) > max_word_length or not _WORD.fullmatch(token):
        return False
    return vocabulary is None or token in vocabulary


def degeneration_components(
    predictions, *, vocabulary: Iterable[str] | None = None, config: DegenerationConfig | None = None
) -> dict[str, np.ndarray]:
    """Per-answer components: ``empty`` (bool), ``repetition``, ``non_word``, ``token_entropy`` (float),
    ``num_tokens`` (int) and ``degenerate`` (bool), each an array with one value per prediction.

    >>> parts = degeneration_components(["", "the the the the the", "Aspirin 300 mg was given."])
    >>> parts["empty"].tolist(), parts["repetition"].round(3).tolist(), parts["degenerate"].tolist()
    ([True, False, False], [0.0, 0.667, 0.0], [True, True, False])
    """
    config = config or DegenerationConfig()
    check_sequence("predictions", predictions)
    for index, text in enumerate(predictions):
        if not isinstance(text, str):
            raise ValueError(f"`predictions`[{index}] must be a string, got {text!r}"[:200])
    vocabulary = None if vocabulary is None else frozenset(token.lower() for token in vocabulary)

    token_lists = [tokenize(text) for text in predictions]
    n = len(token_lists)
    lengths = np.fromiter((len(tokens) for tokens in token_lists), dtype=np.int64, count=n)
    flat_tokens = [token for tokens in token_lists for token in tokens]
    example_of_token = np.repeat(np.arange(n), lengths)

    # Map each distinct token to an integer once; everything after is numpy over the flat id array.
    id_of_token: dict[str, int] = {}
    token_ids = np.fromiter(
        (id_of_token.setdefault(token, len(id_of_token)) for token in flat_tokens),
        dtype=np.int64,
        count=len(flat_tokens),
    )
    distinct_tokens = list(id_of_token)
    is_word_by_id = np.fromiter(
        (_is_word(token, vocabulary, config.max_word_length) for token in distinct_tokens),
        dtype=bool,
        count=len(distinct_tokens),
    )
    non_word_counts = np.bincount(example_of_token, weights=~is_word_by_id[token_ids], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        non_word = np.where(lengths > 0, non_word_counts / np.maximum(lengths, 1), 0.0)

    repetition = _repeated_ngram_share(token_ids, example_of_token, lengths, config.ngram_size)
    token_entropy = _normalised_entropy(token_ids, example_of_token, lengths, config.min_tokens_for_entropy)
    empty = lengths == 0
    degenerate = (
        empty
        | (repetition >= config.repetition_threshold)
        | (non_word >= config.non_word_threshold)
        | (token_entropy < config.entropy_threshold)
    )
    return {
        "empty": empty,
        "repetition": repetition,
        "non_word": non_word,
        "token_entropy": token_entropy,
        "num_tokens": lengths,
        "degenerate": degenerate,
    }


def _repeated_ngram_share(token_ids, example_of_token, lengths, ngram_size: int) -> np.ndarray:
    """``1 - distinct/total`` n-grams per example, from the flat token ids (0 when there is no n-gram)."""
    n = len(lengths)
    ngram_counts = np.maximum(lengths - ngram_size + 1, 0)
    if ngram_counts.sum() == 0:
        return np.zeros(n)
    # An n-gram starts at flat position p when p + n - 1 is still inside the same example.
    starts = np.arange(len(token_ids) - ngram_size + 1)
    starts = starts[example_of_token[starts] == example_of_token[starts + ngram_size - 1]]
    grams = np.stack([example_of_token[starts]] + [token_ids[starts + k] for k in range(ngram_size)], axis=1)
    distinct = np.unique(grams, axis=0)
    distinct_counts = np.bincount(distinct[:, 0], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ngram_counts > 0, 1.0 - distinct_counts / np.maximum(ngram_counts, 1), 0.0)


def _normalised_entropy(token_ids, example_of_token, lengths, min_tokens: int) -> np.ndarray:
    """``H / log2(n_tokens)`` of each example's token frequencies; 1.0 below ``min_tokens`` tokens."""
    n = len(lengths)
    entropy = np.ones(n)
    if len(token_ids) == 0:
        return entropy
    pairs, counts = np.unique(np.stack([example_of_token, token_ids], axis=1), axis=0, return_counts=True)
    example = pairs[:, 0]
    probability = counts / lengths[example]
    raw = np.bincount(example, weights=-probability * np.log2(probability), minlength=n)
    judged = lengths >= min_tokens
    entropy[judged] = raw[judged] / np.log2(lengths[judged])
    return entropy


def degeneration(
    predictions, *, vocabulary: Iterable[str] | None = None, config: DegenerationConfig | None = None
) -> dict:
    """DS (share of degenerate answers), the rate of each component, and the per-answer components.

    Returns ``{"degeneration_score", "empty_rate", "repetition_rate", "non_word_rate", "low_entropy_rate",
    "per_example": <degeneration_components output>, "config": dict}``.

    >>> result = degeneration(["", "no no no no no no no no no", "The right coronary artery was occluded."])
    >>> (
    ...     round(result["degeneration_score"], 4),
    ...     round(result["empty_rate"], 4),
    ...     round(result["repetition_rate"], 4),
    ... )
    (0.6667, 0.3333, 0.3333)
    """
    config = config or DegenerationConfig()
    parts = degeneration_components(predictions, vocabulary=vocabulary, config=config)
    return {
        "degeneration_score": float(parts["degenerate"].mean()),
        "empty_rate": float(parts["empty"].mean()),
        "repetition_rate": float((parts["repetition"] >= config.repetition_threshold).mean()),
        "non_word_rate": float((parts["non_word"] >= config.non_word_threshold).mean()),
        "low_entropy_rate": float((parts["token_entropy"] < config.entropy_threshold).mean()),
        "per_example": parts,
        "config": asdict(config),
    }
