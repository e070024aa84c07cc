"""Stage 2 of the LLM construction (:mod:`~medunlearn.amnesia.sources.llm_built`): write a patient's QA and
check each one before any judge sees it.

One request per patient for all of its pending QA (round 0: 4 factual + 4 reasoning; a regeneration: its
failed slots only), then cheap checks per QA: nothing empty, no duplicate question, the answer not verbatim in
the question, a groundedness score (the share of the answer's content words found in the note) of at least
``min_groundedness``, and for a reasoning QA at least two findings found in the note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from medunlearn.amnesia.sources.llm_built.construction_config import ConstructionConfig
from medunlearn.amnesia.sources.llm_built.construction_state import Attempt, Candidate, PatientState
from medunlearn.amnesia.sources.llm_built.stage_chats import StageChats
from medunlearn.llm import ChatRequest, ChatResult
from medunlearn.llm.prompts import PromptTemplate
from medunlearn.ontology.amnesia import QA_TYPES
from medunlearn.ontology.vocabulary import words

# Function words that say nothing about a note's content: not counted by the groundedness score.
_STOPWORDS = frozenset(
    "a an the and or of to in on at by for with from as is was were be been being are it its this that"
    " these those he she his her they their them patient patients who which what when where how why did"
    " does do had has have not no yes than then there after before during into over under about also both"
    " each other any all".split()
)
# Length bounds of the generated strings [ours]. Guided decoding enforces them, so an answer that would run on
# until ``max_tokens`` (what a small model does: it repeats itself inside a string) is closed at the bound and
# still parses, instead of costing ``max_tokens`` on every schema retry. Generous for clinical QA, whose
# questions and answers are a sentence or two.
MAX_QUESTION_CHARS = 160
MAX_ANSWER_CHARS = 240
MAX_FINDING_CHARS = 120
MAX_FINDINGS = 3


# ----------------------------------------------------------------------------------------------------------
# Checks


def content_words(text: str) -> list[str]:
    return [word for word in words(text) if word not in _STOPWORDS and (len(word) > 2 or word.isdigit())]


def groundedness(answer: str, note: str | set[str]) -> float:
    """The share of the answer's content words that occur in the note [ours]; 0 when it has none."""
    answer_words = content_words(answer)
    if not answer_words:
        return 0.0
    note_words = note if isinstance(note, set) else set(words(note))
    return sum(word in note_words for word in answer_words) / len(answer_words)


def check_qa(
    qa: Mapping[str, Any],
    qa_type: str,
    note: str | set[str],
    other_questions: set[str],
    min_groundedness: float = 0.5,
) -> list[str]:
    """The checks one generated QA fails (empty: it passes), before any judge sees it."""
    question, answer = str(qa.get("question", "")).strip(), str(qa.get("answer", "")).strip()
    failed = []
    if not question or not answer:
        return ["empty question or answer"]
    normalized_answer = " ".join(words(answer))
    if normalized_answer and normalized_answer in " ".join(words(question)):
        failed.append("answer verbatim in the question")
    if " ".join(words(question)) in other_questions:
        failed.append("duplicate question")
    if groundedness(answer, note) < min_groundedness:
        failed.append(f"groundedness below {min_groundedness:g}")
    if qa_type == "reasoning":
        findings = [f for f in qa.get("findings", []) if groundedness(str(f), note) >= min_groundedness]
        if len(findings) < 2:
            failed.append("fewer than 2 findings from the note")
    return failed


# ----------------------------------------------------------------------------------------------------------
# Requests


