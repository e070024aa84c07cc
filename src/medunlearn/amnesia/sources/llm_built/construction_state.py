"""The records of one LLM construction run (:mod:`~medunlearn.amnesia.sources.llm_built`): a source note, a
patient's QA slots and every attempt at a slot, and why a patient is skipped.

An :class:`Attempt` is one candidate QA for one slot, in one round. Its report form (the ``tries`` of
``qa_details`` in ``amnesia_construction.json``, ``docs/amnesia-construction.md``) keeps what happened to it,
not its text: the fields it has, in a fixed order, and none it has not reached (a failed generation has only
``round`` and ``error``; ``judged`` appears, as false, only for a QA that passed the checks in the last round
but was not judged because its patient was lost anyway).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SKIP_NO_LABEL = "no disease label (the label request failed and the rule-based classifier found no term)"
SKIP_GENERATION = "QA generation failed (no schema-valid answer) after every regeneration"
SKIP_CHECKS = "QA failed the checks after every regeneration"
SKIP_PANEL = "QA rejected by the judge panel after every regeneration"


@dataclass(frozen=True)
class SourceNote:
    patient_id: str
    title: str
    note: str
    age: int | None
    sex: str | None


@dataclass
class Attempt:
    """One candidate QA for a slot. A field left None was never reached (see the module docstring).

    Parameters:
        round (`int`): 0 for the first generation, ``k`` for the ``k``-th regeneration.
        qa (`dict` or `None`): the generated QA (``question``, ``answer``, for reasoning ``findings``); None
            when the generation request failed.
        groundedness (`float` or `None`): the answer's groundedness, to 4 decimals, once generated.
        checks_failed (`list[str]` or `None`): the checks it failed (empty: passed), once generated.
        judged (`bool` or `None`): False when it passed the checks but its patient was lost, so no judge saw
            it; None otherwise.
        votes (`list` or `None`): one rating per distinct judge (None: that judge's request failed).
        valid (`bool` or `None`): the panel's verdict, once judged.
        error (`str` or `None`): why the generation request failed.
    """

    round: int
    qa: dict | None = None
    groundedness: float | None = None
    checks_failed: list[str] | None = None
    judged: bool | None = None
    votes: list[dict | None] | None = None
    valid: bool | None = None
    error: str | None = None

    @property
    def generated(self) -> bool:
        return self.qa is not None

    @property
    def was_judged(self) -> bool:
        return self.votes is not None

    def summary(self) -> dict[str, Any]:
        """The report form: every field but the QA text, those never reached left out, in this order."""
        fields = {
            "round": self.round,
            "groundedness": self.groundedness,
            "checks_failed": self.checks_failed,
            "judged": self.judged,
            "votes": self.votes,
            "valid": self.valid,
            "error": self.error,
        }
        return {name: value for name, value in fields.items() if value is not None}

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> Attempt:
        """The attempt a report entry describes (its QA text is not in the report: None)."""
        return cls(**summary)


@dataclass
class Slot:
    """One QA position of a patient (``factual`` 1..4, ``reasoning`` 1..4) and what has happened to it."""

    qa_type: str
    index: int
    qa: dict | None = None  # the accepted QA
    tries: list[Attempt] = field(default_factory=list)  # every candidate, in order

    @property
    def qa_id_suffix(self) -> str:
        return f"{self.qa_type[:1].upper()}{self.index + 1}"


@dataclass
class PatientState:
    note: SourceNote
    disease: str
    label_source: str  # "llm" or "rule"
    rule_label: str | None
    llm_label: str | None
    slots: list[Slot]
    label_votes: list[bool | None] | None = None

    @property
    def pending(self) -> list[Slot]:
        return [slot for slot in self.slots if slot.qa is None]

    def attempts(self) -> list[Attempt]:
        return [attempt for slot in self.slots for attempt in slot.tries]


@dataclass
class Candidate:
    """An attempt that passed the checks, waiting for the panel."""

    slot: Slot
    attempt: Attempt

    @property
    def qa(self) -> dict:
        return self.attempt.qa

    @property
    def qa_type(self) -> str:
        return self.slot.qa_type


def skip_reason(pending: Sequence[Slot]) -> str:
    """Why a patient short of valid QA is skipped, read from its pending slots' last tries: a failed
    generation, else a failed check (a patient with either is not judged in the last round), else the
    panel."""
    last_tries = [slot.tries[-1] for slot in pending if slot.tries]
    if any(not attempt.generated for attempt in last_tries):
        return SKIP_GENERATION
    if any(attempt.checks_failed for attempt in last_tries):
        return SKIP_CHECKS
    return SKIP_PANEL  # every last try passed generation and the checks, so the panel rejected one
