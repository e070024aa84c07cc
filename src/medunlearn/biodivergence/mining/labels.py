"""Stage 6 of BioDivergence construction: silver labels for mined pairs (docs:
biodivergence-construction.md).

Two labellers, both writing labels that are valid under the ontology
(:mod:`medunlearn.ontology.biodivergence`) by construction, each with a ``label_source`` and a
``confidence`` in [0, 1]:

**Heuristic** [ours] (:func:`heuristic_labels`, :mod:`.heuristic`: its rules and confidence formula).

**LLM** (:func:`llm_labels`), through :class:`medunlearn.llm.BulkChat`: one request per pair, from a
versioned prompt (``prompts/silver_label.yaml``, ``version`` part of the cache key, replaceable by a file),
with the ontology as the JSON schema (:func:`label_schema`: class enum, axis enum list, dominant-confounder
enum, reconciliation and evidence strings). The server enforces the schema (guided decoding), the llm layer
validates and retries; what comes back is then repaired into a valid label, each repair recorded:

- axes: duplicates dropped, registry order;
- a dominant confounder that is not among the axes is added to them (the model named it as the main
  difference); a contextual contradiction without any axis gets ``unknown_latent_factor`` (the ontology's
  "a difference the abstracts do not name");
- an evidence span must be a substring of its claim: an exact match is kept; else a case- and
  space-insensitive match is replaced by the claim's own characters; else (or when empty) the span becomes
  the claim itself;
- confidence [ours] = max(0.5, 0.9 − 0.1 · (attempts − 1) − 0.1 · repairs): below 0.9 for every retry or
  repair, never below 0.5 (the paper keeps every LLM relabel, and 0.45 is the threshold for heuristic ones).

A request that fails (no schema-valid answer after the retries) gives no LLM label: the pair keeps its
heuristic label, and the failure is counted by reason. A request that got no answer at all (the server went
away) stops the stage with :class:`LabellingIncompleteError`; its answers so far are in the cache, and a rerun
resumes.

The paper's rules [paper] (dev and test only LLM-labelled; train adds heuristic labels with confidence ≥ 0.45)
are the split builder's (:mod:`medunlearn.biodivergence.splits`): the labels here keep every label made, both
sources, and :func:`pool_rows` turns them into pool rows (one per label; the builder keeps a pair's LLM copy).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.biodivergence.mining.heuristic import (
    FAMILY_AXES,
    PAIR_INPUT_COLUMNS,
    LabelInputError,
    _check_pairs,
    heuristic_confidence,
    heuristic_labels,
)
from medunlearn.biodivergence.schema import LABEL_COLUMNS, LABEL_FIELDS, MIN_CONFIDENCE
from medunlearn.errors import InputError, MedunlearnError
from medunlearn.llm import BulkChat, ChatRequest, ChatResult, parse_spec, summarize_usage
from medunlearn.llm.prompts import PromptTemplate, load_prompt
from medunlearn.ontology.biodivergence import (
    AXIS_IDS,
    CONFLICT_TYPE_IDS,
    CONFLICT_TYPES,
    CONTEXTUAL_CONTRADICTION,
    DIVERGENCE_AXES,
    NO_CONFOUNDER,
    check_axes,
    check_conflict_type,
    check_confounder,
)

__all__ = [
    "FAMILY_AXES",
    "LABEL_COLUMNS",
    "LabelConfig",
    "LabellingIncompleteError",
    "heuristic_confidence",
    "heuristic_labels",
    "label_prompt",
    "label_requests",
    "label_schema",
    "llm_labels",
    "pool_rows",
    "repair_llm_label",
    "silver_labels",
]

PROMPT_NAME = "silver_label"
MAX_AXES = 4  # [ours] a pair's contexts rarely differ on more; the schema's bound on the axes list
MAX_RECONCILIATION_CHARS = 240  # [ours]
MAX_SPAN_CHARS = 400  # [ours] a span is a substring of a claim (claims have at most 80 words)


class LabellingIncompleteError(MedunlearnError, ConnectionError):
    """Some label requests got no answer at all (the server went away mid-run). They are not cached: rerun
    the same command to resume from the cache."""


@dataclass
class LabelConfig:
    """Settings of the silver labellers.

    Parameters:
        labeller (`str` or `None`, defaults to None): the LLM as a ``BACKEND:MODEL`` spec
            (``openai:smollm2-135m@http://127.0.0.1:8000/v1``, ``transformers:smollm2-135m``); None: heuristic
            labels only (dev and test of v1.0 will then be empty).
        cache (`str` or `Path` or `None`, defaults to None): the SQLite cache of the LLM answers (what makes
            reruns free and killed runs resumable).
        prompt (`str` or `Path` or `None`, defaults to None): a prompt file replacing the built-in
            ``silver_label.yaml``.
        llm_pairs_per_domain (`int` or `None`, defaults to None): LLM-label only the best-ranked pairs of each
            domain (by ``rank``), to bound the cost; None: every pair [ours].
        max_tokens (`int`, defaults to 256): completion limit per label request.
        temperature (`float`, defaults to 0.0): greedy; retries of invalid answers sample (the llm layer).
        seed (`int`, defaults to 0): the sampling seed of the requests.
        concurrency (`int`, defaults to 8): requests in flight on a server backend.
        min_confidence (`float`, defaults to 0.45): the paper's threshold for heuristic train labels [paper];
            used here only to report how many heuristic labels reach it (the split builder applies it).
    """

    labeller: str | None = None
    cache: str | Path | None = None
    prompt: str | Path | None = None
    llm_pairs_per_domain: int | None = None
    max_tokens: int = 256
    temperature: float = 0.0
    seed: int = 0
    concurrency: int = 8
    min_confidence: float = MIN_CONFIDENCE

    def check(self) -> None:
        if self.labeller is not None:
            parse_spec(self.labeller)  # BackendSpecError names the spec
        if self.llm_pairs_per_domain is not None and self.llm_pairs_per_domain < 0:
            raise InputError(f"llm_pairs_per_domain must be >= 0, got {self.llm_pairs_per_domain}")
        if self.max_tokens < 16:
            raise InputError(f"max_tokens must be at least 16 for a label, got {self.max_tokens}")


# ----------------------------------------------------------------------------------------------------------
# LLM labels


def label_schema() -> dict:
    """The ontology as a JSON schema: what the server's guided decoding enforces and the llm layer checks.

    Bounds [ours]: at most :data:`MAX_AXES` axes and bounded texts, so that a small model cannot repeat an
    axis or a word until ``max_tokens`` and leave unfinished JSON (seen with SmolLM2-135M)."""
    return {
        "type": "object",
        "properties": {
            "conflict_type": {"type": "string", "enum": list(CONFLICT_TYPE_IDS)},
            "axes": {
                "type": "array",
                "items": {"type": "string", "enum": list(AXIS_IDS)},
                "maxItems": MAX_AXES,
            },
            "dominant_confounder": {"type": "string", "enum": [*AXIS_IDS, NO_CONFOUNDER]},
            "reconciliation": {"type": "string", "maxLength": MAX_RECONCILIATION_CHARS},
            "evidence_a": {"type": "string", "maxLength": MAX_SPAN_CHARS},
            "evidence_b": {"type": "string", "maxLength": MAX_SPAN_CHARS},
        },
        "required": list(LABEL_FIELDS),
        "additionalProperties": False,
    }


def label_prompt(path: str | os.PathLike | None = None) -> PromptTemplate:
    """The built-in ``silver_label`` prompt, or the YAML file at ``path`` that replaces it."""
    return load_prompt(PROMPT_NAME, "medunlearn.biodivergence.mining", path)


def _context(pairs: pd.DataFrame, side: str) -> list[str]:
    section = pairs.get(f"section_{side}", pd.Series("", index=pairs.index)).fillna("").astype(str)
    year = pairs.get(f"year_{side}", pd.Series("", index=pairs.index))
    year = year.map(lambda v: "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
    parts = [
        ", ".join(part for part in (s if s and s != "unlabelled" else "", y) if part) or "no context given"
        for s, y in zip(section, year)
    ]
    return parts


def label_requests(pairs: pd.DataFrame, prompt: PromptTemplate, config: LabelConfig) -> list[ChatRequest]:
    """One schema-constrained request per pair, in the frame's order."""
    _check_pairs(pairs, PAIR_INPUT_COLUMNS)
    classes = "\n".join(f"- {label.id}: {label.definition}" for label in CONFLICT_TYPES)
    axes = "\n".join(f"- {label.id}: {label.definition}" for label in DIVERGENCE_AXES)
    domains = pairs["domain"].astype(str) if "domain" in pairs.columns else pd.Series("", index=pairs.index)
    schema = label_schema()
    return [
        ChatRequest(
            prompt.messages(
                classes=classes,
                axes=axes,
                domain=domain.replace("_", " "),
                claim_a=claim_a,
                claim_b=claim_b,
                context_a=context_a,
                context_b=context_b,
            ),
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            seed=config.seed,
            json_schema=schema,
            schema_name="biodivergence_label",
            prompt_version=prompt.version,
        )
        for domain, claim_a, claim_b, context_a, context_b in zip(
            domains, pairs["text_a"], pairs["text_b"], _context(pairs, "a"), _context(pairs, "b")
        )
    ]


def _evidence(span, claim: str, side: str, repairs: list[str]) -> str:
    if not isinstance(span, str) or not span.strip():
        repairs.append(f"evidence_{side} empty: the claim itself")
        return claim
    span = span.strip()
    if span in claim:
        return span
    words = re.findall(r"\S+", span)
    found = re.search(r"\s+".join(re.escape(word) for word in words), claim, re.IGNORECASE) if words else None
    if found:
        repairs.append(f"evidence_{side} matched ignoring case and spaces")
        return found.group(0)
    repairs.append(f"evidence_{side} not in claim {side}: the claim itself")
    return claim


def repair_llm_label(answer, claim_a: str, claim_b: str) -> tuple[dict, list[str]]:
    """A valid label from an LLM answer, and the repairs it took (the module docstring's rules).

    Raises :class:`~medunlearn.ontology.biodivergence.UnknownLabelError` when the answer's class or axes are
    not in the ontology (the schema excludes that; a hosted API may not enforce it).

    >>> label, repairs = repair_llm_label({"conflict_type": "contextual_contradiction", "axes": [],
    ...     "dominant_confounder": "geography", "reconciliation": "Different countries.",
    ...     "evidence_a": "LOWER risk", "evidence_b": "made up"},
    ...     "Lower risk in Spain.", "Higher risk in Peru.")
    >>> label["axes"], label["evidence_a"], label["evidence_b"]
    (['geography'], 'Lower risk', 'Higher risk in Peru.')
    >>> repairs
    ['dominant_confounder added to axes', 'evidence_a matched ignoring case and spaces', \
'evidence_b not in claim b: the claim itself']
    """
    if not isinstance(answer, dict):
        raise InputError(f"an LLM label must be a JSON object, got {type(answer).__name__}")
    repairs: list[str] = []
    conflict = check_conflict_type(answer.get("conflict_type"))
    raw_axes = answer.get("axes") if isinstance(answer.get("axes"), list) else []
    given = check_axes(raw_axes)
    axes = [axis for axis in AXIS_IDS if axis in set(given)]
    if len(axes) != len(given):
        repairs.append("duplicate axes dropped")
    confounder = check_confounder(answer.get("dominant_confounder"))
    if confounder != NO_CONFOUNDER and confounder not in axes:
        axes = [axis for axis in AXIS_IDS if axis in {*axes, confounder}]
        repairs.append("dominant_confounder added to axes")
    if conflict == CONTEXTUAL_CONTRADICTION and not axes:
        axes = ["unknown_latent_factor"]
        repairs.append("contextual contradiction without axes: unknown_latent_factor")
    reconciliation = answer.get("reconciliation")
    if not isinstance(reconciliation, str):
        reconciliation = ""
        repairs.append("reconciliation missing")
    label = {
        "conflict_type": conflict,
        "axes": axes,
        "dominant_confounder": check_confounder(confounder, axes),
        "reconciliation": " ".join(reconciliation.split()),
        "evidence_a": _evidence(answer.get("evidence_a"), claim_a, "a", repairs),
        "evidence_b": _evidence(answer.get("evidence_b"), claim_b, "b", repairs),
    }
    return label, repairs


def llm_confidence(attempts: int, repairs: int) -> float:
    """[ours] max(0.5, 0.9 − 0.1·(attempts − 1) − 0.1·repairs).

    >>> llm_confidence(1, 0), llm_confidence(2, 1), llm_confidence(3, 4)
    (0.9, 0.7, 0.5)
    """
    return round(max(0.5, 0.9 - 0.1 * (max(attempts, 1) - 1) - 0.1 * repairs), 3)


def _failure_reason(result: ChatResult) -> str:
    """A short reason to count failures by: the last attempt's kind of error, and whether it was cut."""
    error = result.error or "unknown error"
    last = error.split("; last: ", 1)[-1]
    reason = last.split(":", 1)[0].strip()
    return reason + (" (cut at max_tokens)" if "cut at max_tokens" in error else "")


def llm_labels(
    pairs: pd.DataFrame, chat: BulkChat, prompt: PromptTemplate, config: LabelConfig
) -> tuple[pd.DataFrame, dict]:
    """LLM labels of ``pairs`` (one request each), repaired into valid labels; ``(labels, report)``.

    ``report`` counts requests, labels, failures by reason, repairs by kind and tokens. Raises
    :class:`LabellingIncompleteError` when some request got no answer at all (nothing is lost: the answers
    are cached, a rerun resumes)."""
    pairs = pairs.reset_index(drop=True)
    requests = label_requests(pairs, prompt, config)
    results = chat.complete(requests) if requests else []
    lost = [result for result in results if result.transient]
    if lost:
        raise LabellingIncompleteError(
            f"silver labels: {len(lost)} of {len(results)} label requests got no answer "
            f"(last: {lost[-1].error}); the answers so far are cached: rerun the same command to resume"
        )
    rows, failures, repair_counts = [], Counter(), Counter()
    for (pair_id, claim_a, claim_b), result in zip(
        pairs[["pair_id", "text_a", "text_b"]].itertuples(index=False), results
    ):
        if not result.ok:
            failures[_failure_reason(result)] += 1
            continue
        try:
            label, repairs = repair_llm_label(result.parsed, claim_a, claim_b)
        except (InputError, ValueError) as error:  # UnknownLabelError: an API that ignores the enum
            failures[f"not in the ontology: {str(error)[:80]}"] += 1
            continue
        repair_counts.update(repair.split(":")[0] for repair in repairs)
        rows.append(
            {
                "pair_id": str(pair_id),
                "label_source": "llm",
                **label,
                "confidence": llm_confidence(len(result.attempts), len(repairs)),
                "repairs": repairs,
            }
        )
    labels = pd.DataFrame(rows, columns=list(LABEL_COLUMNS))
    usage = summarize_usage(results)
    report = {
        "labeller": _public_spec(config.labeller) if config.labeller else "backend given by the caller",
        "prompt": prompt.describe(),
        "requests": len(requests),
        "labelled": len(labels),
        "failed": int(sum(failures.values())),
        "failures": dict(sorted(failures.items())),
        "repairs": dict(sorted(repair_counts.items())),
        "by_class": _class_counts(labels),
        "attempts": usage.attempts,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
    }
    return labels, report


def _public_spec(spec: str) -> str:
    """``BACKEND:MODEL`` without the server URL (a URL is a machine's, not the build's)."""
    parsed = parse_spec(spec)
    return f"{parsed.kind}:{parsed.model}"


def _class_counts(labels: pd.DataFrame) -> dict[str, int]:
    counts = labels["conflict_type"].value_counts()
    return {name: int(counts[name]) for name in CONFLICT_TYPE_IDS if name in counts.index}


def _llm_subset(pairs: pd.DataFrame, per_domain: int | None) -> pd.DataFrame:
    if per_domain is None:
        return pairs
    order = pairs.sort_values([c for c in ("domain", "rank", "pair_id") if c in pairs.columns], kind="stable")
    if "domain" not in pairs.columns:
        return order.head(per_domain)
    return order.groupby("domain", sort=False).head(per_domain)


def make_chat(config: LabelConfig, show_progress: bool = True) -> BulkChat:
    """The :class:`BulkChat` of ``config.labeller`` with ``config.cache``."""
    options = {}
    if parse_spec(config.labeller).kind == "openai":
        from medunlearn.llm.openai_backend import ServerConfig

        options["config"] = ServerConfig(concurrency=config.concurrency)
    return BulkChat.from_spec(config.labeller, cache=config.cache, show_progress=show_progress, **options)


def silver_labels(
    pairs: pd.DataFrame,
    config: LabelConfig | None = None,
    *,
    chat: BulkChat | None = None,
    show_progress: bool = True,
) -> tuple[pd.DataFrame, dict]:
    """Every label of ``pairs``: a heuristic one per pair, and an LLM one per pair the LLM labelled (all, or
    the best-ranked ``llm_pairs_per_domain`` of each domain) when ``config.labeller`` or ``chat`` is given.

    Returns ``(labels, report)``: labels in :data:`LABEL_COLUMNS`, sorted by pair_id then source (heuristic
    first); report counts per source (heuristic labels at or above ``min_confidence``, LLM failures and
    repairs, tokens).
    """
    config = config or LabelConfig()
    config.check()
    heuristic = heuristic_labels(pairs)
    report: dict = {
        "heuristic": {
            "labels": len(heuristic),
            "at_or_above_min_confidence": int((heuristic["confidence"] >= config.min_confidence).sum()),
            "min_confidence": config.min_confidence,
            "by_class": _class_counts(heuristic),
        }
    }
    frames = [heuristic]
    if chat is not None or config.labeller is not None:
        subset = _llm_subset(pairs, config.llm_pairs_per_domain)
        owned = chat is None
        chat = chat or make_chat(config, show_progress)
        try:
            llm, report["llm"] = llm_labels(subset, chat, label_prompt(config.prompt), config)
        finally:
            if owned:
                chat.close()
        frames.append(llm)
    labels = pd.concat(frames, ignore_index=True) if len(frames) > 1 else heuristic
    labels = labels.sort_values(["pair_id", "label_source"], kind="stable").reset_index(drop=True)
    return labels[list(LABEL_COLUMNS)], report


def pool_rows(
    pairs: pd.DataFrame, labels: pd.DataFrame, abstracts: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Pool rows (:data:`~medunlearn.biodivergence.schema.PAIR_COLUMNS`) of the labelled pairs: one row per
    label, so a pair labelled by both sources appears twice and the split builder keeps its LLM copy.

    ``claim_a``/``claim_b`` are the claim texts (the builder's claim identity), ``article_a``/``article_b``
    the PMIDs; ``abstracts`` (``pmid``, ``title``, ``abstract``), when given, fills ``abstract_a``/``_b``."""
    from medunlearn.biodivergence.schema import PAIR_COLUMNS, normalise_pool

    columns = ["pair_id", "domain", "text_a", "text_b", "article_a", "article_b"]
    _check_pairs(pairs, columns)
    joined = labels.merge(pairs[columns], on="pair_id", how="left", validate="many_to_one")
    unknown = joined["text_a"].isna()
    if unknown.any():
        raise LabelInputError(f"label of pair {joined['pair_id'][unknown].iloc[0]!r}: no such pair")
    joined = joined.rename(columns={"text_a": "claim_a", "text_b": "claim_b"})
    for side in ("a", "b"):
        joined[f"article_{side}"] = joined[f"article_{side}"].astype(str)
        if abstracts is not None and len(abstracts):
            title = abstracts.get("title", pd.Series("", index=abstracts.index)).fillna("").astype(str)
            text = (title.str.strip() + " " + abstracts["abstract"].fillna("").astype(str)).str.strip()
            lookup = pd.Series(text.to_numpy(), index=abstracts["pmid"].astype(str))
            lookup = lookup[~lookup.index.duplicated()]
            joined[f"abstract_{side}"] = joined[f"article_{side}"].map(lookup).fillna("")
        else:
            joined[f"abstract_{side}"] = ""
    return normalise_pool(joined[list(PAIR_COLUMNS)], source="mined pool")
