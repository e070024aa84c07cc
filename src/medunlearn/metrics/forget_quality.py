"""TOFU forget quality [ref: Maini et al., 2024]: the two-sample Kolmogorov-Smirnov test p-value between
the forget-set truth ratios of the unlearned model and those of a model trained without the forget set.

A high p-value (close to 1) means the two distributions cannot be told apart: the unlearned model behaves on
the forget set like a model that never saw it. Computed with ``scipy.stats.ks_2samp`` (two-sided; scipy's
default method, exact for small samples).
"""

from __future__ import annotations

from medunlearn.metrics.validation import as_float_array

__all__ = ["forget_quality"]


def forget_quality(unlearned_truth_ratios, retain_truth_ratios) -> dict:
    """``{"forget_quality": KS p-value, "ks_statistic": D}`` of the two samples.

    >>> result = forget_quality([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])  # disjoint: D = 1, exact p = 2 / C(6, 3)
    >>> result["ks_statistic"], round(result["forget_quality"], 4)
    (1.0, 0.1)
    """
    from scipy.stats import ks_2samp

    unlearned = as_float_array("unlearned_truth_ratios", unlearned_truth_ratios)
    retained = as_float_array("retain_truth_ratios", retain_truth_ratios)
    test = ks_2samp(unlearned, retained)
    return {"forget_quality": float(test.pvalue), "ks_statistic": float(test.statistic)}
