"""``collateral_comparison``, the function behind the demo's "appears" verdict, against an independent
computation: plain loops over a patient-clustered bootstrap with the same draws (``numpy.random.default_rng``
of the configured seed; patients in sorted order of their ids)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medunlearn.evaluation.uncertainty import APPEARS, NOT_DISTINGUISHABLE, collateral_comparison
from medunlearn.metrics.bootstrap import BootstrapConfig

TYPES = ("factual", "reasoning")


def _evaluation_folders(tmp_path, rng, loss_same: float, loss_out: float, patients: int = 12):
    """Before and after folders: per retained population ``patients`` patients with 3 QA (2 factual, 1
    reasoning, so the type balancing matters); after = before − loss + per-patient and per-QA noise."""
    before, after = [], []
    for population, loss, prefix in (
        ("retain_same_disease", loss_same, "s"),
        ("retain_out_of_disease", loss_out, "o"),
    ):
        for patient in range(patients):
            shift = rng.normal(0, 0.05)
            for index, qa_type in enumerate(("factual", "factual", "reasoning")):
                common = {
                    "example_id": f"{prefix}{patient}-{index}",
                    "population": population,
                    "patient_id": f"{prefix}{patient}",
                    "qa_type": qa_type,
                }
                prior = rng.uniform(0.5, 0.9)
                before.append({**common, "similarity": prior})
                after.append({**common, "similarity": prior - loss + shift + rng.normal(0, 0.03)})
    folders = []
    for name, rows in (("before", before), ("after", after)):
        folder = tmp_path / name
        folder.mkdir()
        pd.DataFrame(rows).sample(frac=1.0, random_state=1).to_parquet(folder / "per_example.parquet")
        folders.append(folder)
    return folders[1], folders[0], pd.DataFrame(before), pd.DataFrame(after)


def _changes_by_patient(before: pd.DataFrame, after: pd.DataFrame, population: str) -> dict:
    """``{patient: [(qa_type, after − before), ...]}`` for one population, paired by example id by hand."""
    prior = {row.example_id: row.similarity for row in before.itertuples()}
    by_patient: dict[str, list] = {}
    for row in after[after["population"] == population].itertuples():
        by_patient.setdefault(row.patient_id, []).append(
            (row.qa_type, row.similarity - prior[row.example_id])
        )
    return by_patient


def _balanced_mean(by_patient: dict, drawn: list[str]) -> float:
    """The type-balanced mean of the drawn patients' changes (a patient drawn twice counts twice)."""
    per_type = {}
    for patient in drawn:
        for qa_type, change in by_patient[patient]:
            per_type.setdefault(qa_type, []).append(change)
    return sum(sum(v) / len(v) for v in per_type.values()) / len(per_type)


def _draw(rng, patients: list[str], resamples: int) -> list[list[str]]:
    """Each resample: as many patients as there are, drawn with replacement (one matrix of draws)."""
    return [[patients[i] for i in row] for row in rng.integers(0, len(patients), (resamples, len(patients)))]


def _independent(before, after, config: BootstrapConfig) -> dict:
    """ΔMU of both populations and D, by plain loops. Seed convention: each ΔMU interval draws from a fresh
    ``default_rng(seed)``; D draws the same-disease resamples, then the out-of-disease ones, from one."""
    same = _changes_by_patient(before, after, "retain_same_disease")
    out = _changes_by_patient(before, after, "retain_out_of_disease")
    same_ids, out_ids = sorted(same), sorted(out)
    tail = (1 - config.level) / 2 * 100

    def interval(estimate, draws):
        low, high = np.percentile(draws, [tail, 100 - tail])
        return estimate, low, high

    delta_same = [_balanced_mean(same, d) for d in _draw(np.random.default_rng(config.seed), same_ids, 300)]
    delta_out = [_balanced_mean(out, d) for d in _draw(np.random.default_rng(config.seed), out_ids, 300)]
    rng = np.random.default_rng(config.seed)  # one generator: the same-disease draws first
    same_draws, out_draws = _draw(rng, same_ids, 300), _draw(rng, out_ids, 300)
    differences = [_balanced_mean(same, a) - _balanced_mean(out, b) for a, b in zip(same_draws, out_draws)]
    return {
        "same": interval(_balanced_mean(same, same_ids), delta_same),
        "out": interval(_balanced_mean(out, out_ids), delta_out),
        "difference": interval(_balanced_mean(same, same_ids) - _balanced_mean(out, out_ids), differences),
    }


def _assert_equal(comparison, expected):
    for name, got in (
        ("same", comparison.delta_same),
        ("out", comparison.delta_out),
        ("difference", comparison.difference),
    ):
        assert (got.estimate, got.low, got.high) == pytest.approx(expected[name], abs=1e-12), name


def test_a_planted_same_disease_loss_appears_and_equals_the_independent_computation(tmp_path):
    after_dir, before_dir, before, after = _evaluation_folders(
        tmp_path, np.random.default_rng(0), loss_same=0.25, loss_out=0.0
    )
    config = BootstrapConfig(n_resamples=300, seed=9)
    comparison = collateral_comparison(after_dir, before_dir, config)
    expected = _independent(before, after, config)
    _assert_equal(comparison, expected)
    assert comparison.verdict == APPEARS
    assert comparison.difference.estimate == pytest.approx(-0.25, abs=0.06)


def test_without_a_difference_it_does_not_appear_and_equals_the_independent_computation(tmp_path):
    after_dir, before_dir, before, after = _evaluation_folders(
        tmp_path, np.random.default_rng(1), loss_same=0.1, loss_out=0.1
    )
    config = BootstrapConfig(n_resamples=300, level=0.9, seed=2)
    comparison = collateral_comparison(after_dir, before_dir, config)
    _assert_equal(comparison, _independent(before, after, config))
    assert comparison.verdict == NOT_DISTINGUISHABLE
    assert comparison.delta_same.high < 0 and comparison.delta_out.high < 0  # both lost, by the same amount
