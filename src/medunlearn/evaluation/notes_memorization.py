r"""Verbatim memorization of AMNESIA patient notes, MUSE-style [ours, after MUSE's C1 and C3].

Fine-tuning's first stage reads every patient's note as raw text (``title + "\n" + note``,
:func:`medunlearn.amnesia.note_sets.note_document`). This module asks how much of that text a model can still
reproduce, with MUSE's verbatim-memorization and privacy-leakage measurements
(:mod:`medunlearn.metrics.verbatim_memorization`, :mod:`medunlearn.metrics.privleak`) run on notes through
the one evaluation runner, rendered as raw text (:class:`~medunlearn.evaluation.raw_text.RawTextRendering`).

Metric card
-----------
**Populations.** The patients of the QA populations (:mod:`medunlearn.evaluation.populations`), so the
notes are scored on the same patients as AFE and MU: ``forget`` (every patient of the forget config:
``forget_seen`` ∪ ``forget_holdout``), ``retain_same_disease`` and ``retain_out_of_disease`` (the same seeded
sample of retained patients as MU), and ``holdout`` (the folder's ``holdout_notes`` config: patients outside
the folder, whose notes fine-tuning never reads), restricted to the forget patients' diseases [ours]:
members and non-members come from one distribution, so a disease-level forget set (all cancer) is compared
with held-out cancer notes only, not with notes whose vocabulary alone would tell them apart.

**Prefix and continuation [ours].** With the document's words ``w_1 … w_n`` (maximal runs of non-space
characters) and :class:`NotesMemorizationConfig`'s ``P = prefix_words`` (default 32) and
``C = continuation_words`` (default 64):

* ``prefix`` = the document's text up to the end of ``w_P``;
* ``continuation`` = the text after it up to the end of ``w_min(P+C, n)`` (its leading space or newline
  kept, as MUSE's ``" " + gt``); a document of ``n ≤ P`` words has no continuation and is not scored
  (the count is reported as ``too_short``).

Words, not tokens, so every model (before, after, retain) is scored on the same text whatever its tokenizer.

**Verbatim memorization.** The model continues ``prefix`` greedily for ``T`` new tokens (``max_new_tokens``,
default ``2·C``: room for ``C`` words of a BPE vocabulary); the decoded continuation is cut at the EOS text
(:func:`~medunlearn.metrics.verbatim_memorization.cut_generation`) and then to its first ``C`` words
(``g_C``), so that a word-perfect reproduction scores 1 whatever follows it. Per note:

    verbmem = ROUGE-L F1(g_C, continuation.strip())        (Porter stemming, rouge_score)
    ES      = 1 − k/|y|,  k the smallest index with argmax[k:] == y[k:]   (teacher-forced continuation y)

**Privacy leakage on notes.** Each forget and holdout document is scored whole under teacher forcing with
Min-K% Prob (``k = min_k``, default 0.4; :func:`medunlearn.metrics.privleak.min_k_scores`, higher = less
likely a member); ``AUC = P(score_holdout > score_forget) + ½·P(tie)``: 0.5 when the forget notes look as
unfamiliar as notes the model never saw, 1 when every one looks more familiar. With a retain model,
``privleak = ((1 − AUC) − (1 − AUC_retain)) / (1 − AUC_retain) × 100`` (MUSE's; 0 is ideal).

**Intervals.** Each population's mean, its before value and the paired change after − before are
patient-cluster bootstrap intervals (:func:`medunlearn.metrics.bootstrap.cluster_bootstrap`, one note per
patient); the AUC's interval resamples forget and holdout patients
(:func:`medunlearn.metrics.bootstrap.auc_bootstrap`).

**Limitations.** ROUGE counts surface overlap; a model that learnt the note templates (the synthetic cohort's)
reproduces their fixed words for any patient, so read the forget population against the retained ones
and against the model before unlearning, not against 0. Few holdout notes make the AUC coarse.

**Cost.** One greedy generation of ``T`` tokens per scored note (forget and sampled retained patients) and
one teacher-forced pass per forget and holdout note, for each model role: ``medunlearn evaluate
--notes-memorization`` turns it on.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from medunlearn.amnesia.note_sets import holdout_note_rows, note_rows
from medunlearn.errors import InputError
from medunlearn.evaluation.notes_settings import NotesMemorizationConfig
from medunlearn.evaluation.outputs_folder import PASSES, TEACHER_FORCED
from medunlearn.evaluation.populations import (
    FORGET_POPULATIONS,
    RETAIN_OUT_OF_DISEASE,
    RETAIN_SAME_DISEASE,
)
from medunlearn.evaluation.raw_text import RawTextRendering
from medunlearn.evaluation.roles import RoleRun

FORGET, HOLDOUT = "forget", "holdout"
NOTE_POPULATIONS = (FORGET, RETAIN_SAME_DISEASE, RETAIN_OUT_OF_DISEASE)  # scored for verbatim memorization
VERBMEM, PRIVLEAK = "verbmem", "privleak"
NOTES_RENDERING_ID = "amnesia notes raw text v1"  # enters the notes folders' fingerprints
NOTES_EXAMPLES = "notes_examples.parquet"
EXAMPLE_COLUMNS = ("example_id", "task", "population", "patient_id", "disease", "question", "answer")
_WORD = re.compile(r"\S+")


def split_document(text: str, prefix_words: int, continuation_words: int) -> tuple[str, str] | None:
    r"""``(prefix, continuation)`` of a note document (module docstring): the text to the end of word ``P``,
    then the text after it to the end of word ``P + C`` (or the last word); ``None`` when there are no more
    than ``P`` words.

    >>> split_document("Chest pain\nA 54-year-old man  was seen today.", 3, 2)
    ('Chest pain\nA', ' 54-year-old man')
    >>> split_document("Chest pain\nA 54-year-old man", 3, 10)
    ('Chest pain\nA', ' 54-year-old man')
    >>> split_document("Too short", 2, 5) is None
    True
    """
    words = list(_WORD.finditer(text))
    if len(words) <= prefix_words:
        return None
    cut = words[prefix_words - 1].end()
    end = words[min(prefix_words + continuation_words, len(words)) - 1].end()
    return text[:cut], text[cut:end]


def first_words(text: str, count: int) -> str:
    r"""The first ``count`` words of ``text`` joined by single spaces (the generation ``g_C`` is scored on).

    >>> first_words("  the right\ncoronary artery was occluded", 3)
    'the right coronary'
    """
    return " ".join(text.split()[:count])


def note_population_patients(qa_examples: pd.DataFrame) -> dict[str, list[str]]:
    """The patients of each note population (module docstring) from the QA examples table
    (:func:`~medunlearn.evaluation.populations.build_populations`' output), sorted."""
    patients = qa_examples["patient_id"].astype(str)
    population = qa_examples["population"]
    chosen = {
        FORGET: patients[population.isin(FORGET_POPULATIONS)],
        RETAIN_SAME_DISEASE: patients[population == RETAIN_SAME_DISEASE],
        RETAIN_OUT_OF_DISEASE: patients[population == RETAIN_OUT_OF_DISEASE],
    }
    return {name: sorted(set(ids)) for name, ids in chosen.items()}


def _example(task: str, population: str, row: dict, question: str, answer: str) -> dict:
    return {
        "example_id": f"{task}/{population}/{row['patient_id']}",
        "task": task,
        "population": population,
        "patient_id": row["patient_id"],
        "disease": row["disease"],
        "question": question,
        "answer": answer,
    }


def build_note_examples(
    notes: list[dict],
    holdout_notes: list[dict],
    patients: dict[str, list[str]],
    config: NotesMemorizationConfig | None = None,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """The runner examples of notes memorization and, per population, how many notes were too short to cut.

    ``notes`` / ``holdout_notes`` are :func:`~medunlearn.amnesia.note_sets.note_rows` (``patient_id``,
    ``disease``, ``text``), ``patients`` the note populations (:func:`note_population_patients`). A
    ``verbmem`` example's question is the prefix and its answer the continuation; a ``privleak`` example
    (forget notes, and holdout notes of the forget patients' diseases) scores the whole document after an
    empty prompt, as MUSE's privleak texts.
    """
    config = config or NotesMemorizationConfig()
    by_patient = {row["patient_id"]: row for row in notes}
    rows, too_short, diseases = [], {}, set()
    for population in NOTE_POPULATIONS:
        missing = [pid for pid in patients.get(population, []) if pid not in by_patient]
        if missing:
            raise InputError(f"notes memorization: patient {missing[0]!r} ({population}) has no note")
        chosen = [by_patient[pid] for pid in patients.get(population, [])]
        too_short[population] = 0
        for row in chosen:
            parts = split_document(row["text"], config.prefix_words, config.continuation_words)
            if parts is None:
                too_short[population] += 1
                continue
            rows.append(_example(VERBMEM, population, row, *parts))
        if population == FORGET:
            rows += [_example(PRIVLEAK, FORGET, row, "", row["text"]) for row in chosen]
            diseases = {row["disease"] for row in chosen}
    # Non-members of the forget patients' diseases only (module docstring).
    rows += [
        _example(PRIVLEAK, HOLDOUT, row, "", row["text"])
        for row in holdout_notes
        if row["disease"] in diseases
    ]
    return pd.DataFrame(rows, columns=list(EXAMPLE_COLUMNS)), too_short


def load_note_examples(
    data_dir: str | Path, qa_examples: pd.DataFrame, config: NotesMemorizationConfig | None = None
) -> tuple[pd.DataFrame, dict[str, int]]:
    """:func:`build_note_examples` on an AMNESIA folder: its ``notes`` and ``holdout_notes`` configs, and
    the patients of ``qa_examples``."""
    return build_note_examples(
        note_rows(data_dir), holdout_note_rows(data_dir), note_population_patients(qa_examples), config
    )


def of_task(examples: pd.DataFrame, task: str) -> pd.DataFrame:
    return examples[examples["task"] == task].reset_index(drop=True)


def notes_folders(folder: Path) -> dict[str, Path]:
    """A role's notes output folders, beside its QA folder ``folder``: ``<folder>-notes-verbmem`` and
    ``<folder>-notes-privleak``."""
    return {task: Path(f"{folder}-notes-{task}") for task in (VERBMEM, PRIVLEAK)}


def notes_role_runs(
    role: str, folder: Path, examples: pd.DataFrame, config: NotesMemorizationConfig
) -> list[RoleRun]:
    """The notes folders of one role (module docstring): the model and the before model generate and
    teacher-force the verbmem examples and teacher-force the privleak documents; a retain model (``retain``)
    scores the privleak documents only (its AUC normalises privleak)."""
    folders, runs = notes_folders(folder), []
    raw = {"rendering": RawTextRendering, "rendering_id": NOTES_RENDERING_ID}
    verbmem, privleak = of_task(examples, VERBMEM), of_task(examples, PRIVLEAK)
    if role != "retain" and len(verbmem):
        runs.append(RoleRun(folders[VERBMEM], verbmem, PASSES, config.generation_tokens, **raw))
    if len(privleak):
        runs.append(RoleRun(folders[PRIVLEAK], privleak, (TEACHER_FORCED,), **raw))
    return runs


def add_notes_runs(
    roles: list, examples: pd.DataFrame, config: NotesMemorizationConfig, before_carries_model: bool
) -> dict[str, dict[str, str]]:
    """Append each role's notes folders (:func:`notes_role_runs`) beside its QA folder (its first run's) and
    return the folders of each role's notes outputs (run.json's ``notes.outputs``). With
    ``before_carries_model`` (the before model is the evaluated one, run once) the before role scores the
    notes for both, and the model role scores none."""
    outputs: dict[str, dict[str, str]] = {}
    for role in roles:
        if role.name == "model" and before_carries_model:
            continue
        runs = notes_role_runs(role.name, role.runs[0].folder, examples, config)
        role.runs.extend(runs)
        outputs[role.name] = {_task_of(run): str(run.folder) for run in runs}
    if before_carries_model and "before" in outputs:
        outputs["model"] = outputs["before"]
    return outputs


def _task_of(run: RoleRun) -> str:
    return str(run.examples["task"].iloc[0])


__all__ = [
    "FORGET",
    "HOLDOUT",
    "NOTES_EXAMPLES",
    "NOTES_RENDERING_ID",
    "NOTE_POPULATIONS",
    "PRIVLEAK",
    "VERBMEM",
    "NotesMemorizationConfig",
    "add_notes_runs",
    "build_note_examples",
    "first_words",
    "load_note_examples",
    "note_population_patients",
    "notes_folders",
    "notes_role_runs",
    "split_document",
]
