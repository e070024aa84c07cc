"""The LLM-built AMNESIA source: from real notes alone to labelled patients with validated QA.

The paper's construction [paper], as a pipeline of :mod:`medunlearn.llm` requests, every one cached. Each
stage has its module:

1. **Disease label** (:mod:`.note_labels`). One schema-constrained request per note (title + opening lines),
   the label set an ``enum`` of the 11 categories of :mod:`medunlearn.ontology.amnesia`. The rule-based
   classifier of :mod:`medunlearn.ontology.vocabulary` is the fallback (the request failed) and a second
   opinion (disagreements are reported).
2. **QA generation** (:mod:`.qa_generation`). One request per patient for all of its QA (4 factual + 4
   reasoning), then cheap checks per QA: nothing empty, no duplicate question, the answer not verbatim in the
   question, a groundedness score (the share of the answer's content words found in the note) of at least
   ``min_groundedness``, and for a reasoning QA at least two findings found in the note.
3. **Judge panel** (:mod:`.judge_stage`). Each distinct judge (``BACKEND:MODEL`` specs, default: the generator
   three times; greedy copies of one model are one judge, :mod:`.judge_panel`) rates all of a patient's
   pending QA in one request, on the paper's four criteria (clarity, correctness, derivability from the note,
   clinical significance), and says whether the note supports the label. A QA is valid when more than half of
   the distinct judges rate it true on all four (one distinct judge: its own vote); a judge whose request
   failed votes no. Failed QA are regenerated (one request per patient for its failed slots), up to
   ``max_regenerations`` times; a patient still short of valid QA after that is skipped and counted by reason.
4. **Report** (:mod:`.construction_report`). The distinct judges, panel figures beside the paper's (91.8%
   labels supported, 97.6% QA valid), Fleiss' κ (statsmodels; not for one distinct judge), a per-judge
   breakdown, skips by reason and tokens per stage.

The settings are :class:`.construction_config.ConstructionConfig`; the records of a run (a patient's slots,
each :class:`.construction_state.Attempt` at a slot) are in :mod:`.construction_state`. Every stage is one
:meth:`BulkChat.complete` over a deterministic list of requests (:mod:`.stage_chats`), so a rerun reads
everything from the cache (zero new calls) and a killed run resumes with the same results. Prompts are
versioned YAML files (``prompts/*.yaml``) that a caller can replace.

>>> groundedness("Metformin 500 mg twice daily", "She was started on metformin 500 mg.")  # "mg" is too short
0.5
>>> check_qa({"question": "What was started?", "answer": "metformin"}, "factual", "Started metformin.", set())
[]
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from medunlearn.amnesia.schema import NOTES_SCHEMA, QA_SCHEMA

# The public names of the construction, importable from here as before the split into stage modules.
from medunlearn.amnesia.sources.llm_built.construction_config import (
    DEFAULT_PANEL_SIZE,
    PROMPT_NAMES,
    ConstructionConfig,
    ConstructionError,
    load_prompt,
    public_spec,
)
from medunlearn.amnesia.sources.llm_built.construction_report import ConstructionOutcome, construction_report
from medunlearn.amnesia.sources.llm_built.construction_state import (
    SKIP_CHECKS,
    SKIP_GENERATION,
    SKIP_NO_LABEL,
    SKIP_PANEL,
    Attempt,
    PatientState,
    Slot,
    SourceNote,
    skip_reason,
)

# the paper's figures and κ: re-exported from here
from medunlearn.amnesia.sources.llm_built.judge_panel import (
    PAPER_LABELS_SUPPORTED,
    PAPER_QA_VALID,
    PanelJudge,
    distinct_judges,
    fleiss_kappa_of_votes,
)
from medunlearn.amnesia.sources.llm_built.judge_stage import candidates_to_judge, judge_round, judge_schema
from medunlearn.amnesia.sources.llm_built.note_labels import (
    draw_sample,
    label_patients,
    label_schema,
    read_source_notes,
)
from medunlearn.amnesia.sources.llm_built.qa_generation import (
    MAX_ANSWER_CHARS,
    MAX_FINDING_CHARS,
    MAX_FINDINGS,
    MAX_QUESTION_CHARS,
    check_qa,
    content_words,
    generate_qa,
    groundedness,
    qa_schema,
)
from medunlearn.amnesia.sources.llm_built.stage_chats import IncompleteRunError, StageChats
from medunlearn.llm import ChatResult
from medunlearn.llm.prompts import PromptTemplate

__all__ = [
    "DEFAULT_PANEL_SIZE",
    "MAX_ANSWER_CHARS",
    "MAX_FINDINGS",
    "MAX_FINDING_CHARS",
    "MAX_QUESTION_CHARS",
    "PAPER_LABELS_SUPPORTED",
    "PAPER_QA_VALID",
    "PROMPT_NAMES",
    "SKIP_CHECKS",
    "SKIP_GENERATION",
    "SKIP_NO_LABEL",
    "SKIP_PANEL",
    "Attempt",
    "Construction",
    "ConstructionConfig",
    "ConstructionError",
    "IncompleteRunError",
    "PatientState",
    "Slot",
    "SourceNote",
    "check_qa",
    "construct_records",
    "construction_report",
    "content_words",
    "draw_sample",
    "fleiss_kappa_of_votes",
    "groundedness",
    "judge_schema",
    "label_schema",
    "load_prompt",
    "public_spec",
    "qa_schema",
    "read_source_notes",
]


@dataclass
class Construction:
    """What :func:`construct_records` returns: records for the splits, the report, and run counters."""

    notes: Any  # pa.Table (NOTES_SCHEMA)
    qa: Any  # pa.Table (QA_SCHEMA)
    skipped: dict[str, list[str]]
    report: dict
    calls: int = 0  # completion attempts sent to a model in this run (0 on a full rerun)
    cache_hits: int = 0
    seconds: float = 0.0

    @property
    def seconds_per_note(self) -> float:
        return self.seconds / max(1, self.report["notes"]["used"])


def write_and_judge(
    chats: StageChats,
    judges: Sequence[PanelJudge],
    patients: Sequence[PatientState],
    prompts: Mapping[str, PromptTemplate],
    config: ConstructionConfig,
    usage: dict[str, list[ChatResult]],
) -> dict[int, int]:
    """Stages 2-3, round by round (round 0, then the regenerations): generation and checks, then the panel,
    for the patients with pending slots. Adds each stage's results to ``usage``; returns the slots written
    again per regeneration round."""
    regenerated_slots: dict[int, int] = {}
    for round_number in range(config.max_regenerations + 1):
        todo = [patient for patient in patients if patient.pending]
        if not todo:
            break
        if round_number:
            regenerated_slots[round_number] = sum(len(p.pending) for p in todo)
        results, checked = generate_qa(chats, todo, prompts["qa_generation"], config, round_number)
        usage["qa_generation"] += results
        last_round = round_number == config.max_regenerations
        to_judge = candidates_to_judge(checked, skip_lost=last_round and not config.judge_all)
        if to_judge:
            usage["judge"] += judge_round(chats, judges, to_judge, prompts["judge"], config)
    return regenerated_slots


def settle(
    patients: Sequence[PatientState], skipped: dict[str, list[str]]
) -> tuple[list[PatientState], dict[str, list[str]]]:
    """The patients kept (every slot valid), and ``skipped`` with each other patient added under its
    reason."""
    kept = []
    for patient in patients:
        if patient.pending:
            skipped.setdefault(skip_reason(patient.pending), []).append(patient.note.patient_id)
        else:
            kept.append(patient)
    return kept, skipped


def record_tables(kept: Sequence[PatientState], rule_analyses: Mapping[str, Any]) -> tuple[Any, Any]:
    """The kept patients' notes (NOTES_SCHEMA) and QA (QA_SCHEMA) tables."""
    import pyarrow as pa

    notes_table = pa.table(
        {
            "patient_id": [p.note.patient_id for p in kept],
            "title": [p.note.title for p in kept],
            "note": [p.note.note for p in kept],
            "disease": [p.disease for p in kept],
            "disease_keywords": [rule_analyses[p.note.patient_id].keywords for p in kept],
            "age": [p.note.age for p in kept],
            "sex": [p.note.sex for p in kept],
        },
        schema=NOTES_SCHEMA,
    )
    rows = [(p, slot) for p in kept for slot in p.slots]
    qa_table = pa.table(
        {
            "qa_id": [f"{p.note.patient_id}-{slot.qa_id_suffix}" for p, slot in rows],
            "patient_id": [p.note.patient_id for p, _ in rows],
            "disease": [p.disease for p, _ in rows],
            "qa_type": [slot.qa_type for _, slot in rows],
            "question": [str(slot.qa["question"]).strip() for _, slot in rows],
            "answer": [str(slot.qa["answer"]).strip() for _, slot in rows],
        },
        schema=QA_SCHEMA,
    )
    return notes_table, qa_table


