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

Several training runs of one setting (training seeds s = 1..S, each scored on the same patients' QA) are not
one run: their spread is part of the uncertainty. Given ``seeds``, :func:`cluster_bootstrap` and
:func:`afe_cluster_bootstrap` use a two-level bootstrap, training seeds then patients [ours]
(docs/study.md, "Intervals"). With ``θ_s(w)`` run s's statistic under patient weights ``w``, resample ``b``
draws patient weights ``w_b`` as above (once: every run scored the same patients, so patients and seeds are
crossed, not nested) and seed counts ``v_b`` (S seeds drawn with replacement), and takes

    θ*_b = Σ_s v_bs·θ_s(w_b) / Σ_s v_bs      (a run whose θ_s(w_b) is undefined drops out)

The estimate is the mean over runs, ``θ̂ = (1/S)·Σ_s θ_s(1)``, and the interval is the percentile interval of
the ``θ*_b``. The patient weights come first from ``default_rng(seed)``, then the seed counts from the same
generator, so one run (or S identical runs) gives the patient-only interval. With few seeds the seed level
is understated: the bootstrap variance of a mean of S runs is (S − 1)/S of its usual estimate s²/S, and 2
seeds give only 3 distinct seed draws.

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
        return cls.per_run(values, types, clusters, None)[0]

    @classmethod
    def per_run(cls, values, types: Sequence[str], clusters: Sequence, seeds: Sequence | None):
        """One ``ClusteredValues`` per training seed (``None``: all one run), on one shared numbering of
        clusters and types, so that one row of patient weights means the same patients in every run."""
        values = as_float_array("values", values)
        seeds = [0] * len(values) if seeds is None else list(seeds)
        check_same_length(values=values, types=list(types), clusters=list(clusters), seeds=seeds)
        (cluster_index, n_clusters), (type_index, n_types) = _numbered(clusters), _numbered(types)
        seed_index, n_seeds = _numbered(seeds)
        flat = (seed_index * n_clusters + cluster_index) * n_types + type_index
        shape, size = (n_seeds, n_clusters, n_types), n_seeds * n_clusters * n_types
        sums = np.bincount(flat, weights=values, minlength=size).reshape(shape)
        counts = np.bincount(flat, minlength=size).reshape(shape).astype(np.float64)
        return [cls(run_sums, run_counts) for run_sums, run_counts in zip(sums, counts)]

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


def _numbered(labels: Sequence) -> tuple[np.ndarray, int]:
    """Each label's number in the sorted order of the labels' text, and how many distinct labels."""
    _, index = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)
    index = index.reshape(-1)
    return index, int(index.max()) + 1


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


def seed_resampled(
    per_run_draws: np.ndarray, config: BootstrapConfig, rng: np.random.Generator
) -> np.ndarray:
    """The two-level bootstrap's ``θ*_b`` (module docstring) from ``per_run_draws[s, b] = θ_s(w_b)``, shape
    (runs, resamples): each resample draws the runs with replacement and averages the drawn runs' values."""
    n_runs = per_run_draws.shape[0]
    if n_runs == 1:
        return per_run_draws[0]
    counts = resample_weights(n_runs, config, rng).T  # (runs, resamples)
    defined = np.isfinite(per_run_draws)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.where(defined, per_run_draws, 0.0) * counts).sum(0) / (counts * defined).sum(0)


def _mean_of_runs(estimates: np.ndarray) -> float:
    """``θ̂``: the mean of the runs' defined estimates (NaN when none is)."""
    defined = estimates[np.isfinite(estimates)]
    return float(defined.mean()) if defined.size else float("nan")


