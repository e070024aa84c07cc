"""Intervals for what evaluation folders report: MU, ΔMU and the same- vs out-of-disease comparison.

The resampling is :mod:`medunlearn.metrics.bootstrap` (a cluster bootstrap over patients, ours). The question
the paper's headline finding asks is whether retained patients *with the forgotten disease* lose more MU than
the other retained patients. With ΔMU_p = MU_p(after) − MU_p(before) for population p, the difference

    D = ΔMU_same-disease − ΔMU_out-of-disease

is negative when the same-disease patients lost more. The verdict [ours] is "appears" only when the whole
interval of D lies below 0, "opposite" when it lies above 0, and otherwise "not distinguishable at this size".

Per-example tables of several training runs of one setting (a study's seeds), concatenated, carry each row's
run in the ``TRAINING_SEED`` column; :func:`mu_interval` and :func:`afe_interval` then report the mean over
runs with the two-level bootstrap, training seeds then patients (:mod:`medunlearn.metrics.bootstrap`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from medunlearn.errors import MedunlearnError
from medunlearn.evaluation.populations import RETAIN_OUT_OF_DISEASE, RETAIN_SAME_DISEASE
from medunlearn.metrics.bootstrap import (
    BootstrapConfig,
    ClusteredValues,
    Difference,
    Interval,
    afe_cluster_bootstrap,
    bootstrap_difference,
    cluster_bootstrap,
)
from medunlearn.utils.user_files import read_parquet_frame

PER_EXAMPLE = "per_example.parquet"
TRAINING_SEED = "training_seed"  # the run of each row in a concatenation of several runs' per-example tables
APPEARS, OPPOSITE, NOT_DISTINGUISHABLE = "appears", "opposite", "not distinguishable at this size"


class UncertaintyInputError(MedunlearnError, ValueError):
    """Evaluation folders that cannot be paired (missing file, different examples)."""


@dataclass(frozen=True)
class CollateralComparison:
    """ΔMU of both retained populations and their difference D, with intervals."""

    delta_same: Interval
    delta_out: Interval
    difference: Difference
    config: BootstrapConfig

    @property
    def verdict(self) -> str:
        if self.difference.high < 0:
            return APPEARS
        if self.difference.low > 0:
            return OPPOSITE
        return NOT_DISTINGUISHABLE

    def to_dict(self) -> dict:
        return {
            "delta_mu_same_disease": self.delta_same.to_dict(),
            "delta_mu_out_of_disease": self.delta_out.to_dict(),
            "difference": self.difference.to_dict(),
            "verdict": self.verdict,
            "bootstrap": {
                "n_resamples": self.config.n_resamples,
                "level": self.config.level,
                "seed": self.config.seed,
                "clusters": "patients",
            },
        }


def read_per_example(eval_dir: str | os.PathLike) -> pd.DataFrame:
    path = Path(eval_dir) / PER_EXAMPLE
    if not path.is_file():
        raise UncertaintyInputError(f"{eval_dir} has no {PER_EXAMPLE}: not a finished evaluation folder")
    return read_parquet_frame(
        path, columns=["example_id", "population", "patient_id", "qa_type", "similarity"]
    )


def paired_changes(after: pd.DataFrame, before: pd.DataFrame, population: str) -> pd.DataFrame:
    """One row per QA of ``population``: ``change`` = similarity after − before, paired by example id."""
    rows_after = after[after["population"] == population]
    rows_before = before[before["population"] == population].set_index("example_id")["similarity"]
    if rows_after.empty:
        raise UncertaintyInputError(f"population {population!r} is empty in this evaluation")
    missing = ~rows_after["example_id"].isin(rows_before.index)
    if missing.any():
        raise UncertaintyInputError(
            f"example {rows_after['example_id'][missing].iloc[0]!r} of {population!r} has no before score: "
            "evaluate both models with the same data, forget config and population settings"
        )
    changes = rows_after[["patient_id", "qa_type"]].copy()
    changes["change"] = (
        rows_after["similarity"].to_numpy() - rows_before.loc[rows_after["example_id"]].to_numpy()
    )
    return changes


def _clustered(changes: pd.DataFrame) -> ClusteredValues:
    return ClusteredValues.of(
        changes["change"].to_numpy(), changes["qa_type"].tolist(), changes["patient_id"].tolist()
    )


def collateral_comparison(
    after_dir, before_dir, config: BootstrapConfig | None = None
) -> CollateralComparison:
    """ΔMU same-disease, ΔMU out-of-disease and D, from the evaluation folders of the unlearned model and of
    the model before unlearning (the same forget config and population settings)."""
    config = config or BootstrapConfig()
    after, before = read_per_example(after_dir), read_per_example(before_dir)
    same = paired_changes(after, before, RETAIN_SAME_DISEASE)
    out = paired_changes(after, before, RETAIN_OUT_OF_DISEASE)

    def interval(changes):
        return cluster_bootstrap(
            changes["change"].to_numpy(), changes["qa_type"].tolist(), changes["patient_id"].tolist(), config
        )

    return CollateralComparison(
        interval(same), interval(out), bootstrap_difference(_clustered(same), _clustered(out), config), config
    )


def _seeds(rows: pd.DataFrame) -> list | None:
    """Each row's training run when the table concatenates several (``TRAINING_SEED``), else ``None``."""
    return rows[TRAINING_SEED].tolist() if TRAINING_SEED in rows else None


def mu_interval(
    per_example: pd.DataFrame, population: str, qa_type: str = "all", config: BootstrapConfig | None = None
) -> Interval | None:
    """MU of one population (one QA type, or ``"all"``: the type-balanced mean) with its patient-bootstrap
    interval; ``None`` when the population has no scored rows. With a ``TRAINING_SEED`` column: the mean over
    runs with its two-level (seeds, then patients) interval."""
    rows = per_example[per_example["population"] == population]
    if qa_type != "all":
        rows = rows[rows["qa_type"] == qa_type]
    rows = rows[rows["similarity"].notna()] if "similarity" in rows else rows.iloc[:0]
    if rows.empty:
        return None
    return cluster_bootstrap(
        rows["similarity"].to_numpy(),
        rows["qa_type"].tolist(),
        rows["patient_id"].tolist(),
        config,
        seeds=_seeds(rows),
    )


def afe_interval(
    after: pd.DataFrame,
    before: pd.DataFrame,
    population: str = "forget_seen",
    qa_type: str = "all",
    config: BootstrapConfig | None = None,
) -> Interval | None:
    """AFE of one forget population (one QA type or ``"all"``) with its patient-bootstrap interval
    (:func:`medunlearn.metrics.bootstrap.afe_cluster_bootstrap`): ``after`` and ``before`` are per-example
    tables of the unlearned model and of the model before unlearning, paired by ``example_id``. ``None`` when
    the population has no scored rows. With a ``TRAINING_SEED`` column in ``after`` (several unlearning
    runs, each paired with the one before model): the mean of the runs' AFE with its two-level interval."""
    rows = after[(after["population"] == population) & after["similarity"].notna()]
    if qa_type != "all":
        rows = rows[rows["qa_type"] == qa_type]
    if rows.empty:
        return None
    changes = paired_changes(rows, before, population)
    before_values = rows["similarity"].to_numpy() - changes["change"].to_numpy()
    return afe_cluster_bootstrap(
        rows["similarity"].to_numpy(), before_values, rows["patient_id"].tolist(), config, seeds=_seeds(rows)
    )
