"""Membership-inference attack (MIA) scores, their AUC, and privleak [ref: MUSE, Shi et al. 2024/2025;
OpenUnlearning].

Inputs follow the token convention of :mod:`medunlearn.metrics.probability` (``token_logprobs`` and
``mask`` of shape ``(n, max_tokens)``). Every score is oriented like a loss: **higher means "less likely a
training member"**.

* ``loss``: mean NLL of the text's tokens.
* ``zlib`` (Carlini et al., 2021): mean NLL divided by the zlib-compressed length (bytes) of the text, so that
  texts that are simply easy to predict are not taken for members.
* ``min_k`` (Min-K% Prob, Shi et al., 2024): mean NLL over the ``ceil(k * |y|)`` least likely tokens.
* ``min_k_plus_plus`` (Min-K%++, Zhang et al., 2024): each token's log-prob is standardised against the
  model's own next-token distribution, ``z_t = (log p(y_t) - mu_t) / sigma_t`` with
  ``mu_t = E_{v~p}[log p(v)]`` and ``sigma_t`` its standard deviation; the score is minus the mean of the
  ``ceil(k * |y|)`` lowest ``z_t``. The runner passes ``mu`` and ``sigma`` as two more ``(n, max_tokens)``
  arrays.

``mia_auc(member_scores, nonmember_scores)`` is the ROC AUC (``sklearn.metrics.roc_auc_score``) of telling
non-members (label 1) from members (label 0) by the score: 0.5 means the attack cannot tell them apart, 1.0
means every member scores lower than every non-member. Used on forget (members of the original training) vs
holdout QA.

``privleak`` (MUSE, with OpenUnlearning's flip to MUSE's AUC orientation): with ``a = 1 - AUC`` as above,
``privleak = (a_unlearned - a_retrained) / a_retrained * 100``. 0 is ideal; negative values mean the forget
set is still more recognisable than under a model that never saw it (under-unlearning), positive values mean
it is less recognisable than it should be (over-unlearning).
"""

from __future__ import annotations

import zlib

import numpy as np

from medunlearn.metrics.probability import check_token_matrix, mean_nll
from medunlearn.metrics.validation import as_float_array, check_same_length, check_sequence

__all__ = ["loss_score", "mia_auc", "min_k_plus_plus_score", "min_k_score", "privleak", "zlib_score"]


def loss_score(token_logprobs, mask) -> np.ndarray:
    """Mean NLL per example (the LOSS attack).

    >>> loss_score([[-1.0, -2.0]], [[True, True]]).tolist()
    [1.5]
    """
    return mean_nll(token_logprobs, mask)


def zlib_score(token_logprobs, mask, texts) -> np.ndarray:
    """Mean NLL / zlib-compressed byte length of each text.

    >>> import zlib
    >>> zlib_score([[-2.0, -4.0]], [[True, True]], ["aaaa"]).tolist() == [3.0 / len(zlib.compress(b"aaaa"))]
    True
    """
    check_sequence("texts", texts)
    nll = mean_nll(token_logprobs, mask)
    check_same_length(token_logprobs=nll, texts=texts)
    compressed = np.fromiter(
        (len(zlib.compress(str(text).encode("utf-8"))) for text in texts), dtype=np.float64, count=len(texts)
    )
    return nll / compressed


def _lowest_k_mean(values: np.ndarray, mask: np.ndarray, k: float) -> np.ndarray:
    """Mean of the ceil(k * n_i) smallest masked values of each row, without a Python loop over rows."""
    if not 0.0 < k <= 1.0:
        raise ValueError(f"`k` must be in (0, 1], got {k}")
    ordered = np.sort(np.where(mask, values, np.inf), axis=1)
    counts = np.ceil(k * mask.sum(axis=1)).astype(np.int64)
    take = np.arange(values.shape[1])[None, :] < counts[:, None]
    return np.where(take, ordered, 0.0).sum(axis=1) / counts


def min_k_score(token_logprobs, mask, k: float = 0.4) -> np.ndarray:
    """Min-K% Prob: mean NLL of the least likely ``ceil(k * |y|)`` tokens.

    >>> min_k_score([[-0.1, -3.0, -1.0, -0.2]], [[True] * 4], k=0.5).tolist()
    [2.0]
    """
    values, mask = check_token_matrix("token_logprobs", token_logprobs, mask)
    return -_lowest_k_mean(values, mask, k)


def min_k_plus_plus_score(token_logprobs, mask, vocab_mean, vocab_std, k: float = 0.4) -> np.ndarray:
    """Min-K%++: minus the mean of the lowest ``ceil(k * |y|)`` standardised log-probs.

    >>> min_k_plus_plus_score([[-1.0, -3.0]], [[True, True]], [[-2.0, -2.0]], [[1.0, 0.5]], k=0.5).tolist()
    [2.0]
    """
    values, mask = check_token_matrix("token_logprobs", token_logprobs, mask)
    mu, _ = check_token_matrix("vocab_mean", vocab_mean, mask)
    sigma, _ = check_token_matrix("vocab_std", vocab_std, mask)
    if (sigma[mask] <= 0).any():
        raise ValueError("`vocab_std` must be positive on answer tokens")
    z = np.where(mask, (values - mu) / np.where(mask, sigma, 1.0), 0.0)
    return -_lowest_k_mean(z, mask, k)


def mia_auc(member_scores, nonmember_scores) -> float:
    """ROC AUC of separating non-members (label 1) from members (label 0) by a loss-like score.

    >>> mia_auc([0.1, 0.2], [0.8, 0.9]), mia_auc([0.8, 0.9], [0.1, 0.2])
    (1.0, 0.0)
    """
    from sklearn.metrics import roc_auc_score

    members = as_float_array("member_scores", member_scores)
    nonmembers = as_float_array("nonmember_scores", nonmember_scores)
    labels = np.concatenate([np.zeros(len(members)), np.ones(len(nonmembers))])
    return float(roc_auc_score(labels, np.concatenate([members, nonmembers])))


def privleak(auc_unlearned: float, auc_retrained: float) -> float:
    """MUSE privleak in percent from two :func:`mia_auc` values (unlearned model, retrained model).

    >>> privleak(0.75, 0.5)  # forget set still recognisable: under-unlearning
    -50.0
    """
    unlearned = 1.0 - as_float_array("auc_unlearned", [auc_unlearned])[0]
    retrained = 1.0 - as_float_array("auc_retrained", [auc_retrained])[0]
    if retrained <= 0:
        raise ValueError("`auc_retrained` must be below 1")
    return float((unlearned - retrained) / retrained * 100.0)
