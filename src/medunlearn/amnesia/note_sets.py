r"""The patients' notes as sets: what unlearning on notes forgets and what verbatim memorization scores.

An AMNESIA folder's ``notes`` config holds one note per patient, every patient of ``full``; fine-tuning's
first stage (``medunlearn finetune``, docs/cli.md) trains on all of them, each as the document
``title + "\n" + note`` (:func:`note_document`). So a note's *membership* follows the patient:

* **forget**: the notes of the forget config's patients (its ``train`` and ``holdout`` splits: a patient whose
  QA were all drawn into ``holdout`` is a forget patient still);
* **retain_same_disease** / **retain_other_disease** [ours]: every other patient's note, split by whether
  the patient's disease is one of the forget patients' diseases (collateral near and far from the forget set);
* **holdout**: notes the model never saw: the ``holdout_notes`` config (notes of extra patients that
  ``amnesia build`` draws for the synthetic cohort; fine-tuning reads only ``notes`` and ``full``). Each QA
  config's ``holdout`` split is not such a set: it holds unseen **questions** of patients whose notes stage 1
  trained on. When fine-tuning left some of the folder's own patients out, name them (``holdout_patients``)
  and they move from the retain sets to ``holdout`` too. A folder without ``holdout_notes`` (PMC-Patients)
  and no named patients has an empty set, and no notes privleak.

The evaluation's note populations (:mod:`medunlearn.evaluation.notes_memorization`) take the retained
patients of the QA populations instead (the same seeded sample as MU); these sets keep every patient.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from medunlearn.config_names import folder_configs
from medunlearn.data_loading import check_text_fields, load_split, split_source
from medunlearn.errors import InputError

HOLDOUT_NOTES = "holdout_notes"  # medunlearn.amnesia.hub's name of the config

NOTE_SETS = ("forget", "retain_same_disease", "retain_other_disease", "holdout")
QA_SPLITS = ("train", "holdout")


class NoteSetError(InputError):
    """A note set that cannot be formed (a held-out patient who is a forget patient, or has no note)."""


def note_document(title: str, note: str) -> str:
    r"""The text fine-tuning's notes stage trains on for one patient (one home: ``medunlearn finetune`` and
    unlearning on notes both use it).

    >>> note_document("Chest pain", "A 54-year-old man ...")
    'Chest pain\nA 54-year-old man ...'
    """
    return f"{title}\n{note}"


def config_patient_ids(folder: str | os.PathLike, config: str) -> list[str]:
    """The sorted patient ids of a QA config (forget or retain), over its ``train`` and ``holdout`` splits."""
    ids = {pid for split in QA_SPLITS for pid in load_split(folder, config, split)["patient_id"]}
    return sorted(ids)


def load_notes(folder: str | os.PathLike, config: str = "notes"):
    """The ``train`` split of a notes config (``notes``, or ``holdout_notes``), every patient id, title and
    note text: a null would be trained and scored as the text ``"None"`` (named by data file, row and field
    instead)."""
    notes = load_split(folder, config)
    check_text_fields(notes, ("patient_id", "title", "note"), split_source(folder, config, "train"))
    return notes


def note_rows(folder: str | os.PathLike, config: str = "notes") -> list[dict]:
    """Every note of ``config`` (``notes``, or ``holdout_notes``) as ``{patient_id, disease, title, note,
    text}``, sorted by patient id; ``text`` is :func:`note_document`."""
    notes = load_notes(folder, config)
    rows = [
        {
            "patient_id": pid,
            "disease": disease,
            "title": title,
            "note": note,
            "text": note_document(title, note),
        }
        for pid, disease, title, note in zip(
            notes["patient_id"], notes["disease"], notes["title"], notes["note"]
        )
    ]
    return sorted(rows, key=lambda row: row["patient_id"])


def holdout_note_rows(folder: str | os.PathLike) -> list[dict]:
    """The :func:`note_rows` of the ``holdout_notes`` config; ``[]`` when the folder's card lists none."""
    return note_rows(folder, HOLDOUT_NOTES) if HOLDOUT_NOTES in folder_configs(folder) else []


def notes_of_patients(folder: str | os.PathLike, patient_ids: Iterable[str]) -> list[dict]:
    """The :func:`note_rows` of ``patient_ids`` (sorted by patient id)."""
    wanted = set(patient_ids)
    return [row for row in note_rows(folder) if row["patient_id"] in wanted]


def _check_holdout(holdout: set[str], forget: set[str], known: set[str], forget_config: str) -> None:
    for pid in sorted(holdout):
        if pid not in known:
            raise NoteSetError(f"holdout patient {pid!r} has no note in the folder's notes config")
        if pid in forget:
            raise NoteSetError(
                f"holdout patient {pid!r} is a forget patient of {forget_config}: a held-out note must be "
                "one the model never saw, and the forget notes were trained on"
            )


def notes_for_memorization(
    folder: str | os.PathLike, forget_config: str, holdout_patients: Iterable[str] = ()
) -> dict[str, list[dict]]:
    """The four note sets of verbatim memorization and notes privleak (module docstring), each a list of
    ``{patient_id, disease, title, note, text}`` sorted by patient id.

    ``holdout``: the ``holdout_notes`` config's notes, and those of ``holdout_patients``: patients of the
    folder whose notes fine-tuning left out (none in ``medunlearn finetune``'s runs, which train every note);
    they must have a note and not be forget patients (:class:`NoteSetError`).
    """
    rows = note_rows(folder)
    forget = set(config_patient_ids(folder, forget_config))
    holdout = set(holdout_patients)
    _check_holdout(holdout, forget, {row["patient_id"] for row in rows}, forget_config)
    forget_diseases = {row["disease"] for row in rows if row["patient_id"] in forget}
    sets: dict[str, list[dict]] = {name: [] for name in NOTE_SETS}
    for row in rows:
        if row["patient_id"] in forget:
            sets["forget"].append(row)
        elif row["patient_id"] in holdout:
            sets["holdout"].append(row)
        elif row["disease"] in forget_diseases:
            sets["retain_same_disease"].append(row)
        else:
            sets["retain_other_disease"].append(row)
    sets["holdout"] = sorted(sets["holdout"] + holdout_note_rows(folder), key=lambda row: row["patient_id"])
    return sets


__all__ = [
    "NOTE_SETS",
    "NoteSetError",
    "config_patient_ids",
    "holdout_note_rows",
    "load_notes",
    "note_document",
    "note_rows",
    "notes_for_memorization",
    "notes_of_patients",
]
