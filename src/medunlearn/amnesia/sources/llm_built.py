"""The LLM-built AMNESIA source: from real notes alone to labelled patients with validated QA.

The paper's construction [paper], as a pipeline of :mod:`medunlearn.llm` requests, every one cached:

1. **Disease label.** One schema-constrained request per note (title + opening lines), the label set an
   ``enum`` of the 11 categories of :mod:`medunlearn.ontology.amnesia`. The rule-based classifier of
   :mod:`medunlearn.ontology.vocabulary` is the fallback (the request failed) and a second opinion
   (disagreements are reported).
2. **QA generation.** One request per patient for all of its QA (4 factual + 4 reasoning), then cheap checks
   per QA: nothing empty, no duplicate question, the answer not verbatim in the question, a groundedness score
   (the share of the answer's content words found in the note) of at least ``min_groundedness``, and for a
   reasoning QA at least two findings found in the note.
3. **Judge panel.** Each distinct judge (``BACKEND:MODEL`` specs, default: the generator three times; greedy
   copies of one model are one judge, :mod:`~medunlearn.amnesia.sources.judge_panel`) rates all of a
   patient's pending QA in one request, on the paper's four criteria (clarity, correctness, derivability from
   the note, clinical significance), and says whether the note supports the label. A QA is valid when more
   than half of the distinct judges rate it true on all four (one distinct judge: its own vote); a judge whose
   request failed votes no. Failed QA are regenerated (one request per patient for its failed slots), up to
   ``max_regenerations`` times; a patient still short of valid QA after that is skipped and counted by reason.
4. **Report.** The distinct judges, panel figures beside the paper's (91.8% labels supported, 97.6% QA
   valid), Fleiss' κ (statsmodels; not for one distinct judge), a per-judge breakdown, skips by reason and
   tokens per stage.

Every stage is one :meth:`BulkChat.complete` over a deterministic list of requests, so a rerun reads
everything from the cache (zero new calls) and a killed run resumes with the same results. Prompts are
versioned YAML files (``prompts/*.yaml``) that a caller can replace.

>>> groundedness("Metformin 500 mg twice daily", "She was started on metformin 500 mg.")  # "mg" is too short
0.5
>>> check_qa({"question": "What was started?", "answer": "metformin"}, "factual", "Started metformin.", set())
[]
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medunlearn.amnesia.pmc_patients import classifier_summary, read_note_records
from medunlearn.amnesia.schema import NOTES_SCHEMA, QA_SCHEMA
from medunlearn.amnesia.sources.judge_panel import (  # the paper's figures and κ: re-exported from here
    CRITERIA,
    PAPER_LABELS_SUPPORTED,  # noqa: F401
    PAPER_QA_VALID,  # noqa: F401
    PanelJudge,
    distinct_judges,
    fleiss_kappa_of_votes,  # noqa: F401
    majority,
    panel_report,
)
from medunlearn.amnesia.sources.judge_panel import share as _share
from medunlearn.errors import MedunlearnError
from medunlearn.llm import (
    BulkChat,
    ChatRequest,
    ChatResult,
    ResultCache,
    cache_identity,
    make_backend,
    parse_spec,
    summarize_usage,
)
from medunlearn.llm.prompts import PromptTemplate
from medunlearn.llm.prompts import load_prompt as load_versioned_prompt
from medunlearn.ontology.amnesia import DISEASES, QA_TYPES
from medunlearn.ontology.vocabulary import default_vocabulary, words

PROMPT_NAMES = ("disease_label", "qa_generation", "judge")
DEFAULT_PANEL_SIZE = 3
SKIP_NO_LABEL = "no disease label (the label request failed and the rule-based classifier found no term)"
SKIP_GENERATION = "QA generation failed (no schema-valid answer) after every regeneration"
SKIP_CHECKS = "QA failed the checks after every regeneration"
SKIP_PANEL = "QA rejected by the judge panel after every regeneration"
# Function words that say nothing about a note's content: not counted by the groundedness score.
_STOPWORDS = frozenset(
    "a an the and or of to in on at by for with from as is was were be been being are it its this that"
    " these those he she his her they their them patient patients who which what when where how why did"
    " does do had has have not no yes than then there after before during into over under about also both"
    " each other any all".split()
)


class ConstructionError(MedunlearnError, ValueError):
    """A setting, prompt file or notes file the construction pipeline cannot use (the message names it)."""


class IncompleteRunError(MedunlearnError, ConnectionError):
    """Some requests got no answer at all (the server went away mid-run). They are not cached and are not
    counted as the model's failures: rerunning the same command resumes from the cache."""


