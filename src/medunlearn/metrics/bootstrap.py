"""Uncertainty of AMNESIA means: a cluster bootstrap over patients (ours).

A patient's QA are not independent (they ask about the same note), so intervals resample *patients* with
replacement, keeping all QA of a drawn patient, and recompute the statistic on each resample [ours]:

- the statistic is the QA-type-balanced mean used by MU (docs/benchmarks/amnesia.md, "Metric formulas"):
  ``mean over QA types t of (Σ_i w_i·sum_t(i)) / (Σ_i w_i·count_t(i))``, with ``w_i`` how often patient
  ``i`` was drawn, ``sum_t(i)`` / ``count_t(i)`` the sum / number of that patient's values of type ``t``;
- the interval is the percentile interval at ``level`` (default 95%) over ``n_resamples`` resamples
  (default 2,000) drawn from ``numpy.random.default_rng(seed)``;
- a difference between two disjoint populations (same-disease vs out-of-disease patients) resamples each
  population independently and takes the difference per resample; its two-sided bootstrap p-value is
  ``min(1, 2·min(P*(D ≤ 0), P*(D ≥ 0)))``.

Paired changes (ΔMU, after minus before on the same QA) are handled by passing per-QA differences as values:
the type-balanced mean is linear, so the mean of differences is the difference of means.

>>> import numpy as np
>>> values = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
>>> interval = cluster_bootstrap(values, ["factual", "reasoning"] * 3, ["p1", "p1", "p2", "p2", "p3", "p3"])
>>> round(interval.estimate, 3), interval.low <= interval.estimate <= interval.high, interval.n_clusters
(0.5, True, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from medunlearn.metrics.validation import as_float_array, check_same_length


@dataclass(frozen=True)
class BootstrapConfig:
    """Resampling settings (ours; written into every report that shows an interval)."""

    n_resamples: int = 2000
    level: float = 0.95
    seed: int = 0

    def __post_init__(self):
        if self.n_resamples < 1:
            raise ValueError(f"n_resamples must be at least 1, got {self.n_resamples}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level}")


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap percentile interval."""

    estimate: float
    low: float
    high: float
    n_clusters: int

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "n_clusters": self.n_clusters}


@dataclass(frozen=True)
class Difference(Interval):
    """``a − b`` of two independently resampled populations, with its two-sided bootstrap p-value."""

    p_value: float = 1.0

    def to_dict(self) -> dict:
        return {**super().to_dict(), "p_value": self.p_value}


@dataclass(frozen=True)
class ClusteredValues:
    """Per-cluster sums and counts of each type: all a type-balanced mean needs, shape (clusters, types)."""

    sums: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, values, types: Sequence[str], clusters: Sequence) -> ClusteredValues:
        values = as_float_array("values", values)
        check_same_length(values=values, types=list(types), clusters=list(clusters))
        _, cluster_index = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
        _, type_index = np.unique(np.asarray(types, dtype=object).astype(str), return_inverse=True)
        n_clusters, n_types = cluster_index.max() + 1, type_index.max() + 1
        flat = cluster_index * n_types + type_index
        sums = np.bincount(flat, weights=values, minlength=n_clusters * n_types).reshape(n_clusters, n_types)
        counts = np.bincount(flat, minlength=n_clusters * n_types).reshape(n_clusters, n_types)
        return cls(sums, counts.astype(np.float64))

    @property
    def n_clusters(self) -> int:
        return self.sums.shape[0]

    def type_balanced_mean(self, weights: np.ndarray | None = None) -> np.ndarray:
        """The statistic for each row of ``weights`` (resamples × clusters); all ones when ``None``."""
        if weights is None:
            weights = np.ones((1, self.n_clusters))
        with np.errstate(invalid="ignore", divide="ignore"):
            per_type = (weights @ self.sums) / (weights @ self.counts)
        # A type that a resample happens not to contain drops out of that resample's mean (as in MU).
        return np.nanmean(per_type, axis=1)