def cluster_bootstrap(
    values,
    types: Sequence[str],
    clusters: Sequence,
    config: BootstrapConfig | None = None,
    seeds: Sequence | None = None,
) -> Interval:
    """The type-balanced mean of ``values`` with its cluster-bootstrap interval (clusters = patients).

    ``seeds``: each value's training seed, when the values are several runs of one setting: the estimate is
    then the mean over runs and the interval the two-level bootstrap (module docstring)."""
    config = config or BootstrapConfig()
    runs = ClusteredValues.per_run(values, types, clusters, seeds)
    rng = np.random.default_rng(config.seed)
    weights = resample_weights(runs[0].n_clusters, config, rng)
    draws = seed_resampled(np.stack([run.type_balanced_mean(weights) for run in runs]), config, rng)
    estimate = _mean_of_runs(np.array([run.type_balanced_mean()[0] for run in runs]))
    return Interval(estimate, *_percentiles(draws, config.level), runs[0].n_clusters)


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
    after, before, clusters: Sequence, config: BootstrapConfig | None = None, seeds: Sequence | None = None
) -> Interval:
    """AFE = clip(1 − mean(after) / mean(before), 0, 1) (:mod:`medunlearn.metrics.answer_forgetting`) of
    paired per-QA similarities, with its cluster-bootstrap interval: each resample draws patients with
    replacement and recomputes the ratio of the drawn patients' summed similarities (paired values: the QA
    counts cancel).

    The estimate is NaN when the before similarities sum to 0 (nothing to forget); resamples whose before sum
    is 0 drop out of the percentiles. ``seeds``: each pair's training seed (several unlearning runs, each
    paired with the same before model): the estimate is then the mean of the runs' AFE and the interval the
    two-level bootstrap (module docstring).

    >>> interval = afe_cluster_bootstrap([0.2, 0.4, 0.0, 0.1], [0.8, 0.8, 0.5, 0.5], ["a", "a", "b", "b"])
    >>> round(interval.estimate, 4), interval.n_clusters
    (0.7308, 2)
    """
    config = config or BootstrapConfig()
    after, before = as_float_array("after", after), as_float_array("before", before)
    seeds = [0] * len(after) if seeds is None else list(seeds)
    check_same_length(after=after, before=before, clusters=list(clusters), seeds=seeds)
    (cluster_index, n_clusters), (seed_index, n_runs) = _numbered(clusters), _numbered(seeds)
    flat, size = seed_index * n_clusters + cluster_index, n_runs * n_clusters
    sums_after = np.bincount(flat, weights=after, minlength=size).reshape(n_runs, n_clusters)
    sums_before = np.bincount(flat, weights=before, minlength=size).reshape(n_runs, n_clusters)

    def statistic(weights: np.ndarray) -> np.ndarray:
        """AFE of each run (rows) under each row of ``weights`` (columns)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = (sums_after @ weights.T) / (sums_before @ weights.T)
        return np.where(np.isfinite(ratio), np.clip(1.0 - ratio, 0.0, 1.0), np.nan)

    estimate = _mean_of_runs(statistic(np.ones((1, n_clusters)))[:, 0])
    rng = np.random.default_rng(config.seed)
    draws = seed_resampled(statistic(resample_weights(n_clusters, config, rng)), config, rng)
    if not np.isfinite(draws).any():
        return Interval(estimate, float("nan"), float("nan"), n_clusters)
    return Interval(estimate, *_percentiles(draws, config.level), n_clusters)


def auc_bootstrap(member_scores, nonmember_scores, config: BootstrapConfig | None = None) -> Interval:
    """The membership AUC of loss-like scores (:func:`medunlearn.metrics.mia.mia_auc`: ``P(s_non > s_mem) +
    ½·P(tie)``) with its bootstrap interval, members and non-members resampled apart, one text per patient
    (a patient-cluster bootstrap of AMNESIA's notes). Each resample weighs every (member, non-member) pair by
    how often both were drawn: ``AUC* = Σ_ij w_i·v_j·h_ij / (Σ_i w_i · Σ_j v_j)``, ``h_ij`` 1, ½ or 0.

    >>> interval = auc_bootstrap([0.1, 0.2, 0.5], [0.3, 0.4], BootstrapConfig(n_resamples=200))
    >>> round(interval.estimate, 4), interval.n_clusters, 0 <= interval.low <= interval.high <= 1
    (0.6667, 5, True)
    """
    config = config or BootstrapConfig()
    members = as_float_array("member_scores", member_scores)
    nonmembers = as_float_array("nonmember_scores", nonmember_scores)
    if not len(members) or not len(nonmembers):
        raise ValueError("auc_bootstrap needs at least one member and one non-member score")
    wins = (nonmembers[None, :] > members[:, None]) + 0.5 * (nonmembers[None, :] == members[:, None])
    rng = np.random.default_rng(config.seed)
    member_weights = resample_weights(len(members), config, rng)
    nonmember_weights = resample_weights(len(nonmembers), config, rng)
    draws = ((member_weights @ wins) * nonmember_weights).sum(1) / (
        member_weights.sum(1) * nonmember_weights.sum(1)
    )
    estimate = float(wins.mean())
    return Interval(estimate, *_percentiles(draws, config.level), len(members) + len(nonmembers))