# ----------------------------------------------------------------------------------------------------------
# Prompts: versioned data files


def load_prompt(name: str, path: str | os.PathLike | None = None) -> PromptTemplate:
    """The built-in prompt ``name`` (``prompts/NAME.yaml``), or the YAML file at ``path`` that replaces it
    (:func:`medunlearn.llm.prompts.load_prompt`; its problems raise :class:`ConstructionError`)."""
    if name not in PROMPT_NAMES:
        raise ConstructionError(f"unknown prompt {name!r}; choose one of {', '.join(PROMPT_NAMES)}")
    return load_versioned_prompt(name, "medunlearn.amnesia.sources", path, error=ConstructionError)


# ----------------------------------------------------------------------------------------------------------
# Settings


@dataclass
class ConstructionConfig:
    """Settings of the LLM construction pipeline.

    Parameters:
        generator (`str`): the ``BACKEND:MODEL`` spec that writes the QA, e.g. ``openai:smollm2-135m@URL`` or
            ``transformers:smollm2-135m``.
        judges (`tuple[str]`, defaults to ``()``): one spec per judge, any mix of backends; empty: the
            generator ``DEFAULT_PANEL_SIZE`` (3) times, judge ``j`` sampling with seed ``seed + j``. At
            ``judge_temperature`` 0, entries with one cache identity are one distinct judge, asked once
            (:mod:`~medunlearn.amnesia.sources.judge_panel`): the default panel is then one judge.
        labeler (`str` or `None`, defaults to None): the spec that labels the diseases; None: the generator.
        cache (`str` or `Path` or `None`): the SQLite cache of every LLM answer (what makes reruns free and
            killed runs resumable); None keeps nothing.
        qa_per_type (`int`, defaults to 4): factual and reasoning QA per patient [paper].
        max_regenerations (`int`, defaults to 2): how often a failed QA is written again before its patient is
            skipped [ours: the paper gives no number].
        min_groundedness (`float`, defaults to 0.5): the least share of an answer's content words found in the
            note [ours].
        note_chars (`int`, defaults to 3000): the note is cut to this many characters in the QA and judge
            prompts (a small model's context is short) [ours].
        opening_chars (`int`, defaults to 600): the opening of the note shown to the labeller [ours].
        prompts (`dict[str, path]`, defaults to ``{}``): prompt files replacing the built-in ones, by name
            (``disease_label``, ``qa_generation``, ``judge``).
        seed (`int`, defaults to 0): the sampling seed (and, with ``sample``, which notes are drawn).
        sample (`int` or `None`, defaults to None): build from a seeded random subset of this many notes.
        regeneration_temperature (`float`, defaults to 0.7): sampling temperature of regenerations (greedy
            decoding would write the same QA again).
        judge_temperature (`float`, defaults to 0.0): the judges' temperature. Several copies of one model at
            0 vote alike and count as one judge; above 0 each copy samples with its own seed and is a judge.
        judge_all (`bool`, defaults to False): also judge, in the last round, the QA of a patient that is lost
            anyway (one of its QA failed generation or the checks). The panel's figures then cover every QA
            that passed the checks, as in the paper's measurement, at the cost of those judge calls; the
            kept patients and their QA are the same either way.
        label_max_tokens, qa_max_tokens, judge_max_tokens (`int`): completion limits per request. The QA
            limit (1536) holds the longest compact answer :func:`qa_schema`'s bounds allow (4,979 characters
            for 4 + 4 QA) at 3.25 or more characters per token; whitespace between JSON tokens is not bounded
            unless the decoder forbids it (vLLM's ``disable_any_whitespace``). An answer still cut there is a
            failed attempt.
        concurrency (`int`, defaults to 8): requests in flight per server backend.
        request_timeout_s (`float`, defaults to 1800): how long one server request may take before the client
            gives up and retries it [ours]. A busy server shares its throughput among ``concurrency``
            requests, so a long QA answer can take many minutes; a short time-out makes the client abandon and
            resend it again and again, wasting what the server already generated.
    """

    generator: str
    judges: tuple[str, ...] = ()
    labeler: str | None = None
    cache: str | Path | None = None
    qa_per_type: int = 4
    max_regenerations: int = 2
    min_groundedness: float = 0.5
    note_chars: int = 3000
    opening_chars: int = 600
    prompts: dict[str, str | Path] = field(default_factory=dict)
    seed: int = 0
    sample: int | None = None
    regeneration_temperature: float = 0.7
    judge_temperature: float = 0.0
    judge_all: bool = False
    label_max_tokens: int = 24
    qa_max_tokens: int = 1536
    judge_max_tokens: int = 384
    concurrency: int = 8
    request_timeout_s: float = 1800.0

    @property
    def judge_specs(self) -> tuple[str, ...]:
        return tuple(self.judges) or (self.generator,) * DEFAULT_PANEL_SIZE

    @property
    def labeler_spec(self) -> str:
        return self.labeler or self.generator

    def check(self) -> None:
        for spec in (self.generator, self.labeler_spec, *self.judge_specs):
            parse_spec(spec)  # raises BackendSpecError naming the spec
        if self.qa_per_type < 1:
            raise ConstructionError(f"qa_per_type must be at least 1, got {self.qa_per_type}")
        if not self.request_timeout_s > 0:
            raise ConstructionError(f"request_timeout_s must be positive, got {self.request_timeout_s}")
        if self.max_regenerations < 0:
            raise ConstructionError(f"max_regenerations must be >= 0, got {self.max_regenerations}")
        if not 0.0 <= self.min_groundedness <= 1.0:
            raise ConstructionError(f"min_groundedness must be in [0, 1], got {self.min_groundedness}")
        if self.sample is not None and self.sample < 1:
            raise ConstructionError(f"sample must be at least 1, got {self.sample}")
        unknown = sorted(set(self.prompts) - set(PROMPT_NAMES))
        if unknown:
            raise ConstructionError(
                f"unknown prompt(s) {', '.join(unknown)}; known: {', '.join(PROMPT_NAMES)}"
            )


