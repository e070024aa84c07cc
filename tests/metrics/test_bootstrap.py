"""The patient-cluster bootstrap: equal to a direct computation, detects a planted difference, and keeps its
stated level when there is none."""

from __future__ import annotations

import numpy as np
import pytest

from medunlearn.metrics.bootstrap import (
    BootstrapConfig,
    ClusteredValues,
    bootstrap_difference,
    cluster_bootstrap,
    resample_weights,
)


def _direct_type_balanced_mean(values, types, clusters, drawn):
    """The statistic on one resample, the slow way: rebuild the resampled rows, then mean per type."""
    rows = [(v, t) for index in drawn for v, t, c in zip(values, types, clusters) if c == index]
    per_type = []
    for qa_type in sorted(set(types)):
        selected = [v for v, t in rows if t == qa_type]
        if selected:
            per_type.append(sum(selected) / len(selected))
    return sum(per_type) / len(per_type)


def test_interval_equals_a_direct_computation():
    rng = np.random.default_rng(3)
    clusters = np.repeat(np.arange(7), 4)
    types = np.tile(["factual", "factual", "reasoning", "factual"], 7)
    values = rng.random(len(clusters))
    config = BootstrapConfig(n_resamples=200, seed=11)
    interval = cluster_bootstrap(values, types, clusters, config)
    # The same draws, by hand: n_clusters cluster indices per resample, with replacement.
    drawn = np.random.default_rng(11).integers(0, 7, size=(200, 7))
    direct = np.array([_direct_type_balanced_mean(values, types, clusters, row) for row in drawn])
    assert interval.low == pytest.approx(np.percentile(direct, 2.5))
    assert interval.high == pytest.approx(np.percentile(direct, 97.5))
    factual, reasoning = values[types == "factual"].mean(), values[types == "reasoning"].mean()
    assert interval.estimate == pytest.approx((factual + reasoning) / 2)


def test_weights_count_draws_per_cluster():
    weights = resample_weights(5, BootstrapConfig(n_resamples=50, seed=0), np.random.default_rng(0))
    assert weights.shape == (50, 5) and (weights.sum(1) == 5).all()


def _population(rng, patients, shift):
    """``patients`` patients with 6 QA each; a per-patient effect makes the QA of one patient correlated."""
    clusters = np.repeat(np.arange(patients), 6)
    effect = rng.normal(0, 0.1, patients)[clusters]
    values = shift + effect + rng.normal(0, 0.05, len(clusters))
    types = np.tile(["factual", "reasoning"], patients * 3)
    return ClusteredValues.of(values, types, clusters)


def test_a_planted_difference_is_detected():
    rng = np.random.default_rng(0)
    difference = bootstrap_difference(
        _population(rng, 40, -0.3), _population(rng, 40, -0.05), BootstrapConfig(n_resamples=500, seed=1)
    )
    assert difference.high < 0 and difference.excludes_zero() and difference.p_value < 0.01
    assert difference.estimate == pytest.approx(-0.25, abs=0.08)


def test_without_a_difference_the_interval_holds_zero_at_about_the_stated_level():
    """Over 60 seeds of null data, a 90% interval should exclude 0 in about 10% of them (measured: 6 of 60;
    allowed: at most 15)."""
    excluded = 0
    for seed in range(60):
        rng = np.random.default_rng(100 + seed)
        difference = bootstrap_difference(
            _population(rng, 15, -0.1),
            _population(rng, 15, -0.1),
            BootstrapConfig(n_resamples=300, level=0.9, seed=seed),
        )
        excluded += difference.excludes_zero()
    assert excluded <= 15


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="types"):
        cluster_bootstrap([0.1, 0.2], ["factual"], ["p1", "p2"])
    with pytest.raises(ValueError, match="values"):
        cluster_bootstrap([float("nan")], ["factual"], ["p1"])
    with pytest.raises(ValueError, match="level"):
        BootstrapConfig(level=1.5)
