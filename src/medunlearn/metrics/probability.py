"""Statistics of per-token log-probabilities from one teacher-forced pass [ref: TOFU, OpenUnlearning].

Array convention (what the evaluation runner produces, one row per (question, answer) pair):

* ``token_logprobs``: float array of shape ``(n_examples, max_answer_tokens)``; entry ``[i, t]`` is
  ``log p(y_t | question_i, y_<t)`` of the t-th gold answer token (natural log) under teacher forcing.
* ``mask``: bool array of the same shape, True on answer tokens and False on padding (and on question/prompt
  tokens, which are never scored). Values where ``mask`` is False are ignored (they may be NaN). Every row
  needs at least one answer token.
* ``argmax_match``: bool array of the same shape, True where the model's most likely next token equals
  ``y_t``.
* ``token_entropy``: float array, the entropy (nats) of the model's next-token distribution at each position.

A list of 1-D arrays (one per example, any lengths) becomes this layout with :func:`pad_token_values`.

Per-example statistics (all float64 arrays of length ``n_examples``):

* ``answer_probability`` (TOFU "Prob", length-normalised): ``exp(mean_t log p(y_t | ...))``.
* ``mean_nll``: ``-mean_t log p(y_t | ...)``.
* ``exact_memorization`` (Tirumala et al., 2022): share of answer tokens the greedy prediction gets right.
* ``extraction_strength`` (Carlini et al.; OpenUnlearning): ``1 - k/|y|`` with ``k`` the smallest prefix
  length after which the model's teacher-forced greedy predictions reproduce the whole rest of the answer;
  computed as ``1 - (last mismatch position + 1) / |y|``.
* ``mean_token_entropy``: mean of ``token_entropy`` over the answer tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from medunlearn.metrics.validation import check_sequence

__all__ = [
    "answer_probability",
    "check_token_matrix",
    "exact_memorization",
    "extraction_strength",
    "mean_nll",
    "mean_token_entropy",
    "pad_token_values",
]


def pad_token_values(rows: Sequence, *, fill: float = 0.0, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Lists of per-token values (any lengths) -> ``(values, mask)`` padded on the right.

    >>> values, mask = pad_token_values([[-0.5, -1.0], [-2.0]])
    >>> values.tolist(), mask.tolist()
    ([[-0.5, -1.0], [-2.0, 0.0]], [[True, True], [True, False]])
    """
    check_sequence("rows", rows)
    lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    mask = np.arange(max(int(lengths.max()), 1))[None, :] < lengths[:, None]
    values = np.full(mask.shape, fill, dtype=dtype)
    if lengths.sum():
        values[mask] = np.concatenate([np.asarray(row, dtype=dtype).ravel() for row in rows])
    return values, mask


def check_token_matrix(name: str, values, mask, *, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Validate ``values``/``mask`` against the convention; returns them as arrays (values 0 outside the
    mask)."""
    if values is None:
        raise ValueError(f"`{name}` must be a 2-D array, got None")
    if mask is None:
        raise ValueError("`mask` must be a 2-D boolean array, got None")
    values = np.asarray(values, dtype=dtype)
    mask = np.asarray(mask, dtype=bool)
    if values.ndim != 2 or values.shape[0] == 0:
        raise ValueError(
            f"`{name}` must be a non-empty 2-D array (n_examples, max_tokens), got shape {values.shape}"
        )
    if mask.shape != values.shape:
        raise ValueError(f"`mask` has shape {mask.shape} but `{name}` has shape {values.shape}")
    empty_rows = np.flatnonzero(~mask.any(axis=1))
    if len(empty_rows):
        raise ValueError(f"`mask`[{int(empty_rows[0])}] selects no answer token")
    if values.dtype.kind == "f":
        bad = np.isnan(values) & mask
        if bad.any():
            row, column = (int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"`{name}`[{row}, {column}] is NaN")
        values = np.where(mask, values, 0)
    return values, mask


def _masked_mean(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return (values * mask).sum(axis=1) / mask.sum(axis=1)


def mean_nll(token_logprobs, mask) -> np.ndarray:
    """``-mean_t log p`` per example.

    >>> mean_nll([[-1.0, -3.0, 99.0]], [[True, True, False]]).tolist()
    [2.0]
    """
    values, mask = check_token_matrix("token_logprobs", token_logprobs, mask)
    if (values > 1e-6).any():
        raise ValueError("`token_logprobs` must be log-probabilities (<= 0)")
    return -_masked_mean(values, mask)


def answer_probability(token_logprobs, mask) -> np.ndarray:
    """TOFU's length-normalised answer probability ``exp(mean_t log p)``.

    >>> answer_probability([[np.log(0.5), np.log(0.125)]], [[True, True]]).round(6).tolist()
    [0.25]
    """
    return np.exp(-mean_nll(token_logprobs, mask))


def exact_memorization(argmax_match, mask) -> np.ndarray:
    """Share of answer tokens whose teacher-forced greedy prediction is right.

    >>> exact_memorization([[True, False, True, True]], [[True, True, True, False]]).round(4).tolist()
    [0.6667]
    """
    matches, mask = check_token_matrix("argmax_match", argmax_match, mask, dtype=bool)
    return _masked_mean(matches, mask)


def extraction_strength(argmax_match, mask) -> np.ndarray:
    """``1 - (last mismatch + 1) / |y|``: how short a prefix suffices for the rest to come out greedily.

    The mask must be a prefix of each row (right padding), as :func:`pad_token_values` makes it.

    >>> extraction_strength([[False, True, True, True], [True, True, False, True], [True, True, True, True]],
    ...                     [[True] * 4] * 3).tolist()
    [0.75, 0.25, 1.0]
    """
    matches, mask = check_token_matrix("argmax_match", argmax_match, mask, dtype=bool)
    lengths = mask.sum(axis=1)
    if (mask != (np.arange(mask.shape[1])[None, :] < lengths[:, None])).any():
        raise ValueError("`mask` must be right-padded (True then False in every row) for extraction strength")
    mismatch = mask & ~matches
    # Position of the last mismatch + 1 (0 when the whole answer is reproduced).
    reversed_first = np.argmax(mismatch[:, ::-1], axis=1)
    last_mismatch_end = np.where(mismatch.any(axis=1), mask.shape[1] - reversed_first, 0)
    return 1.0 - last_mismatch_end / lengths


def mean_token_entropy(token_entropy, mask) -> np.ndarray:
    """Mean predictive entropy (nats) over the answer tokens.

    >>> mean_token_entropy([[0.5, 1.5, 7.0]], [[True, True, False]]).tolist()
    [1.0]
    """
    values, mask = check_token_matrix("token_entropy", token_entropy, mask)
    if (values < -1e-9).any():
        raise ValueError("`token_entropy` must be non-negative")
    return _masked_mean(values, mask)
