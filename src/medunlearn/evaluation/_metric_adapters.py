"""Thin adapters from the runner's per-example outputs to ``medunlearn.metrics``.

The scoring code calls only these functions, so the metric definitions live in one place
(``medunlearn.metrics``); this module only reshapes arguments.
"""

from __future__ import annotations

import numpy as np


def ragged_to_flat(arrays) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate per-example arrays; returns (flat values, start offset of each example)."""
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
    flat = np.concatenate([np.asarray(a, dtype=np.float64) for a in arrays]) if len(arrays) else np.zeros(0)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(arrays) else np.zeros(0, dtype=np.int64)
    return flat, starts


def segment_mean(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Mean of each example's segment of ``flat`` (NaN for an empty segment)."""
    sums = np.add.reduceat(flat, starts) if len(flat) else np.zeros(len(starts))
    sums = np.where(lengths > 0, sums, 0.0)  # reduceat returns flat[start] for empty segments
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(lengths > 0, sums / lengths, np.nan)


def rouge_l(predictions, references) -> dict[str, np.ndarray]:
    from medunlearn.metrics.rouge import rouge_l as _rouge_l

    return _rouge_l(list(predictions), list(references))


def leakage(predictions, keywords, questions) -> np.ndarray:
    from medunlearn.metrics.disease_leakage import leakage_per_example

    return leakage_per_example(list(predictions), [list(k) for k in keywords], list(questions))


def probability_statistics(token_logprobs, token_is_argmax, token_mean_logprob, token_std_logprob, answers,
                           min_k_fraction: float = 0.4) -> dict[str, np.ndarray]:
    """Per-example statistics of the teacher-forced answer tokens.

    - ``mean_logprob`` = (1/n) Σ_t log p(y_t); ``prob`` = exp(mean_logprob) (TOFU's length-normalised Prob);
      ``loss`` = −mean_logprob.
    - ``exact_memorization`` = (1/n) Σ_t [y_t = argmax p(· | y_<t)].
    - ``extraction_strength`` = 1 − k*/n, k* the shortest prefix after which every token is the argmax
      (ours: k* = n, ES = 0, when the last token is not the argmax).
    - ``answer_token_entropy`` = (1/n) Σ_t H(p(· | y_<t)).
    - MIA scores (higher = more likely a member): ``mia_loss`` = mean_logprob; ``mia_zlib`` =
      mean_logprob / len(zlib(answer)); ``mia_min_k`` = mean of the lowest ⌈k·n⌉ log p(y_t);
      ``mia_min_k_plus_plus`` = the same over (log p(y_t) − μ_t)/σ_t.
    """
    import zlib

    lengths = np.fromiter((len(a) for a in token_logprobs), dtype=np.int64, count=len(token_logprobs))
    logprobs, starts = ragged_to_flat(token_logprobs)
    argmax, _ = ragged_to_flat(token_is_argmax)
    mean_lp, _ = ragged_to_flat(token_mean_logprob)
    std_lp, _ = ragged_to_flat(token_std_logprob)
    mean_logprob = segment_mean(logprobs, starts, lengths)
    # k*: one past the last non-argmax token of each example (0 when all match).
    owner = np.repeat(np.arange(len(lengths)), lengths)
    position = np.arange(len(logprobs)) - np.repeat(starts, lengths)
    last_miss = np.full(len(lengths), -1, dtype=np.int64)
    np.maximum.at(last_miss, owner[argmax == 0], position[argmax == 0])
    with np.errstate(invalid="ignore", divide="ignore"):
        extraction = np.where(lengths > 0, 1.0 - (last_miss + 1) / lengths, np.nan)
    zlib_lengths = np.array([len(zlib.compress(a.encode("utf-8"))) for a in answers], dtype=np.float64)
    normalised = (logprobs - mean_lp) / np.maximum(std_lp, 1e-12)
    return {
        "num_answer_tokens": lengths,
        "mean_logprob": mean_logprob,
        "prob": np.exp(mean_logprob),
        "loss": -mean_logprob,
        "exact_memorization": segment_mean(argmax, starts, lengths),
        "extraction_strength": extraction,
        "answer_token_entropy": -segment_mean(mean_lp, starts, lengths),
        "mia_loss": mean_logprob,
        "mia_zlib": mean_logprob / zlib_lengths,
        "mia_min_k": _lowest_fraction_mean(logprobs, owner, lengths, min_k_fraction),
        "mia_min_k_plus_plus": _lowest_fraction_mean(normalised, owner, lengths, min_k_fraction),
    }


def _lowest_fraction_mean(flat, owner, lengths, fraction) -> np.ndarray:
    """Per example, the mean of its ⌈fraction·n⌉ lowest values (one lexsort for all examples)."""
    order = np.lexsort((flat, owner))
    sorted_values = flat[order]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    rank = np.arange(len(flat)) - np.repeat(starts, lengths)
    keep_count = np.ceil(fraction * lengths).astype(np.int64)
    kept = rank < np.repeat(keep_count, lengths)
    sums = np.bincount(owner, weights=np.where(kept, sorted_values, 0.0), minlength=len(lengths))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(keep_count > 0, sums / keep_count, np.nan)


def degeneration(predictions) -> dict[str, np.ndarray]:
    """Per-example degeneration flags (placeholder until ``medunlearn.metrics.degeneration`` lands)."""
    texts = [str(p) for p in predictions]
    words = [t.lower().split() for t in texts]
    empty = np.array([len(w) == 0 for w in words])
    distinct = np.array([len(set(w)) / len(w) if w else 1.0 for w in words])
    repetitive = (~empty) & (distinct < 0.5) & np.array([len(w) >= 4 for w in words])
    degenerate = empty | repetitive
    return {"degenerate": degenerate.astype(float), "empty": empty.astype(float), "repetitive": repetitive.astype(float)}


def answer_forgetting(similarity_after: float, similarity_before: float | None) -> float:
    """AFE = clip(1 − s_after / s_before, 0, 1); 1 − s_after without a before model (SPEC, ours)."""
    if similarity_before is None:
        return float(np.clip(1.0 - similarity_after, 0.0, 1.0))
    if similarity_before <= 0:
        return float("nan")
    return float(np.clip(1.0 - similarity_after / similarity_before, 0.0, 1.0))


def mia_auc(member_scores, nonmember_scores) -> float:
    """ROC AUC of telling members (higher score) from non-members."""
    from sklearn.metrics import roc_auc_score

    member_scores, nonmember_scores = np.asarray(member_scores), np.asarray(nonmember_scores)
    labels = np.concatenate([np.ones(len(member_scores)), np.zeros(len(nonmember_scores))])
    return float(roc_auc_score(labels, np.concatenate([member_scores, nonmember_scores])))