def construct_records(
    notes_path: str | os.PathLike,
    config: ConstructionConfig,
    *,
    backends: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> Construction:
    """Label the notes, write and judge their QA, and return the records with the construction report.

    ``backends`` maps a spec of ``config`` to a ready backend object (tests, notebooks holding a loaded
    model); other specs are built with :func:`medunlearn.llm.make_backend`. Raises before any call for a bad
    setting, prompt or notes file, or an unreachable server (then nothing is written, not even the cache
    file).
    """
    started = time.perf_counter()
    config.check()
    prompts = {name: load_prompt(name, config.prompts.get(name)) for name in PROMPT_NAMES}
    all_notes = read_source_notes(notes_path)
    notes = draw_sample(all_notes, config.sample, config.seed)
    chats = StageChats(config, backends, progress)
    try:
        chats.check_ready()
        labelling = label_patients(chats, notes, prompts["disease_label"], config)
        usage: dict[str, list[ChatResult]] = {
            "disease_label": labelling.results,
            "qa_generation": [],
            "judge": [],
        }
        judges = distinct_judges(config.judge_specs, chats.identities(), config.judge_temperature)
        regenerated_slots = write_and_judge(chats, judges, labelling.patients, prompts, config, usage)
    finally:
        chats.close()
    kept, skipped = settle(labelling.patients, labelling.skipped)
    notes_table, qa_table = record_tables(kept, labelling.rule_analyses)
    outcome = ConstructionOutcome(
        notes_in_file=len(all_notes),
        notes_used=len(notes),
        patients=labelling.patients,
        kept=kept,
        skipped=skipped,
        label_failures=labelling.label_failures,
        regenerated_slots=regenerated_slots,
        usage=usage,
        judges=judges,
        rule_analyses=labelling.rule_analyses,
    )
    return Construction(
        notes=notes_table,
        qa=qa_table,
        skipped={reason: sorted(ids) for reason, ids in skipped.items()},
        report=construction_report(outcome, config, prompts),
        calls=chats.calls,
        cache_hits=chats.cache_hits,
        seconds=time.perf_counter() - started,
    )