def public_spec(spec: str) -> str:
    """``BACKEND:MODEL`` without the server URL: what the card names (a URL is a machine's, not the
    build's)."""
    parsed = parse_spec(spec)
    return f"{parsed.kind}:{parsed.model}"


# ----------------------------------------------------------------------------------------------------------
# Notes


@dataclass(frozen=True)
class SourceNote:
    patient_id: str
    title: str
    note: str
    age: int | None
    sex: str | None


def read_source_notes(path: str | os.PathLike) -> list[SourceNote]:
    """PMC-Patients rows (CSV, JSON or JSONL; the columns of :func:`~medunlearn.amnesia.pmc_patients.
    read_pmc_patients`), every note kept: here the LLM labels them. Literal ``\\n`` become line breaks."""
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
# Schemas


def label_schema() -> dict:
    return {
        "type": "object",
        "properties": {"category": {"type": "string", "enum": list(DISEASES)}},
        "required": ["category"],
        "additionalProperties": False,
    }


# Length bounds of the generated strings [ours]. Guided decoding enforces them, so an answer that would run on
# until ``max_tokens`` (what a small model does: it repeats itself inside a string) is closed at the bound and
# still parses, instead of costing ``max_tokens`` on every schema retry. Generous for clinical QA, whose
# questions and answers are a sentence or two.
MAX_QUESTION_CHARS = 160
MAX_ANSWER_CHARS = 240
MAX_FINDING_CHARS = 120
MAX_FINDINGS = 3


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


# ----------------------------------------------------------------------------------------------------------
# The pipeline


@dataclass
class Slot:
    """One QA position of a patient (``factual`` 1..4, ``reasoning`` 1..4) and what has happened to it."""

    qa_type: str
    index: int
    qa: dict | None = None  # the accepted QA
    tries: list[dict] = field(default_factory=list)  # every candidate: round, qa, checks, votes, valid

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


