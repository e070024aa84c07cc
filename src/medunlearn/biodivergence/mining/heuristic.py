"""Stage 6 of BioDivergence construction, the heuristic silver labeller (docs: biodivergence-construction.md;
the LLM labeller and the stage are :mod:`medunlearn.biodivergence.mining.labels`).

**Heuristic** [ours] (:func:`heuristic_labels`). The rules are the PubMedQA pool's
(:func:`medunlearn.biodivergence.pools.rule_labels`), fed from the pair's divergence signals
(:mod:`~medunlearn.biodivergence.mining.signals`) instead of PubMedQA's decisions and MeSH terms:

- *opposite*: the two claims' stances oppose (``polarity_reversal``: up against down, or an effect against
  no effect; :func:`~medunlearn.biodivergence.mining.signals.claim_stances`) *and* they are about one
  question: they share an entity (``shared_entities`` ≥ 1). Opposite stances about different things are no
  conflict ("about different questions", the ontology's definition);
- *hedged*: opposite, and one claim carries a hedge (the claim extractor's ``hedge`` cue: may, might,
  could, likely, ...);
- *differing axes*: the context families that differ (``context_families``), mapped to axes: population →
  ``population``, geography → ``geography``, period → ``time_period``, dose → ``intervention``, assay →
  ``assay_protocol``, design → ``study_design``.

So: hedged → insufficient evidence; opposite with a differing axis → contextual contradiction (confounder: the
first such axis in registry order); opposite without one → direct contradiction; else no conflict. The
evidence span of each claim is the claim itself (the v1.0 claim-verbatim rule). The confidence, with P the
polarity reversal (0/1), N the negation mismatch (0/1), C the number of differing context families, S the
pair's cosine similarity clipped to [0, 1], H the hedge (0/1), E the entity mismatch (in [0, 1]) and A the
stance agreement (1 when both claims take the same stance: both up, both down, both an unsigned effect, or
both no effect; else 0):

    reversed (P = 1):     confidence = 0.45 + 0.10·N + 0.075·min(C, 2) + 0.10·S − 0.20·H − 0.10·E
    not reversed (P = 0): confidence = 0.20 + 0.30·S + 0.15·A − 0.10·N − 0.05·min(C, 2)

clipped to [0, 1] and rounded to 3 decimals. A reversal on similar claims of one topic is the surface
conflict the rules can see, and a context difference is what makes it contextual: those raise it. A hedge (the
rules cannot weigh it) and a different topic (entities) lower it. "No conflict" means compatible claims *or
claims about different questions* (the ontology), so a different topic does not lower it; what it rests on is
evidence of compatibility: similar claims, and two stances the rules can read that agree (A). A negation on
one side only or a context difference (a reversal the stances may have missed) lower it. A no-conflict label
reaches the paper's 0.45 train threshold with S ≥ 0.34 when the stances agree (0.67 with two differing
context families), and needs S ≥ 0.84 when they do not; a hedged reversal never reaches it.

>>> pairs = pd.DataFrame({"pair_id": ["p1"], "text_a": ["Drug X increased survival in children."],
...     "text_b": ["Drug X decreased survival in adults."], "polarity_reversal": [1],
...     "negation_mismatch": [0], "entity_mismatch": [0.0], "context_cues": [1],
...     "context_families": ["population"], "similarity": [0.8]})
>>> label = heuristic_labels(pairs).iloc[0]
>>> label["conflict_type"], label["axes"], label["dominant_confounder"], float(label["confidence"])
('contextual_contradiction', ['population'], 'population', 0.605)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from medunlearn.biodivergence.mining.claims import CUE_PATTERNS
from medunlearn.biodivergence.mining.signals import claim_stances
from medunlearn.biodivergence.pools import rule_labels
from medunlearn.biodivergence.schema import LABEL_COLUMNS
from medunlearn.errors import InputError

__all__ = [
    "FAMILY_AXES",
    "LABEL_COLUMNS",
    "heuristic_confidence",
    "heuristic_labels",
    "one_question",
    "stances_agree",
]

# [ours] The signal context families (signals.CONTEXT_FAMILIES) and the ontology axis each one feeds.
FAMILY_AXES: dict[str, str] = {
    "population": "population",
    "geography": "geography",
    "period": "time_period",
    "dose": "intervention",
    "assay": "assay_protocol",
    "design": "study_design",
}
AGREEING_STANCES = ("up", "down", "effect", "null")  # stances the rules can read (not "none" or "mixed")
PAIR_INPUT_COLUMNS = ("pair_id", "text_a", "text_b")
SIGNAL_INPUT_COLUMNS = ("polarity_reversal", "negation_mismatch", "entity_mismatch", "context_families")


class LabelInputError(InputError):
    """Pairs the labellers cannot read (a missing column, a bad value); the message names row and field."""


def _check_pairs(pairs: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [name for name in columns if name not in pairs.columns]
    if missing:
        raise LabelInputError(f"pairs lack the column(s) {missing}; got {list(pairs.columns)}")
    for name in ("text_a", "text_b"):
        if name in columns:
            bad = ~pairs[name].map(lambda value: isinstance(value, str) and bool(value.strip()))
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                raise LabelInputError(
                    f"pairs row {row} (pair {pairs['pair_id'].iat[row]!r}), field `{name}`: "
                    "must be a non-empty string"
                )


def _hedged(texts: pd.Series) -> np.ndarray:
    return texts.str.contains(re.compile(CUE_PATTERNS["hedge"], re.IGNORECASE), regex=True).to_numpy(bool)


def _number(pairs: pd.DataFrame, name: str, default: float = 0.0) -> np.ndarray:
    if name not in pairs.columns:
        return np.full(len(pairs), default, dtype=np.float64)
    return pd.to_numeric(pairs[name], errors="coerce").fillna(default).to_numpy(np.float64)


def one_question(pairs: pd.DataFrame) -> np.ndarray:
    """True where the two claims are about one question: they share an entity (``shared_entities`` ≥ 1, when
    mined; else an entity mismatch below 1). Opposite stances on different questions are no conflict (the
    ontology's "about different questions"), not a contradiction."""
    if "shared_entities" in pairs.columns:
        return _number(pairs, "shared_entities") >= 1
    return _number(pairs, "entity_mismatch") < 1


def stances_agree(pairs: pd.DataFrame) -> np.ndarray:
    """1.0 where both claims take the same readable stance (up, down, effect or null), else 0.0; the stances
    are the pair's ``stance_a``/``stance_b`` when mined, else read from the texts."""
    stance_a, stance_b = (
        pairs[f"stance_{side}"].to_numpy(object)
        if f"stance_{side}" in pairs.columns
        else claim_stances(pairs[f"text_{side}"].astype(str))
        for side in ("a", "b")
    )
    return ((stance_a == stance_b) & np.isin(stance_a, list(AGREEING_STANCES))).astype(np.float64)


def heuristic_confidence(
    polarity_reversal, negation_mismatch, context_cues, similarity, hedged, entity_mismatch, stances_agree=0
) -> np.ndarray:
    """The heuristic label's confidence (the module docstring's formula [ours]), vectorised.

    >>> heuristic_confidence([1, 0, 0], [0, 0, 0], [1, 0, 0], [0.8, 0.9, 0.6], [0, 0, 0], [0.0, 0.0, 1.0],
    ...                      [0, 0, 1]).tolist()
    [0.605, 0.47, 0.53]
    """
    p, n, c, s, h, e, a = (
        np.broadcast_to(np.asarray(values, dtype=np.float64), np.shape(polarity_reversal))
        for values in (
            polarity_reversal,
            negation_mismatch,
            context_cues,
            similarity,
            hedged,
            entity_mismatch,
            stances_agree,
        )
    )
    c, s = np.minimum(c, 2.0), np.clip(s, 0.0, 1.0)
    reversed_ = 0.45 + 0.10 * n + 0.075 * c + 0.10 * s - 0.20 * h - 0.10 * e
    same_way = 0.20 + 0.30 * s + 0.15 * a - 0.10 * n - 0.05 * c
    return np.round(np.clip(np.where(p > 0, reversed_, same_way), 0.0, 1.0), 3)


def heuristic_labels(pairs: pd.DataFrame) -> pd.DataFrame:
    """One heuristic label per pair, in :data:`LABEL_COLUMNS` (the rules of the module docstring)."""
    _check_pairs(pairs, (*PAIR_INPUT_COLUMNS, *SIGNAL_INPUT_COLUMNS))
    pairs = pairs.reset_index(drop=True)
    text_a, text_b = pairs["text_a"].astype(str), pairs["text_b"].astype(str)
    opposite = (_number(pairs, "polarity_reversal") > 0) & one_question(pairs)
    hedge = _hedged(text_a) | _hedged(text_b)
    families = pairs["context_families"].fillna("").astype(str).str.split(",")
    differ = {
        axis: families.map(lambda found, f=family: f in found).to_numpy(bool)
        for family, axis in FAMILY_AXES.items()
    }
    labels = rule_labels(opposite, opposite & hedge, differ, subject="claims")
    n_families = np.array([sum(f in FAMILY_AXES for f in found) for found in families], dtype=np.float64)
    context_cues = _number(pairs, "context_cues") if "context_cues" in pairs.columns else n_families
    confidence = heuristic_confidence(
        opposite.astype(np.float64),
        _number(pairs, "negation_mismatch"),
        context_cues,
        _number(pairs, "similarity"),
        (opposite & hedge).astype(np.float64),
        _number(pairs, "entity_mismatch"),
        stances_agree(pairs),
    )
    return pd.DataFrame(
        {
            "pair_id": pairs["pair_id"].astype(str),
            "label_source": "heuristic",
            "conflict_type": labels["conflict_type"],
            "axes": labels["axes"],
            "dominant_confounder": labels["dominant_confounder"],
            "reconciliation": labels["reconciliation"],
            "evidence_a": text_a,
            "evidence_b": text_b,
            "confidence": confidence,
            "repairs": [[] for _ in range(len(pairs))],
        }
    )[list(LABEL_COLUMNS)]
