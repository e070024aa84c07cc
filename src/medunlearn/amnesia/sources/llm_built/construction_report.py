"""Stage 4 of the LLM construction (:mod:`~medunlearn.amnesia.sources.llm_built`): the report written to
``amnesia_construction.json`` and summarized on the card (``docs/amnesia-construction.md``, "The report").

The report is JSON-ready and deterministic (no times or run counters), so a rerun writes the same. Its
sections: the notes used and kept, the models (without server URLs), the prompt versions, the settings, the
labels (LLM, rule-based fallback and their disagreements), the rule-based classifier, the judge panel
(:func:`~.judge_panel.panel_report`), the QA counts, skips by reason, tokens per stage, and every QA slot's
tries (:meth:`~.construction_state.Attempt.summary`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medunlearn.amnesia.sources.llm_built.construction_config import ConstructionConfig, public_spec
from medunlearn.amnesia.sources.llm_built.construction_state import SKIP_NO_LABEL, Attempt, PatientState
from medunlearn.amnesia.sources.llm_built.judge_panel import PanelJudge, panel_report, share
from medunlearn.amnesia.sources.pmc_patients import classifier_summary
from medunlearn.llm import ChatResult, summarize_usage
from medunlearn.llm.prompts import PromptTemplate


@dataclass
class ConstructionOutcome:
    """What happened in one construction run: the report's input beside the settings and the prompts.

    Parameters:
        notes_in_file (`int`): notes in the notes file.
        notes_used (`int`): notes drawn (all of them without ``sample``).
        patients (`list[PatientState]`): every labelled patient, kept or not, with its slots' tries.
        kept (`list[PatientState]`): the patients whose every slot holds a valid QA.
        skipped (`dict[str, list[str]]`): patient ids per skip reason.
        label_failures (`int`): label requests with no valid answer.
        regenerated_slots (`dict[int, int]`): slots written again per regeneration round.
        usage (`dict[str, list[ChatResult]]`): every request's result per stage (for the tokens).
        judges (`list[PanelJudge]`): the distinct judges.
        rule_analyses (`dict`): the rule-based classifier's analysis per used note's patient id.
    """

    notes_in_file: int
    notes_used: int
    patients: Sequence[PatientState]
    kept: Sequence[PatientState]
    skipped: Mapping[str, list[str]]
    label_failures: int
    regenerated_slots: Mapping[int, int]
    usage: Mapping[str, Sequence[ChatResult]]
    judges: Sequence[PanelJudge]
    rule_analyses: Mapping[str, Any] = field(default_factory=dict)

    def attempts(self) -> list[Attempt]:
        return [attempt for patient in self.patients for attempt in patient.attempts()]


def construction_report(
    outcome: ConstructionOutcome, config: ConstructionConfig, prompts: Mapping[str, PromptTemplate]
) -> dict:
    """The construction report: JSON-ready and deterministic (no times or run counters), so a rerun writes
    the same."""
    return {
        "notes": {
            "in_file": outcome.notes_in_file,
            "used": outcome.notes_used,
            "sample": config.sample,
            "kept": len(outcome.kept),
        },
        "models": {
            "labeler": public_spec(config.labeler_spec),
            "generator": public_spec(config.generator),
            "judges": [public_spec(spec) for spec in config.judge_specs],
        },
        "prompts": prompts_section(prompts),
        "settings": settings_section(config),
        "labels": labels_section(outcome),
        # Over every used note (by deciding rule, confidence, share below 0.5, notes without a term) [ours].
        "rule_classifier": classifier_summary(outcome.rule_analyses.values()),
        "panel": panel_section(outcome),
        "qa": qa_section(outcome),
        "skips": {reason: len(ids) for reason, ids in sorted(outcome.skipped.items())},
        "tokens": tokens_section(outcome.usage),
        "qa_details": qa_details(outcome.patients),
    }


def prompts_section(prompts: Mapping[str, PromptTemplate]) -> dict:
    """Each prompt's version, file (``builtin`` or the replacing file's name) and digest."""
    return {
        name: {
            "version": p.version,
            "file": "builtin" if p.source == "builtin" else Path(p.source).name,
            "sha256": p.sha256,
        }
        for name, p in prompts.items()
    }


def settings_section(config: ConstructionConfig) -> dict:
    """The settings that change what is built (not where it runs)."""
    return {
        "qa_per_type": config.qa_per_type,
        "max_regenerations": config.max_regenerations,
        "min_groundedness": config.min_groundedness,
        "note_chars": config.note_chars,
        "opening_chars": config.opening_chars,
        "seed": config.seed,
        "regeneration_temperature": config.regeneration_temperature,
        "judge_temperature": config.judge_temperature,
        "judge_all": config.judge_all,
    }


def label_disagreements(
    patients: Sequence[PatientState], rule_analyses: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The patients whose LLM label differs from the rule-based one, with the rule's confidence [ours]."""
    disagreements = []
    for p in patients:
        if not (p.llm_label and p.rule_label and p.llm_label != p.rule_label):
            continue
        entry = {"patient_id": p.note.patient_id, "llm": p.llm_label, "rule": p.rule_label}
        analysis = rule_analyses.get(p.note.patient_id)
        if analysis is not None:
            # The rule-based classifier's confidence [ours] and the rule that decided its label.
            entry |= {"rule_confidence": analysis.confidence, "rule_decided_by": analysis.rule}
        disagreements.append(entry)
    return disagreements