class _Chats:
    """One :class:`BulkChat` per distinct spec (a backend loaded once however many judges share it)."""

    def __init__(self, config: ConstructionConfig, backends: Mapping[str, Any] | None, progress: bool):
        self.cache = ResultCache(config.cache) if config.cache is not None else None
        self._chats: dict[str, BulkChat] = {}
        specs = [config.labeler_spec, config.generator, *config.judge_specs]
        for spec in dict.fromkeys(specs):
            backend = (backends or {}).get(spec)
            if backend is None:
                backend = make_backend(spec, **_backend_options(spec, config))
            self._chats[spec] = BulkChat(backend, cache=self.cache, show_progress=progress)

    def __getitem__(self, spec: str) -> BulkChat:
        return self._chats[spec]

    def check_ready(self) -> None:
        """Every backend answers, before any request is sent or the cache file is made."""
        for chat in self._chats.values():
            chat.backend.check_ready()

    def identities(self) -> dict[str, Any]:
        """Each spec's cache identity (what its backend serves): what tells distinct judges apart."""
        return {spec: cache_identity(chat.backend) for spec, chat in self._chats.items()}

    @property
    def calls(self) -> int:
        return sum(chat.stats.calls for chat in self._chats.values())

    @property
    def cache_hits(self) -> int:
        return sum(chat.stats.cache_hits for chat in self._chats.values())

    def close(self) -> None:
        for chat in self._chats.values():
            chat.close()


def _backend_options(spec: str, config: ConstructionConfig) -> dict:
    if parse_spec(spec).kind == "openai":
        from medunlearn.llm.openai_backend import ServerConfig

        return {"config": ServerConfig(concurrency=config.concurrency, timeout_s=config.request_timeout_s)}
    return {}


def _label_requests(notes: Sequence[SourceNote], prompt: PromptTemplate, config) -> list[ChatRequest]:
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


def _qa_request(patient: PatientState, prompt: PromptTemplate, config, round_number: int) -> ChatRequest:
    pending = patient.pending
    n_factual = sum(slot.qa_type == "factual" for slot in pending)
    n_reasoning = len(pending) - n_factual
    avoid = [slot.qa["question"] for slot in patient.slots if slot.qa is not None]
    avoid += [t["qa"]["question"] for slot in pending for t in slot.tries if t.get("qa")]
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


def _judge_request(
    patient: PatientState, candidates: list[dict], prompt: PromptTemplate, config, judge: int
) -> ChatRequest:
    qa_list = "\n".join(
        f"{number}. ({c['qa_type']}) Q: {c['qa']['question']}\n   A: {c['qa']['answer']}"
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
        seed=config.seed + judge,
        json_schema=judge_schema(len(candidates)),
        schema_name="judge_ratings",
        prompt_version=prompt.version,
    )


def _complete(chats: _Chats, spec: str, requests: list[ChatRequest], stage: str) -> list[ChatResult]:
    """One stage's requests; stop (nothing counted as a skip) when some got no answer from the backend."""
    results = chats[spec].complete(requests)
    lost = [result for result in results if result.transient]
    if lost:
        raise IncompleteRunError(
            f"{stage}: {len(lost)} of {len(results)} requests to {public_spec(spec)} got no answer "
            f"(last: {lost[-1].error}); the answers so far are cached: rerun the same command to resume"
        )
    return results


def _judge_round(
    chats: _Chats,
    judges: Sequence[PanelJudge],
    to_judge: list[tuple[PatientState, list[dict]]],
    prompt: PromptTemplate,
    config: ConstructionConfig,
) -> list[ChatResult]:
    """Ask each distinct judge about ``to_judge``'s candidates, record every candidate's votes and verdict
    (and a patient's label votes, once); return the judges' results (for the token counts)."""
    answers: list[list[ChatResult]] = [[] for _ in judges]
    judges_by_spec: dict[str, list[int]] = {}
    for number, judge in enumerate(judges):
        judges_by_spec.setdefault(judge.spec, []).append(number)
    spent: list[ChatResult] = []
    # Judges that share a spec go in one request list, so a server batches them all at once.
    for spec, numbers in judges_by_spec.items():
        requests = [
            _judge_request(p, c, prompt, config, judges[number].seed_offset)
            for number in numbers
            for p, c in to_judge
        ]
        results = _complete(chats, spec, requests, "judge")
        spent += results
        for k, number in enumerate(numbers):
            answers[number] = results[k * len(to_judge) : (k + 1) * len(to_judge)]
    for position, (patient, candidates) in enumerate(to_judge):
        mine = [answers[number][position] for number in range(len(judges))]
        if patient.label_votes is None:
            patient.label_votes = [a.parsed["label_supported"] if a.ok else None for a in mine]
        for number, candidate in enumerate(candidates):
            votes = [a.parsed["ratings"][number] if a.ok else None for a in mine]
            valid = [None if v is None else all(v[c] for c in CRITERIA) for v in votes]
            candidate["try"]["votes"] = votes
            candidate["try"]["valid"] = majority(valid, len(judges))
            if candidate["try"]["valid"]:
                candidate["slot"].qa = candidate["qa"]
    return spent