def resample_weights(n_clusters: int, config: BootstrapConfig, rng: np.random.Generator) -> np.ndarray:
    """How often each cluster is drawn in each resample: ``(n_resamples, n_clusters)`` counts summing to
    ``n_clusters`` per row (drawing ``n_clusters`` clusters with replacement)."""
    drawn = rng.integers(0, n_clusters, size=(config.n_resamples, n_clusters))
    weights = np.zeros((config.n_resamples, n_clusters))
    np.add.at(weights, (np.arange(config.n_resamples)[:, None], drawn), 1.0)
    return weights


def _percentiles(draws: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2 * 100
    low, high = np.nanpercentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def cluster_bootstrap(
    values, types: Sequence[str], clusters: Sequence, config: BootstrapConfig | None = None
) -> Interval:
    """The type-balanced mean of ``values`` with its cluster-bootstrap interval (clusters = patients)."""
    config = config or BootstrapConfig()
    data = ClusteredValues.of(values, types, clusters)
    draws = data.type_balanced_mean(
        resample_weights(data.n_clusters, config, np.random.default_rng(config.seed))
    )
    return Interval(float(data.type_balanced_mean()[0]), *_percentiles(draws, config.level), data.n_clusters)


def bootstrap_difference(
    a: ClusteredValues, b: ClusteredValues, config: BootstrapConfig | None = None
) -> Difference:
    """``statistic(a) − statistic(b)`` for two disjoint populations, each resampled on its own clusters."""
    config = config or BootstrapConfig()
    rng = np.random.default_rng(config.seed)
    draws = a.type_balanced_mean(resample_weights(a.n_clusters, config, rng)) - b.type_balanced_mean(
        resample_weights(b.n_clusters, config, rng)
    )
    estimate = float(a.type_balanced_mean()[0] - b.type_balanced_mean()[0])
    finite = draws[np.isfinite(draws)]
    p_value = min(1.0, 2 * min(np.mean(finite <= 0), np.mean(finite >= 0))) if finite.size else 1.0
    return Difference(
        estimate, *_percentiles(draws, config.level), a.n_clusters + b.n_clusters, p_value=float(p_value)
    )


def afe_cluster_bootstrap(
    after, before, clusters: Sequence, config: BootstrapConfig | None = None
) -> Interval:
    """AFE = clip(1 − mean(after) / mean(before), 0, 1) (:mod:`medunlearn.metrics.answer_forgetting`) of
    paired per-QA similarities, with its cluster-bootstrap interval: each resample draws patients with
    replacement and recomputes the ratio of the drawn patients' summed similarities (paired values: the QA
    counts cancel).

    The estimate is NaN when the before similarities sum to 0 (nothing to forget); resamples whose before sum
    is 0 drop out of the percentiles.

    >>> interval = afe_cluster_bootstrap([0.2, 0.4, 0.0, 0.1], [0.8, 0.8, 0.5, 0.5], ["a", "a", "b", "b"])
    >>> round(interval.estimate, 4), interval.n_clusters
    (0.7308, 2)
    """
    config = config or BootstrapConfig()
    after, before = as_float_array("after", after), as_float_array("before", before)
    check_same_length(after=after, before=before, clusters=list(clusters))
    _, cluster_index = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
    n_clusters = int(cluster_index.max()) + 1
    sums_after = np.bincount(cluster_index, weights=after, minlength=n_clusters)
    sums_before = np.bincount(cluster_index, weights=before, minlength=n_clusters)

    def statistic(weights: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = (weights @ sums_after) / (weights @ sums_before)
        return np.where(np.isfinite(ratio), np.clip(1.0 - ratio, 0.0, 1.0), np.nan)

    estimate = float(statistic(np.ones((1, n_clusters)))[0])
    draws = statistic(resample_weights(n_clusters, config, np.random.default_rng(config.seed)))
    if not np.isfinite(draws).any():
        return Interval(estimate, float("nan"), float("nan"), n_clusters)
    return Interval(estimate, *_percentiles(draws, config.level), n_clusters)