def labels_section(outcome: ConstructionOutcome) -> dict:
    """Where the labels came from, and how often the LLM and the rule-based classifier agree."""
    patients = outcome.patients
    disagreements = label_disagreements(patients, outcome.rule_analyses)
    both = sum(1 for p in patients if p.llm_label and p.rule_label)
    return {
        "llm": sum(p.label_source == "llm" for p in patients),
        "rule_fallback": sum(p.label_source == "rule" for p in patients),
        "llm_failed": outcome.label_failures,
        "none": len(outcome.skipped.get(SKIP_NO_LABEL, [])),
        "both_available": both,
        "disagreements": len(disagreements),
        "agreement_with_rule": share(both - len(disagreements), both),
        "disagreement_list": disagreements,
    }


def panel_section(outcome: ConstructionOutcome) -> dict:
    """:func:`~medunlearn.amnesia.sources.llm_built.judge_panel.panel_report` over the judged attempts."""
    return panel_report(
        outcome.judges,
        [public_spec(judge.spec) for judge in outcome.judges],
        [attempt for attempt in outcome.attempts() if attempt.was_judged],
        [p.label_votes for p in outcome.patients if p.label_votes is not None],
    )


def qa_section(outcome: ConstructionOutcome) -> dict:
    """How many QA were generated, failed which check, were judged, rejected, regenerated and accepted."""
    attempts = outcome.attempts()
    checked = [attempt for attempt in attempts if attempt.generated]
    judged = [attempt for attempt in attempts if attempt.was_judged]
    failed_checks: dict[str, int] = {}
    for attempt in checked:
        for check in attempt.checks_failed:
            failed_checks[check] = failed_checks.get(check, 0) + 1
    return {
        "generated": len(checked),
        "generation_failures": len(attempts) - len(checked),
        "failed_checks": dict(sorted(failed_checks.items())),
        "passed_checks": sum(not attempt.checks_failed for attempt in checked),
        "judged": len(judged),
        # Passed the checks in the last round, but their patient had a failed slot: skipped unjudged.
        "not_judged_patient_lost": sum(attempt.judged is False for attempt in attempts),
        "rejected_by_panel": sum(not attempt.valid for attempt in judged),
        "regenerated_slots": {str(k): v for k, v in outcome.regenerated_slots.items()},
        "mean_groundedness": share(sum(attempt.groundedness for attempt in checked), len(checked) or 0),
        "accepted": sum(slot.qa is not None for p in outcome.kept for slot in p.slots),
    }


def tokens_section(usage: Mapping[str, Sequence[ChatResult]]) -> dict:
    """Requests, failures, attempts and tokens per stage."""
    tokens = {}
    for stage, results in usage.items():
        summary = summarize_usage(results)
        tokens[stage] = {
            "requests": summary.requests,
            "failed": summary.failed,
            "attempts": summary.attempts,
            "prompt_tokens": summary.prompt_tokens,
            "completion_tokens": summary.completion_tokens,
        }
    return tokens


def qa_details(patients: Sequence[PatientState]) -> list[dict]:
    """Every QA slot: accepted or not, its tries (not their text) and its last groundedness."""
    return [
        {
            "qa_id": f"{p.note.patient_id}-{s.qa_id_suffix}",
            "patient_id": p.note.patient_id,
            "qa_type": s.qa_type,
            "accepted": s.qa is not None,
            "tries": [attempt.summary() for attempt in s.tries],
            "groundedness": next(
                (t.groundedness for t in reversed(s.tries) if t.groundedness is not None), None
            ),
        }
        for p in patients
        for s in p.slots
    ]