def qa_schema(n_factual: int, n_reasoning: int) -> dict:
    """All QA of one patient: exactly ``n_factual`` + ``n_reasoning``, every string length-bounded [ours]."""

    def items(with_findings: bool) -> dict:
        properties = {
            "question": {"type": "string", "maxLength": MAX_QUESTION_CHARS},
            "answer": {"type": "string", "maxLength": MAX_ANSWER_CHARS},
        }
        if with_findings:
            properties["findings"] = {
                "type": "array",
                "items": {"type": "string", "maxLength": MAX_FINDING_CHARS},
                "minItems": 2,
                "maxItems": MAX_FINDINGS,
            }
        return {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }

    return {
        "type": "object",
        "properties": {
            "factual": {"type": "array", "items": items(False), "minItems": n_factual, "maxItems": n_factual},
            "reasoning": {
                "type": "array",
                "items": items(True),
                "minItems": n_reasoning,
                "maxItems": n_reasoning,
            },
        },
        "required": ["factual", "reasoning"],
        "additionalProperties": False,
    }


def qa_request(
    patient: PatientState, prompt: PromptTemplate, config: ConstructionConfig, round_number: int
) -> ChatRequest:
    """One request for all of ``patient``'s pending QA: greedy in round 0, sampling in a regeneration, and
    naming the questions already written so a regeneration asks something else."""
    pending = patient.pending
    n_factual = sum(slot.qa_type == "factual" for slot in pending)
    n_reasoning = len(pending) - n_factual
    avoid = [slot.qa["question"] for slot in patient.slots if slot.qa is not None]
    avoid += [attempt.qa["question"] for slot in pending for attempt in slot.tries if attempt.qa]
    messages = prompt.messages(
        n_factual=n_factual,
        n_reasoning=n_reasoning,
        disease=patient.disease,
        title=patient.note.title,
        note=patient.note.note[: config.note_chars],
        avoid="; ".join(dict.fromkeys(avoid)) or "none",
    )
    return ChatRequest(
        messages,
        max_tokens=config.qa_max_tokens,
        temperature=0.0 if round_number == 0 else config.regeneration_temperature,
        seed=config.seed + round_number,
        json_schema=qa_schema(n_factual, n_reasoning),
        schema_name="patient_qa",
        prompt_version=prompt.version,
    )


# ----------------------------------------------------------------------------------------------------------
# The stage


def check_answer(
    patient: PatientState, result: ChatResult, round_number: int, config: ConstructionConfig
) -> list[Candidate]:
    """Record one attempt per pending slot of ``patient`` from its generation ``result``; return those that
    passed the checks (none when the request failed)."""
    pending = patient.pending
    if not result.ok:
        for slot in pending:
            slot.tries.append(Attempt(round=round_number, qa=None, error=result.error))
        return []
    produced = {qa_type: list(result.parsed[qa_type]) for qa_type in QA_TYPES}
    note_words = set(words(patient.note.note))
    questions = {" ".join(words(s.qa["question"])) for s in patient.slots if s.qa is not None}
    candidates = []
    for slot in pending:
        qa = produced[slot.qa_type].pop(0)
        failed = check_qa(qa, slot.qa_type, note_words, questions, config.min_groundedness)
        questions.add(" ".join(words(str(qa.get("question", "")))))
        attempt = Attempt(
            round=round_number,
            qa=qa,
            groundedness=round(groundedness(str(qa.get("answer", "")), note_words), 4),
            checks_failed=failed,
        )
        slot.tries.append(attempt)
        if not failed:
            candidates.append(Candidate(slot, attempt))
    return candidates


def generate_qa(
    chats: StageChats,
    todo: Sequence[PatientState],
    prompt: PromptTemplate,
    config: ConstructionConfig,
    round_number: int,
) -> tuple[list[ChatResult], list[tuple[PatientState, list[Candidate]]]]:
    """One round of generation and checks for the patients ``todo``: the generator's results (for the token
    counts) and each patient with its QA that passed the checks."""
    requests = [qa_request(patient, prompt, config, round_number) for patient in todo]
    results = chats.complete(config.generator, requests, "qa_generation")
    checked = [
        (patient, check_answer(patient, result, round_number, config))
        for patient, result in zip(todo, results)
    ]
    return results, checked
