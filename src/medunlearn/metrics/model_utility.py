"""Model utility: the AMNESIA form (ours, docs/benchmarks/amnesia.md) and the TOFU harmonic-mean form [ref].

AMNESIA form (definition ours)::

    MU = mean over QA types t of ( mean of s over the retained population's seen QA of type t )

so factual and reasoning questions weigh the same whatever their counts. ``s`` is the answer similarity
(ROUGE-L F1 by default, see :mod:`medunlearn.metrics.similarity`).

TOFU form [ref]: the harmonic mean of several utility statistics (e.g. Prob, ROUGE-L and truth ratio on the
retain, real-authors and world-facts sets), ``k / sum(1 / v_i)``; it is 0 as soon as one statistic is 0.
"""

from __future__ import annotations

import numpy as np

from medunlearn.metrics.validation import as_float_array, check_same_length, check_sequence
from medunlearn.ontology.amnesia import QA_TYPES

__all__ = ["harmonic_mean_utility", "model_utility"]


def model_utility(similarities, qa_types=None) -> dict:
    """MU: the mean of per-QA-type mean similarities; without ``qa_types``, the plain mean.

    Args:
        similarities: per-example similarity s in [0, 1].
        qa_types: per-example QA type, one of ``QA_TYPES`` ("factual" / "reasoning"), same length; optional.
            Any other value is a ``ValueError`` naming its index: an unknown type would be a QA type of its
            own and weigh as much as a real one.

    Returns ``{"model_utility": float, "per_type": {qa_type: mean s}, "counts": {qa_type: n}}``.

    >>> result = model_utility([1.0, 0.5, 0.0], ["factual", "factual", "reasoning"])
    >>> result["model_utility"], result["per_type"]
    (0.375, {'factual': 0.75, 'reasoning': 0.0})
    """
    values = as_float_array("similarities", similarities)
    if (values < 0).any() or (values > 1).any():
        raise ValueError("`similarities` must be in [0, 1]")
    if qa_types is None:
        qa_types = ["all"] * len(values)
    else:
        check_qa_types(qa_types)
    check_same_length(similarities=values, qa_types=qa_types)
    names, type_index = np.unique(np.asarray([str(t) for t in qa_types]), return_inverse=True)
    counts = np.bincount(type_index, minlength=len(names))
    means = np.bincount(type_index, weights=values, minlength=len(names)) / counts
    return {
        "model_utility": float(means.mean()),
        "per_type": {str(name): float(mean) for name, mean in zip(names, means)},
        "counts": {str(name): int(count) for name, count in zip(names, counts)},
    }


def check_qa_types(qa_types) -> None:
    """Every entry of ``qa_types`` is one of ``QA_TYPES``.

    >>> check_qa_types(["factual", "bogus"])
    Traceback (most recent call last):
    ...
    ValueError: `qa_types`[1] is 'bogus'; allowed: factual, reasoning
    """
    check_sequence("qa_types", qa_types)
    for index, qa_type in enumerate(qa_types):
        if qa_type not in QA_TYPES:
            raise ValueError(f"`qa_types`[{index}] is {qa_type!r}; allowed: {', '.join(QA_TYPES)}")


def harmonic_mean_utility(values) -> float:
    """TOFU model utility: harmonic mean of non-negative statistics (0 if any is 0).

    >>> harmonic_mean_utility([0.5, 1.0])
    0.6666666666666666
    >>> harmonic_mean_utility([0.0, 1.0])
    0.0
    """
    array = as_float_array("values", values)
    if (array < 0).any():
        raise ValueError("`values` must be non-negative")
    if (array == 0).any():
        return 0.0
    return float(len(array) / np.sum(1.0 / array))
