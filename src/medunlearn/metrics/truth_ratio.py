"""TOFU truth ratio [ref: Maini et al., 2024, TOFU; aggregation as in OpenUnlearning].

Per question, with length-normalised probabilities (``answer_probability``) of a paraphrased correct answer
and of m perturbed (wrong) answers::

    truth_ratio_i = mean_j P(perturbed_ij) / P(paraphrased_i)

Below 1 the model prefers the correct answer. Aggregates: ``"closer_to_1_better"`` (forget set: a model that
never saw the data has no preference) ``mean(min(r, 1/r))``; ``"true_better"`` (retain set)
``mean(max(0, 1 - r))``.
"""

from __future__ import annotations

import numpy as np

from medunlearn.metrics.validation import as_float_array

__all__ = ["truth_ratio", "truth_ratio_score"]


def truth_ratio(paraphrased_probability, perturbed_probabilities) -> np.ndarray:
    """Per-question truth ratio from ``(n,)`` paraphrased and ``(n, m)`` perturbed probabilities.

    >>> truth_ratio([0.5, 0.2], [[0.25, 0.25], [0.1, 0.3]]).tolist()
    [0.5, 1.0]
    """
    paraphrased = as_float_array("paraphrased_probability", paraphrased_probability)
    perturbed = as_float_array("perturbed_probabilities", perturbed_probabilities, ndim=2)
    if perturbed.shape[0] != len(paraphrased):
        raise ValueError(
            f"`perturbed_probabilities` has {perturbed.shape[0]} rows but `paraphrased_probability` has "
            f"{len(paraphrased)}"
        )
    for name, array in (("paraphrased_probability", paraphrased), ("perturbed_probabilities", perturbed)):
        if (array <= 0).any() or (array > 1).any():
            raise ValueError(f"`{name}` must be probabilities in (0, 1]")
    return perturbed.mean(axis=1) / paraphrased


def truth_ratio_score(ratios, mode: str = "closer_to_1_better") -> float:
    """Aggregate truth ratios: ``"closer_to_1_better"`` or ``"true_better"``.

    >>> truth_ratio_score([0.5, 2.0]), truth_ratio_score([0.5, 2.0], "true_better")
    (0.5, 0.25)
    """
    values = as_float_array("ratios", ratios)
    if (values <= 0).any():
        raise ValueError("`ratios` must be positive")
    if mode == "closer_to_1_better":
        return float(np.minimum(values, 1.0 / values).mean())
    if mode == "true_better":
        return float(np.maximum(0.0, 1.0 - values).mean())
    raise ValueError(f"`mode` must be 'closer_to_1_better' or 'true_better', got {mode!r}")