def _skip_reason(pending: Sequence[Slot]) -> str:
    """Why a patient short of valid QA is skipped, read from its pending slots' last tries: a failed
    generation, else a failed check (a patient with either is not judged in the last round), else the
    panel."""
    last_tries = [slot.tries[-1] for slot in pending if slot.tries]
    if any(attempt.get("qa") is None for attempt in last_tries):
        return SKIP_GENERATION
    if any(attempt.get("checks_failed") for attempt in last_tries):
        return SKIP_CHECKS
    return SKIP_PANEL  # every last try passed generation and the checks, so the panel rejected one


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
    import pyarrow as pa

    started = time.perf_counter()
    config.check()
    prompts = {name: load_prompt(name, config.prompts.get(name)) for name in PROMPT_NAMES}
    all_notes = read_source_notes(notes_path)
    notes = draw_sample(all_notes, config.sample, config.seed)
    chats = _Chats(config, backends, progress)
    try:
        chats.check_ready()
        usage: dict[str, list[ChatResult]] = {"disease_label": [], "qa_generation": [], "judge": []}

        # 1. Disease labels: the LLM's, the rule-based classifier's as fallback and second opinion.
        label_results = _complete(
            chats,
            config.labeler_spec,
            _label_requests(notes, prompts["disease_label"], config),
            "disease_label",
        )
        usage["disease_label"] += label_results
        vocabulary = default_vocabulary()
        # One batched pass: the rule label (fallback, second opinion), its confidence, and the kept notes'
        # disease keywords.
        analyses = vocabulary.analyse_records([n.title for n in notes], [n.note for n in notes])
        rule_analyses = {note.patient_id: analysis for note, analysis in zip(notes, analyses)}
        rule_labels = [analysis.category for analysis in analyses]
        patients: list[PatientState] = []
        skipped: dict[str, list[str]] = {}
        label_failures = 0
        for note, result, rule in zip(notes, label_results, rule_labels):
            llm = result.parsed["category"] if result.ok else None
            label_failures += llm is None
            disease = llm or rule
            if disease is None:
                skipped.setdefault(SKIP_NO_LABEL, []).append(note.patient_id)
                continue
            slots = [Slot(t, i) for t in QA_TYPES for i in range(config.qa_per_type)]
            patients.append(PatientState(note, disease, "llm" if llm else "rule", rule, llm, slots))

        # 2-3. Generation, checks and the panel, round by round (round 0, then the regenerations).
        judges = distinct_judges(config.judge_specs, chats.identities(), config.judge_temperature)
        regenerated_slots: dict[int, int] = {}
        for round_number in range(config.max_regenerations + 1):
            todo = [patient for patient in patients if patient.pending]
            if not todo:
                break
            if round_number:
                regenerated_slots[round_number] = sum(len(p.pending) for p in todo)
            requests = [_qa_request(p, prompts["qa_generation"], config, round_number) for p in todo]
            qa_results = _complete(chats, config.generator, requests, "qa_generation")
            usage["qa_generation"] += qa_results
            to_judge: list[tuple[PatientState, list[dict]]] = []
            for patient, result in zip(todo, qa_results):
                pending = patient.pending
                if not result.ok:
                    for slot in pending:
                        slot.tries.append({"round": round_number, "qa": None, "error": result.error})
                    continue
                produced = {t: list(result.parsed[t]) for t in QA_TYPES}
                note_words = set(words(patient.note.note))
                questions = {" ".join(words(s.qa["question"])) for s in patient.slots if s.qa is not None}
                candidates = []
                for slot in pending:
                    qa = produced[slot.qa_type].pop(0)
                    failed = check_qa(qa, slot.qa_type, note_words, questions, config.min_groundedness)
                    questions.add(" ".join(words(str(qa.get("question", "")))))
                    attempt = {
                        "round": round_number,
                        "qa": qa,
                        "groundedness": round(groundedness(str(qa.get("answer", "")), note_words), 4),
                        "checks_failed": failed,
                    }
                    slot.tries.append(attempt)
                    if not failed:
                        candidates.append({"slot": slot, "qa_type": slot.qa_type, "qa": qa, "try": attempt})
                # In the last round a patient with a slot that failed is skipped whatever the panel says, so
                # its other candidates are not judged (unless ``judge_all``): no judge call is spent on a
                # patient already lost.
                last_round = round_number == config.max_regenerations
                lost = last_round and not config.judge_all and len(candidates) < len(pending)
                if lost:
                    for candidate in candidates:
                        candidate["try"]["judged"] = False
                elif candidates:
                    to_judge.append((patient, candidates))
            if to_judge:
                usage["judge"] += _judge_round(chats, judges, to_judge, prompts["judge"], config)
    finally:
        chats.close()

    kept = []
    for patient in patients:
        if patient.pending:
            reason = _skip_reason(patient.pending)
            skipped.setdefault(reason, []).append(patient.note.patient_id)
        else:
            kept.append(patient)

    keywords = [rule_analyses[p.note.patient_id].keywords for p in kept]
    notes_table = pa.table(
        {
            "patient_id": [p.note.patient_id for p in kept],
            "title": [p.note.title for p in kept],
            "note": [p.note.note for p in kept],
            "disease": [p.disease for p in kept],
            "disease_keywords": keywords,
            "age": [p.note.age for p in kept],
            "sex": [p.note.sex for p in kept],
        },
        schema=NOTES_SCHEMA,
    )
    qa_rows = [
        (f"{p.note.patient_id}-{slot.qa_id_suffix}", p.note.patient_id, p.disease, slot.qa_type, slot.qa)
        for p in kept
        for slot in p.slots
    ]
    qa_table = pa.table(
        {
            "qa_id": [row[0] for row in qa_rows],
            "patient_id": [row[1] for row in qa_rows],
            "disease": [row[2] for row in qa_rows],
            "qa_type": [row[3] for row in qa_rows],
            "question": [str(row[4]["question"]).strip() for row in qa_rows],
            "answer": [str(row[4]["answer"]).strip() for row in qa_rows],
        },
        schema=QA_SCHEMA,
    )
    report = construction_report(
        all_notes=len(all_notes),
        used=notes,
        patients=patients,
        kept=kept,
        skipped=skipped,
        label_failures=label_failures,
        regenerated_slots=regenerated_slots,
        config=config,
        prompts=prompts,
        usage=usage,
        rule_analyses=rule_analyses,
        panel=panel_report(
            judges,
            [public_spec(judge.spec) for judge in judges],
            [t for p in patients for s in p.slots for t in s.tries if "votes" in t],
            [p.label_votes for p in patients if p.label_votes is not None],
        ),
    )
    return Construction(
        notes=notes_table,
        qa=qa_table,
        skipped={reason: sorted(ids) for reason, ids in skipped.items()},
        report=report,
        calls=chats.calls,
        cache_hits=chats.cache_hits,
        seconds=time.perf_counter() - started,
    )


