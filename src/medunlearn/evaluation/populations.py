"""The patient populations an unlearned model is scored on, read from an AMNESIA folder.

For a forget config (``forget_10`` or ``disease_cancer_forget_10``) the paper reports four populations,
each broken down by QA type:

- ``forget_seen``: the forget patients' seen QA (the config's ``train`` split), the text unlearning targeted;
- ``forget_holdout``: the forget patients' unseen QA (``holdout``), to see whether their information can
  still be recovered through questions the model never saw;
- ``retain_same_disease``: seen QA of retained patients whose disease is one of the forget patients'
  diseases (where the paper finds collateral damage);
- ``retain_out_of_disease``: seen QA of the other retained patients.

The same-disease rule is ours: "a disease present among the forget patients". For a disease-level forget
set that is exactly the target disease; for a random forget set it covers most diseases, so the
out-of-disease population is small or empty there, which is what the definition implies.
Retained populations are capped by a seeded sample of *patients* (all QA of a sampled patient are kept, so
the factual / reasoning balance of the data is preserved).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.data_loading import check_text_fields, load_config, retain_config_for, split_source
from medunlearn.errors import MedunlearnError
from medunlearn.utils.user_files import existing_folder

FORGET_SEEN = "forget_seen"
FORGET_HOLDOUT = "forget_holdout"
RETAIN_SAME_DISEASE = "retain_same_disease"
RETAIN_OUT_OF_DISEASE = "retain_out_of_disease"
POPULATIONS = (FORGET_SEEN, FORGET_HOLDOUT, RETAIN_SAME_DISEASE, RETAIN_OUT_OF_DISEASE)
FORGET_POPULATIONS = (FORGET_SEEN, FORGET_HOLDOUT)
RETAIN_POPULATIONS = (RETAIN_SAME_DISEASE, RETAIN_OUT_OF_DISEASE)

QA_COLUMNS = ("qa_id", "patient_id", "disease", "qa_type", "question", "answer")
EXAMPLE_COLUMNS = ("example_id", "population", *QA_COLUMNS, "disease_keywords")
# Kept when the QA rows have them (TOFU-style answer variants, scored by the runner for the truth ratio).
OPTIONAL_COLUMNS = ("paraphrased_answer", "perturbed_answers")


class PopulationError(MedunlearnError, ValueError):
    """The AMNESIA folder or forget config cannot give the populations (message says which and why)."""


@dataclass
class PopulationConfig:
    """How populations are drawn.

    Args:
        max_retain_patients: at most this many patients per retained population (seeded sample);
            ``None`` keeps every retained patient.
        seed: seed of that sample, so two evaluations of different models see the same patients.
    """

    max_retain_patients: int | None = 100
    seed: int = 0


def same_disease_mask(retained_diseases, forget_diseases) -> np.ndarray:
    """Boolean mask over retained rows: is the row's disease one of the forget patients' diseases."""
    return np.isin(
        np.asarray(retained_diseases, dtype=object), np.unique(np.asarray(forget_diseases, dtype=object))
    )


def sample_patients(patient_ids, cap: int | None, seed: int) -> np.ndarray:
    """A seeded sample of at most ``cap`` distinct patient ids (sorted first, so input order does not
    matter)."""
    unique = np.unique(np.asarray(patient_ids, dtype=str))
    if cap is None or len(unique) <= cap:
        return unique
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(unique, size=cap, replace=False))


def _check_columns(frame: pd.DataFrame, source: str) -> None:
    missing = [column for column in QA_COLUMNS if column not in frame.columns]
    if missing:
        raise PopulationError(
            f"{source} lacks column(s) {', '.join(missing)}; QA rows need {', '.join(QA_COLUMNS)}"
        )


def _as_frame(split, source: str) -> pd.DataFrame:
    frame = split.to_pandas() if hasattr(split, "to_pandas") else pd.DataFrame(split)
    _check_columns(frame, source)
    return frame.loc[:, [*QA_COLUMNS, *[c for c in OPTIONAL_COLUMNS if c in frame.columns]]].copy()


def build_populations(forget, retain, notes=None, config: PopulationConfig | None = None) -> pd.DataFrame:
    """The examples table: one row per scored QA, columns ``EXAMPLE_COLUMNS``.

    Args:
        forget: the forget config, a mapping with splits ``train`` and ``holdout`` (``DatasetDict`` or dict of
            ``Dataset`` / DataFrame) of QA rows.
        retain: the paired retain config (its ``train`` split is used).
        notes: the ``notes`` config (``patient_id``, ``disease_keywords``) giving each forget patient's
            disease keywords for the leakage score; without it the keyword lists are empty.
        config: sample caps and seed.
    """
    config = config or PopulationConfig()
    forget_seen = _as_frame(forget["train"], "forget config split 'train'")
    forget_holdout = _as_frame(forget["holdout"], "forget config split 'holdout'")
    retained = _as_frame(retain["train"], "retain config split 'train'")

    overlap = np.intersect1d(retained["patient_id"].astype(str), forget_seen["patient_id"].astype(str))
    if len(overlap):
        raise PopulationError(f"patient {overlap[0]} is in both the forget and the retain config")

    forget_diseases = pd.concat([forget_seen["disease"], forget_holdout["disease"]]).to_numpy()
    same = same_disease_mask(retained["disease"].to_numpy(), forget_diseases)
    frames = {FORGET_SEEN: forget_seen, FORGET_HOLDOUT: forget_holdout}
    # Distinct seeds per population so the two samples are independent draws.
    for offset, (name, rows) in enumerate(
        ((RETAIN_SAME_DISEASE, retained[same]), (RETAIN_OUT_OF_DISEASE, retained[~same]))
    ):
        keep = sample_patients(rows["patient_id"], config.max_retain_patients, config.seed + offset)
        frames[name] = rows[rows["patient_id"].astype(str).isin(keep)]

    examples = pd.concat([frame.assign(population=name) for name, frame in frames.items()], ignore_index=True)
    examples["example_id"] = examples["population"] + "/" + examples["qa_id"].astype(str)
    if examples["example_id"].duplicated().any():
        duplicate = examples.loc[examples["example_id"].duplicated(), "example_id"].iloc[0]
        raise PopulationError(
            f"qa_id {duplicate.split('/', 1)[1]!r} appears twice in population {duplicate.split('/')[0]}"
        )
    examples["disease_keywords"] = _keywords_for(examples, notes)
    examples = examples.sort_values(
        ["population", "patient_id", "qa_id"], kind="stable", key=_population_order
    )
    optional = [c for c in OPTIONAL_COLUMNS if c in examples.columns]
    return examples.loc[:, [*EXAMPLE_COLUMNS, *optional]].reset_index(drop=True)


def _population_order(column: pd.Series) -> pd.Series:
    if column.name == "population":
        return column.map({name: index for index, name in enumerate(POPULATIONS)})
    return column.astype(str)


def _keywords_for(examples: pd.DataFrame, notes) -> list[list[str]]:
    """Each forget example's patient keywords; retained rows get an empty list (LS is a forget-set score)."""
    empty: list[str] = []
    if notes is None:
        return [empty] * len(examples)
    notes_frame = notes.to_pandas() if hasattr(notes, "to_pandas") else pd.DataFrame(notes)
    if "disease_keywords" not in notes_frame.columns or "patient_id" not in notes_frame.columns:
        raise PopulationError("notes config lacks column 'patient_id' or 'disease_keywords'")
    by_patient = dict(zip(notes_frame["patient_id"].astype(str), notes_frame["disease_keywords"]))
    is_forget = examples["population"].isin(FORGET_POPULATIONS).to_numpy()
    patients = examples["patient_id"].astype(str).to_numpy()
    return [list(by_patient.get(pid, empty)) if forget else empty for pid, forget in zip(patients, is_forget)]


def load_populations(
    data_dir: str | Path, forget_config: str, config: PopulationConfig | None = None
) -> pd.DataFrame:
    """``build_populations`` on an AMNESIA folder (read offline with ``datasets.load_dataset``)."""
    data_dir = existing_folder(data_dir, "AMNESIA folder")  # missing, or a file: each named as what it is
    retain_config = retain_config_for(forget_config)
    # load_config reads the folder's current files: `datasets` would cache a local folder by its name.
    try:
        forget, retain, notes = (
            load_config(data_dir, name) for name in (forget_config, retain_config, "notes")
        )
    except MedunlearnError:
        raise  # already names the file and field (medunlearn.data_loading.check_local_folder)
    except ValueError as error:  # datasets raises ValueError for an unknown config name
        raise PopulationError(f"{data_dir}: cannot load config: {error}") from error
    for name, dataset in ((forget_config, forget), (retain_config, retain)):
        for split in ("train", "holdout"):
            if split not in dataset:
                raise PopulationError(f"{data_dir}: config {name!r} has no split {split!r}")
            check_text_fields(dataset[split], QA_COLUMNS, split_source(data_dir, name, split))
    return build_populations(forget, retain, notes["train"], config)
