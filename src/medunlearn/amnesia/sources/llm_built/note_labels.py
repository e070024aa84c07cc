"""Stage 1 of the LLM construction (:mod:`~medunlearn.amnesia.sources.llm_built`): read the notes, draw the
sample, and give each patient a disease label.

One schema-constrained request per note (title + opening lines), the label set an ``enum`` of the 11
categories of :mod:`medunlearn.ontology.amnesia`. The rule-based classifier of
:mod:`medunlearn.ontology.vocabulary` is the fallback (the request failed) and a second opinion
(disagreements are reported). A note with neither label is skipped.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from medunlearn.amnesia.sources.llm_built.construction_config import ConstructionConfig
from medunlearn.amnesia.sources.llm_built.construction_state import (
    SKIP_NO_LABEL,
    PatientState,
    Slot,
    SourceNote,
)
from medunlearn.amnesia.sources.llm_built.stage_chats import StageChats
from medunlearn.amnesia.sources.pmc_patients import read_note_records
from medunlearn.llm import ChatRequest, ChatResult
from medunlearn.llm.prompts import PromptTemplate
from medunlearn.ontology.amnesia import DISEASES, QA_TYPES
from medunlearn.ontology.vocabulary import default_vocabulary


def read_source_notes(path: str | os.PathLike) -> list[SourceNote]:
    r"""PMC-Patients rows (CSV, JSON or JSONL; the columns of
    :func:`~medunlearn.amnesia.sources.pmc_patients.read_pmc_patients`), every note kept: here the LLM labels
    them. Literal ``\n`` become line breaks."""
    records = read_note_records(path)
    table = records.table
    return [
        SourceNote(patient_id=patient_id, title=title.strip(), note=note.strip(), age=age, sex=sex)
        for patient_id, title, note, age, sex in zip(
            table["patient_id"].to_pylist(),
            table["title"].to_pylist(),
            table["note"].to_pylist(),
            records.ages(),
            records.sexes(),
        )
    ]


def draw_sample(notes: Sequence[SourceNote], sample: int | None, seed: int) -> list[SourceNote]:
    """A seeded subset of ``sample`` notes, in file order (all of them when ``sample`` is None or larger)."""
    if sample is None or sample >= len(notes):
        return list(notes)
    chosen = set(random.Random(seed).sample(range(len(notes)), sample))
    return [note for index, note in enumerate(notes) if index in chosen]


def label_schema() -> dict:
    return {
        "type": "object",
        "properties": {"category": {"type": "string", "enum": list(DISEASES)}},
        "required": ["category"],
        "additionalProperties": False,
    }


def label_requests(
    notes: Sequence[SourceNote], prompt: PromptTemplate, config: ConstructionConfig
) -> list[ChatRequest]:
    categories = "\n".join(f"- {category}" for category in DISEASES)
    return [
        ChatRequest(
            prompt.messages(
                categories=categories, title=note.title, opening=note.note[: config.opening_chars]
            ),
            max_tokens=config.label_max_tokens,
            seed=config.seed,
            json_schema=label_schema(),
            schema_name="disease_label",
            prompt_version=prompt.version,
        )
        for note in notes
    ]


@dataclass
class Labelling:
    """What stage 1 hands on: the labelled patients (their QA slots empty), the notes skipped unlabelled,
    the failed label requests, the rule-based analysis per patient id, and the requests' results (tokens)."""

    patients: list[PatientState]
    skipped: dict[str, list[str]]
    label_failures: int
    rule_analyses: dict[str, Any]
    results: list[ChatResult]


def label_patients(
    chats: StageChats, notes: Sequence[SourceNote], prompt: PromptTemplate, config: ConstructionConfig
) -> Labelling:
    """The LLM's label per note, the rule-based classifier's as fallback and second opinion."""
    results = chats.complete(config.labeler_spec, label_requests(notes, prompt, config), "disease_label")
    # One batched pass: the rule label (fallback, second opinion), its confidence, and the kept notes'
    # disease keywords.
    analyses = default_vocabulary().analyse_records([n.title for n in notes], [n.note for n in notes])
    labelling = Labelling(
        patients=[],
        skipped={},
        label_failures=0,
        rule_analyses={note.patient_id: analysis for note, analysis in zip(notes, analyses)},
        results=results,
    )
    for note, result, analysis in zip(notes, results, analyses):
        rule = analysis.category
        llm = result.parsed["category"] if result.ok else None
        labelling.label_failures += llm is None
        disease = llm or rule
        if disease is None:
            labelling.skipped.setdefault(SKIP_NO_LABEL, []).append(note.patient_id)
            continue
        slots = [Slot(t, i) for t in QA_TYPES for i in range(config.qa_per_type)]
        labelling.patients.append(PatientState(note, disease, "llm" if llm else "rule", rule, llm, slots))
    return labelling