_TRY_FIELDS = ("round", "groundedness", "checks_failed", "judged", "votes", "valid", "error")


def _try_summary(attempt: dict) -> dict:
    """One candidate QA in the report: its round, checks, groundedness and votes (not its text)."""
    return {key: attempt[key] for key in _TRY_FIELDS if key in attempt}


def construction_report(
    *,
    all_notes,
    used,
    patients,
    kept,
    skipped,
    label_failures,
    regenerated_slots,
    config,
    prompts,
    usage,
    panel,
    rule_analyses=None,
) -> dict:
    """The construction report: JSON-ready and deterministic (no times or run counters), so a rerun writes
    the same. ``panel``: :func:`~medunlearn.amnesia.sources.judge_panel.panel_report`'s section;
    ``rule_analyses``: the rule-based classifier's analysis per used note's patient id."""
    rule_analyses = rule_analyses or {}
    judged = [t for p in patients for s in p.slots for t in s.tries if "votes" in t]
    checked = [t for p in patients for s in p.slots for t in s.tries if t.get("qa") is not None]
    failed_checks: dict[str, int] = {}
    for attempt in checked:
        for check in attempt["checks_failed"]:
            failed_checks[check] = failed_checks.get(check, 0) + 1

    disagreements = [
        {
            "patient_id": p.note.patient_id,
            "llm": p.llm_label,
            "rule": p.rule_label,
            # The rule-based classifier's confidence [ours] and the rule that decided its label.
            "rule_confidence": rule_analyses[p.note.patient_id].confidence,
            "rule_decided_by": rule_analyses[p.note.patient_id].rule,
        }
        if p.note.patient_id in rule_analyses
        else {"patient_id": p.note.patient_id, "llm": p.llm_label, "rule": p.rule_label}
        for p in patients
        if p.llm_label and p.rule_label and p.llm_label != p.rule_label
    ]
    both = sum(1 for p in patients if p.llm_label and p.rule_label)
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
    qa_details = [
        {
            "qa_id": f"{p.note.patient_id}-{s.qa_id_suffix}",
            "patient_id": p.note.patient_id,
            "qa_type": s.qa_type,
            "accepted": s.qa is not None,
            "tries": [_try_summary(t) for t in s.tries],
            "groundedness": next((t["groundedness"] for t in reversed(s.tries) if "groundedness" in t), None),
        }
        for p in patients
        for s in p.slots
    ]
    return {
        "notes": {"in_file": all_notes, "used": len(used), "sample": config.sample, "kept": len(kept)},
        "models": {
            "labeler": public_spec(config.labeler_spec),
            "generator": public_spec(config.generator),
            "judges": [public_spec(spec) for spec in config.judge_specs],
        },
        "prompts": {
            name: {
                "version": p.version,
                "file": "builtin" if p.source == "builtin" else Path(p.source).name,
                "sha256": p.sha256,
            }
            for name, p in prompts.items()
        },
        "settings": {
            "qa_per_type": config.qa_per_type,
            "max_regenerations": config.max_regenerations,
            "min_groundedness": config.min_groundedness,
            "note_chars": config.note_chars,
            "opening_chars": config.opening_chars,
            "seed": config.seed,
            "regeneration_temperature": config.regeneration_temperature,
            "judge_temperature": config.judge_temperature,
            "judge_all": config.judge_all,
        },
        "labels": {
            "llm": sum(p.label_source == "llm" for p in patients),
            "rule_fallback": sum(p.label_source == "rule" for p in patients),
            "llm_failed": label_failures,
            "none": len(skipped.get(SKIP_NO_LABEL, [])),
            "both_available": both,
            "disagreements": len(disagreements),
            "agreement_with_rule": _share(both - len(disagreements), both),
            "disagreement_list": disagreements,
        },
        # Over every used note (by deciding rule, confidence, share below 0.5, notes without a term) [ours].
        "rule_classifier": classifier_summary(rule_analyses.values()),
        "panel": panel,
        "qa": {
            "generated": len(checked),
            "generation_failures": sum(
                1 for p in patients for s in p.slots for t in s.tries if t.get("qa") is None
            ),
            "failed_checks": dict(sorted(failed_checks.items())),
            "passed_checks": sum(not t["checks_failed"] for t in checked),
            "judged": len(judged),
            # Passed the checks in the last round, but their patient had a failed slot: skipped unjudged.
            "not_judged_patient_lost": sum(
                1 for p in patients for s in p.slots for t in s.tries if t.get("judged") is False
            ),
            "rejected_by_panel": sum(not t["valid"] for t in judged),
            "regenerated_slots": {str(k): v for k, v in regenerated_slots.items()},
            "mean_groundedness": _share(sum(t["groundedness"] for t in checked), len(checked) or 0),
            "accepted": sum(s.qa is not None for p in kept for s in p.slots),
        },
        "skips": {reason: len(ids) for reason, ids in sorted(skipped.items())},
        "tokens": tokens,
        "qa_details": qa_details,
    }
