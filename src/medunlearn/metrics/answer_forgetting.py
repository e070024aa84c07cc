"""Answer forgetting effectiveness (AFE) — the definition is ours (docs/benchmarks/amnesia.md, "Metric
formulas").

With ``s`` the answer similarity (ROUGE-L F1 by default, see :mod:`medunlearn.metrics.similarity`) between the
generated and the gold answer, over the forget patients' QA::

    AFE = clip(1 - mean(s_after) / mean(s_before), 0, 1)     with a model from before unlearning
    AFE = clip(1 - mean(s_after), 0, 1)                       without one

1 means every answer the model used to give is gone; 0 means nothing was forgotten (or the model got better).
When the model knew nothing before (``mean(s_before) == 0``) there was nothing to forget and AFE is NaN.
"""

from __future__ import annotations

import numpy as np

from medunlearn.metrics.validation import as_float_array, check_same_length

__all__ = ["answer_forgetting"]


def answer_forgetting(after, before=None) -> dict:
    """AFE from per-example similarities in [0, 1] after (and optionally before) unlearning, paired by index.

    Returns ``{"answer_forgetting": float, "mean_after": float, "mean_before": float or None}``.

    >>> answer_forgetting([0.2, 0.4], before=[0.8, 0.8])["answer_forgetting"]
    0.625
    >>> answer_forgetting([0.9, 0.9], before=[0.5, 0.5])["answer_forgetting"]  # better than before: clipped
    0.0
    >>> round(answer_forgetting([0.25, 0.35])["answer_forgetting"], 4)
    0.7
    """
    after = _similarities("after", after)
    mean_after = float(after.mean())
    if before is None:
        return {
            "answer_forgetting": float(np.clip(1.0 - mean_after, 0.0, 1.0)),
            "mean_after": mean_after,
            "mean_before": None,
        }
    before = _similarities("before", before)
    check_same_length(after=after, before=before)
    mean_before = float(before.mean())
    value = float("nan") if mean_before == 0.0 else float(np.clip(1.0 - mean_after / mean_before, 0.0, 1.0))
    return {"answer_forgetting": value, "mean_after": mean_after, "mean_before": mean_before}


def _similarities(name: str, values) -> np.ndarray:
    array = as_float_array(name, values)
    if (array < 0).any() or (array > 1).any():
        raise ValueError(
            f"`{name}` must hold similarities in [0, 1], got values in [{array.min()}, {array.max()}]"
        )
    return array
