"""Stage 3 of the LLM construction (:mod:`~medunlearn.amnesia.sources.llm_built`): the judge panel rates the
QA that passed the checks.

Each distinct judge (:mod:`.judge_panel`) rates all of a patient's candidates in
one request, on the paper's four criteria (clarity, correctness, derivability from the note, clinical
significance), and says whether the note supports the label. A QA is valid when more than half of the
distinct judges rate it true on all four; a judge whose request failed votes no.
"""

from __future__ import annotations

from collections.abc import Sequence

from medunlearn.amnesia.sources.llm_built.construction_config import ConstructionConfig
from medunlearn.amnesia.sources.llm_built.construction_state import Candidate, PatientState
from medunlearn.amnesia.sources.llm_built.judge_panel import CRITERIA, PanelJudge, majority
from medunlearn.amnesia.sources.llm_built.stage_chats import StageChats
from medunlearn.llm import ChatRequest, ChatResult
from medunlearn.llm.prompts import PromptTemplate

PatientCandidates = tuple[PatientState, list[Candidate]]


def judge_schema(n_qa: int) -> dict:
    rating = {
        "type": "object",
        "properties": {criterion: {"type": "boolean"} for criterion in CRITERIA},
        "required": list(CRITERIA),
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "label_supported": {"type": "boolean"},
            "ratings": {"type": "array", "items": rating, "minItems": n_qa, "maxItems": n_qa},
        },
        "required": ["label_supported", "ratings"],
        "additionalProperties": False,
    }


def judge_request(
    patient: PatientState,
    candidates: Sequence[Candidate],
    prompt: PromptTemplate,
    config: ConstructionConfig,
    seed_offset: int,
) -> ChatRequest:
    qa_list = "\n".join(
        f"{number}. ({c.qa_type}) Q: {c.qa['question']}\n   A: {c.qa['answer']}"
        for number, c in enumerate(candidates, start=1)
    )
    messages = prompt.messages(
        disease=patient.disease,
        title=patient.note.title,
        note=patient.note.note[: config.note_chars],
        qa_list=qa_list,
        n_qa=len(candidates),
    )
    return ChatRequest(
        messages,
        max_tokens=config.judge_max_tokens,
        temperature=config.judge_temperature,
        seed=config.seed + seed_offset,
        json_schema=judge_schema(len(candidates)),
        schema_name="judge_ratings",
        prompt_version=prompt.version,
    )


def candidates_to_judge(checked: Sequence[PatientCandidates], skip_lost: bool) -> list[PatientCandidates]:
    """The patients whose candidates go to the panel this round.

    With ``skip_lost`` (the last round, without ``judge_all``) a patient with a slot that failed generation
    or the checks is skipped whatever the panel says, so its candidates are not judged (they are marked
    ``judged=False``): no judge call is spent on a patient already lost.
    """
    to_judge = []
    for patient, candidates in checked:
        if skip_lost and len(candidates) < len(patient.pending):
            for candidate in candidates:
                candidate.attempt.judged = False
        elif candidates:
            to_judge.append((patient, candidates))
    return to_judge


def _ask_judges(
    chats: StageChats,
    judges: Sequence[PanelJudge],
    to_judge: Sequence[PatientCandidates],
    prompt: PromptTemplate,
    config: ConstructionConfig,
) -> tuple[list[list[ChatResult]], list[ChatResult]]:
    """Each distinct judge's answers, one per patient of ``to_judge``, and every result in sending order."""
    answers: list[list[ChatResult]] = [[] for _ in judges]
    judges_by_spec: dict[str, list[int]] = {}
    for number, judge in enumerate(judges):
        judges_by_spec.setdefault(judge.spec, []).append(number)
    spent: list[ChatResult] = []
    # Judges that share a spec go in one request list, so a server batches them all at once.
    for spec, numbers in judges_by_spec.items():
        requests = [
            judge_request(p, c, prompt, config, judges[number].seed_offset)
            for number in numbers
            for p, c in to_judge
        ]
        results = chats.complete(spec, requests, "judge")
        spent += results
        for k, number in enumerate(numbers):
            answers[number] = results[k * len(to_judge) : (k + 1) * len(to_judge)]
    return answers, spent


def judge_round(
    chats: StageChats,
    judges: Sequence[PanelJudge],
    to_judge: Sequence[PatientCandidates],
    prompt: PromptTemplate,
    config: ConstructionConfig,
) -> list[ChatResult]:
    """Ask each distinct judge about ``to_judge``'s candidates, record every candidate's votes and verdict
    (accepting the valid ones, and a patient's label votes, once); return the judges' results (tokens)."""
    answers, spent = _ask_judges(chats, judges, to_judge, prompt, config)
    for position, (patient, candidates) in enumerate(to_judge):
        mine = [answers[number][position] for number in range(len(judges))]
        if patient.label_votes is None:
            patient.label_votes = [a.parsed["label_supported"] if a.ok else None for a in mine]
        for number, candidate in enumerate(candidates):
            votes = [a.parsed["ratings"][number] if a.ok else None for a in mine]
            valid = [None if v is None else all(v[c] for c in CRITERIA) for v in votes]
            candidate.attempt.votes = votes
            candidate.attempt.valid = majority(valid, len(judges))
            if candidate.attempt.valid:
                candidate.slot.qa = candidate.qa
    return spent
