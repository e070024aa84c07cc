"""The settings of the LLM construction (:mod:`~medunlearn.amnesia.sources.llm_built`): the models, the
limits and the prompt files, checked before any call. See ``docs/amnesia-construction.md``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from medunlearn.errors import MedunlearnError
from medunlearn.llm import parse_spec
from medunlearn.llm.prompts import PromptTemplate
from medunlearn.llm.prompts import load_prompt as load_versioned_prompt

PROMPT_NAMES = ("disease_label", "qa_generation", "judge")
DEFAULT_PANEL_SIZE = 3


class ConstructionError(MedunlearnError, ValueError):
    """A setting, prompt file or notes file the construction pipeline cannot use (the message names it)."""


def load_prompt(name: str, path: str | os.PathLike | None = None) -> PromptTemplate:
    """The built-in prompt ``name`` (``prompts/NAME.yaml``), or the YAML file at ``path`` that replaces it
    (:func:`medunlearn.llm.prompts.load_prompt`; its problems raise :class:`ConstructionError`)."""
    if name not in PROMPT_NAMES:
        raise ConstructionError(f"unknown prompt {name!r}; choose one of {', '.join(PROMPT_NAMES)}")
    return load_versioned_prompt(name, "medunlearn.amnesia.sources.llm_built", path, error=ConstructionError)


@dataclass
class ConstructionConfig:
    """Settings of the LLM construction pipeline.

    Parameters:
        generator (`str`): the ``BACKEND:MODEL`` spec that writes the QA, e.g. ``openai:smollm2-135m@URL`` or
            ``transformers:smollm2-135m``.
        judges (`tuple[str]`, defaults to ``()``): one spec per judge, any mix of backends; empty: the
            generator ``DEFAULT_PANEL_SIZE`` (3) times, judge ``j`` sampling with seed ``seed + j``. At
            ``judge_temperature`` 0, entries with one cache identity are one distinct judge, asked once
            (:mod:`~medunlearn.amnesia.sources.llm_built.judge_panel`): the default panel is then one judge.
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
            limit (1536) holds the longest compact answer the bounds of :func:`~.qa_generation.qa_schema`
            allow (4,979 characters for 4 + 4 QA) at 3.25 or more characters per token; whitespace between
            JSON tokens is not bounded unless the decoder forbids it (vLLM's ``disable_any_whitespace``). An
            answer still cut there is a failed attempt.
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
