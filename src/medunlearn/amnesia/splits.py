"""AMNESIA splits (docs/benchmarks/amnesia.md, "Splits"), built with array operations only.

- *holdout*: ``holdout_per_type`` QA of each type per patient, drawn by seed, never trained on;
  the rest are the patient's *seen* QA.
- *random patient level*: one seeded permutation of the patients; ``forget_X`` is its first
  ``round(X% · N)`` patients, so ``forget_5 ⊂ forget_10 ⊂ …`` holds by construction; ``retain_{100-X}`` is the
  complement.
- *disease level* for a disease D: the same number of patients as ``forget_X``, all from D. D's patients are
  ordered by their position in the random permutation and ``disease_D_forget_X`` takes a prefix of that order.
  That prefix is nested in X, and since every D patient in ``forget_X`` has a smaller position than any D
  patient outside it, it contains every D patient of ``forget_X``. A percentage exists only when D has at
  least that many patients; omitted ones are recorded with the reason.

Splits are by patient: a patient's QA are all in forget or all in retain.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from medunlearn.config_names import forget_config, retain_config_for
from medunlearn.ontology.amnesia import DISEASE_LEVEL_DEFAULT, QA_TYPES

FORGET_PERCENTAGES = (5, 10, 15, 20, 25)


@dataclass(frozen=True)
class SplitConfig:
    """Split parameters; the defaults are the paper's."""

    seed: int = 0
    forget_percentages: tuple[int, ...] = FORGET_PERCENTAGES
    disease_level: tuple[str, ...] = DISEASE_LEVEL_DEFAULT
    holdout_per_type: int = 1


@dataclass
class AmnesiaSplits:
    """Which patients are forgotten in each config, and which QA rows are holdout.

    ``patient_ids`` is sorted; every mask over patients is aligned with it. ``is_holdout`` is aligned with the
    rows of the QA table the splits were built from.
    """

    patient_ids: np.ndarray
    diseases: np.ndarray
    is_holdout: np.ndarray
    permutation_rank: np.ndarray
    forget_masks: dict[str, np.ndarray] = field(default_factory=dict)
    omitted: dict[str, str] = field(default_factory=dict)

    def retain_name(self, forget_name: str) -> str:
        return retain_config_name(forget_name)


def forget_size(percentage: int, patients: int) -> int:
    """``round(percentage% · patients)`` with halves rounded up (integer arithmetic, no float ties).

    >>> forget_size(5, 8820), forget_size(25, 8820), forget_size(5, 10)
    (441, 2205, 1)
    """
    return (2 * percentage * patients + 100) // 200


def retain_config_name(forget_name: str) -> str:
    """``forget_10`` → ``retain_90``; ``disease_cancer_forget_5`` → ``disease_cancer_retain_95``
    (:func:`medunlearn.config_names.retain_config_for`)."""
    return retain_config_for(forget_name)


def select_holdout(
    group_codes: np.ndarray, canonical_order: np.ndarray, per_type: int, rng: np.random.Generator
) -> np.ndarray:
    """Boolean mask: ``per_type`` random rows of each group (a group = one patient's QA of one type).

    ``canonical_order`` sorts the rows by QA id, so the draw depends on the seed and the set of QA ids, not on
    the row order of the input.
    """
    keys = np.empty(len(group_codes))
    keys[canonical_order] = rng.random(len(group_codes))
    by_group_then_key = np.lexsort((keys, group_codes))
    sorted_groups = group_codes[by_group_then_key]
    starts = np.r_[True, sorted_groups[1:] != sorted_groups[:-1]]
    start_index = np.maximum.accumulate(np.where(starts, np.arange(len(starts)), 0))
    rank_in_group = np.arange(len(starts)) - start_index
    mask = np.zeros(len(group_codes), dtype=bool)
    mask[by_group_then_key[rank_in_group < per_type]] = True
    return mask


def build_splits(notes: pa.Table, qa: pa.Table, config: SplitConfig = SplitConfig()) -> AmnesiaSplits:
    """Compute every split of docs/benchmarks/amnesia.md from validated ``notes`` and ``qa`` tables."""
    holdout_seed, forget_seed = np.random.SeedSequence(config.seed).spawn(2)
    patient_ids = notes["patient_id"].to_numpy(zero_copy_only=False).astype(str)
    diseases = notes["disease"].to_numpy(zero_copy_only=False).astype(str)
    order = np.argsort(patient_ids, kind="stable")
    patient_ids, diseases = patient_ids[order], diseases[order]
    n = len(patient_ids)

    # Integer group codes (patient index × type index) instead of string keys: sorting ints is fast.
    patient_codes = pc.index_in(qa["patient_id"], value_set=pa.array(patient_ids)).to_numpy(
        zero_copy_only=False
    )
    type_codes = pc.index_in(qa["qa_type"], value_set=pa.array(QA_TYPES)).to_numpy(zero_copy_only=False)
    is_holdout = select_holdout(
        patient_codes.astype(np.int64) * len(QA_TYPES) + type_codes,
        pc.sort_indices(qa["qa_id"]).to_numpy(),
        config.holdout_per_type,
        np.random.default_rng(holdout_seed),
    )

    rank = np.empty(n, dtype=np.int64)
    rank[np.random.default_rng(forget_seed).permutation(n)] = np.arange(n)
    splits = AmnesiaSplits(patient_ids, diseases, is_holdout, rank)

    for percentage in config.forget_percentages:
        size = forget_size(percentage, n)
        name = forget_config(percentage)
        if size == 0:
            splits.omitted[name] = f"{percentage}% of {n} patients rounds to 0 patients"
            continue
        splits.forget_masks[name] = rank < size

    for disease in config.disease_level:
        in_disease = diseases == disease
        disease_positions = np.flatnonzero(in_disease)
        # D's patients in the order they enter the random split; a prefix of it is each disease-level set.
        by_entry = disease_positions[np.argsort(rank[disease_positions], kind="stable")]
        for percentage in config.forget_percentages:
            size = forget_size(percentage, n)
            name = forget_config(percentage, disease)
            if size == 0:
                splits.omitted[name] = f"{percentage}% of {n} patients rounds to 0 patients"
                continue
            if size > len(by_entry):
                splits.omitted[name] = (
                    f"needs {size} patients ({percentage}% of {n}) but {disease} has {len(by_entry)}"
                )
                continue
            mask = np.zeros(n, dtype=bool)
            mask[by_entry[:size]] = True
            splits.forget_masks[name] = mask
    return splits


__all__ = [
    "QA_TYPES",
    "FORGET_PERCENTAGES",
    "SplitConfig",
    "AmnesiaSplits",
    "build_splits",
    "forget_size",
    "retain_config_name",
    "select_holdout",
]
