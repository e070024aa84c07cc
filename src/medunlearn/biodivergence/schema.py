"""The claim-pair record, its ``datasets.Features`` and vectorised validation of a whole pool.

A *pool* is a table of candidate pairs with silver labels, one row per pair, in the columns of
:data:`PAIR_COLUMNS`. The build step turns a pool into the v1.0 and pair-level splits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from medunlearn.errors import InputError, MedunlearnError, shown
from medunlearn.ontology.biodivergence import AXIS_IDS, CONFLICT_TYPE_IDS, NO_CONFOUNDER
from medunlearn.utils.column_types import NUMBER, TEXT, TEXT_LIST

# [paper] The five domains the paper mines: the documented defaults, listed first in reports. The label set
# is open [ours]: a pool's `domain` may be any non-empty string (e.g. "cardiovascular"), kept as it is.
DOMAINS: tuple[str, ...] = (
    "antimicrobial_resistance",
    "oncology",
    "infectious_disease",
    "genomics",
    "clinical_trials_epidemiology",
)
LABEL_SOURCES: tuple[str, ...] = ("llm", "heuristic")
MIN_CONFIDENCE = 0.45  # [paper] train keeps heuristic labels with confidence >= 0.45
# Which label sources v1.0's dev and test admit. "llm" is the paper's rule [paper]; "heuristic" [ours] is the
# opt-in for builds without an LLM labeller: dev/test then admit heuristic labels too (at the same confidence
# threshold), and every row, the card and the audit say so (docs: biodivergence.md).
EVAL_LABELS: dict[str, tuple[str, ...]] = {"llm": ("llm",), "heuristic": ("llm", "heuristic")}

# What a label says about a pair: the fields a labeller fills (the LLM labeller's JSON schema asks for exactly
# these), in the order of a pool row and of a label table.
LABEL_FIELDS: tuple[str, ...] = (
    "conflict_type",
    "axes",
    "dominant_confounder",
    "reconciliation",
    "evidence_a",
    "evidence_b",
)
PAIR_COLUMNS: tuple[str, ...] = (
    "pair_id",
    "domain",
    "claim_a",
    "claim_b",
    "article_a",
    "article_b",
    "abstract_a",
    "abstract_b",
    *LABEL_FIELDS,
    "label_source",
    "confidence",
)
# What makes two rows one pair: rows that agree on these are copies of it (each with its own label), which
# may share a pair_id; rows under one pair_id that differ here are different pairs (`normalise_pool` refuses).
PAIR_IDENTITY: tuple[str, ...] = ("domain", "claim_a", "claim_b", "article_a", "article_b")
STRING_COLUMNS = tuple(name for name in PAIR_COLUMNS if name not in ("axes", "confidence"))
# The id columns: text, but a pool may give them as integers (a PMID written as the JSON number 12345), which
# are read as their decimal digits ("12345"): a JSON integer has one spelling (no leading zeros, no exponent),
# so nothing is lost. A float (12345.0), a boolean or anything else is refused, as `mine` does for a pmid.
ID_COLUMNS: tuple[str, ...] = ("pair_id", "article_a", "article_b")
# What each column of a folder's parquet file must read back as (the types of `pair_features`).
COLUMN_KINDS: dict[str, str] = {
    name: {"axes": TEXT_LIST, "confidence": NUMBER}.get(name, TEXT) for name in PAIR_COLUMNS
}
# One row per label made in construction (mining stage 6), before it becomes a pool row: ``repairs`` counts
# what the LLM label needed repaired (docs/biodivergence-construction.md).
LABEL_COLUMNS: tuple[str, ...] = ("pair_id", "label_source", *LABEL_FIELDS, "confidence", "repairs")
# The columns a pool may leave out and the value a missing one takes; a missing ``evidence_a``/``evidence_b``
# takes the pair's own claim (the v1.0 claim-verbatim rule). Every other pair column is required.
OPTIONAL_COLUMN_DEFAULTS: dict[str, str] = {
    "abstract_a": "",
    "abstract_b": "",
    "reconciliation": "",
    "dominant_confounder": NO_CONFOUNDER,
}
REQUIRED_COLUMNS: tuple[str, ...] = tuple(
    name
    for name in PAIR_COLUMNS
    if name not in OPTIONAL_COLUMN_DEFAULTS and name not in ("evidence_a", "evidence_b")
)


class PoolFormatError(MedunlearnError, ValueError):
    """A pool that does not follow the pair schema; the message names the source, row and field."""


def pair_features():
    """The ``datasets.Features`` of one pair row (strings, ``axes`` a list of axis ids, float confidence)."""
    from datasets import Features, List, Value

    features = {name: Value("string") for name in STRING_COLUMNS}
    features["axes"] = List(Value("string"))
    features["confidence"] = Value("float64")
    return Features({name: features[name] for name in PAIR_COLUMNS})


def domain_order(domains) -> tuple[str, ...]:
    """The domains to report, in order: the paper's five (:data:`DOMAINS`), then the others found, sorted.

    >>> domain_order(["oncology", "cardiovascular", "neurology", "cardiovascular"])[-2:]
    ('cardiovascular', 'neurology')
    """
    extra = sorted({str(name) for name in domains} - set(DOMAINS))
    return (*DOMAINS, *extra)


def normalise_claim(texts: pd.Series) -> pd.Series:
    """Claim identity (for disjointness and for a claim paired with itself): lower case, single spaces, no
    trailing punctuation."""
    return texts.str.lower().str.replace(r"\s+", " ", regex=True).str.strip().str.rstrip(".;:!? ")


def _first_bad(mask: np.ndarray) -> int | None:
    bad = np.flatnonzero(~mask)
    return int(bad[0]) if bad.size else None


def _bad_value(frame: pd.DataFrame, source: str, row: int, field: str, why: str) -> PoolFormatError:
    """The error naming ``source``, the 1-based row, the field and its value as the user wrote it (``-0.5``,
    not ``np.float64(-0.5)``; a cell pandas filled with NaN or None, absent from the record, is said to be
    missing), cut at 500 characters."""
    value = frame.at[row, field]
    missing = value is None or (isinstance(value, float) and value != value)  # NaN: no value in the record
    where = f"{source}: row {row + 1}, field `{field}`"
    if missing:
        return PoolFormatError(f"{where}: the value is missing (absent, null or NaN); it {why}"[:500])
    return PoolFormatError(f"{where}: {why} (got {shown(value)})"[:500])


def _with_defaults(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` (rows renumbered from 0) with the optional columns present and blanks filled."""
    frame = frame.reset_index(drop=True).copy()
    for name, value in OPTIONAL_COLUMN_DEFAULTS.items():
        if name not in frame.columns:
            frame[name] = value
    for side in ("a", "b"):
        if f"evidence_{side}" not in frame.columns:
            frame[f"evidence_{side}"] = frame[f"claim_{side}"]
    frame["dominant_confounder"] = (
        frame["dominant_confounder"].fillna(NO_CONFOUNDER).replace("", NO_CONFOUNDER)
    )
    for name in ("abstract_a", "abstract_b", "reconciliation"):
        frame[name] = frame[name].fillna("")
    return frame


def _id_text(value):
    """An integer id (:data:`ID_COLUMNS`) as its decimal digits; anything else as it is, for the string check
    to judge (a boolean is no id, though Python counts ``True`` as an integer)."""
    return str(value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value


def _is_real_number(value) -> bool:
    """An int or a float, numpy's included; not a boolean (JSON ``true`` is no confidence, though Python
    counts it as 1) and not a string (pandas would read ``"0.9"`` as 0.9, hiding a wrongly typed column)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def _checked_confidence(frame: pd.DataFrame, source: str) -> np.ndarray:
    """``confidence`` as floats: every value a real number (:func:`_is_real_number`) in [0, 1]."""
    column = frame["confidence"]
    numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
    if not numeric:  # an object column (JSON rows): check each value's type; a numeric dtype needs no look
        row = _first_bad(column.map(lambda v: v is None or _is_real_number(v)).to_numpy(bool))
        if row is not None:
            why = "must be a number in [0, 1], not a boolean or a string"
            raise _bad_value(frame, source, row, "confidence", why)
    confidence = pd.to_numeric(column, errors="coerce").to_numpy(np.float64)
    row = _first_bad(np.isfinite(confidence) & (confidence >= 0) & (confidence <= 1))
    if row is not None:
        raise _bad_value(frame, source, row, "confidence", "must be a number in [0, 1]")
    return confidence


def _check_two_claims(frame: pd.DataFrame, source: str) -> None:
    """A pair joins two different claims: the same claim text (:func:`normalise_claim`) of the same article
    on both sides is one claim paired with itself: there are not two findings to compare, so any label it
    carries says nothing (it trivially "agrees") and would only teach a model that identical text agrees.
    The same sentence from two different articles is kept: two abstracts can state it, and such a pair is a
    genuine (if easy) ``no_conflict`` example; the splits key claims by text, so it stays claim-disjoint."""
    same = frame["article_a"].to_numpy(object) == frame["article_b"].to_numpy(object)
    same &= (normalise_claim(frame["claim_a"]) == normalise_claim(frame["claim_b"])).to_numpy(bool)
    row = _first_bad(~same)
    if row is not None:
        article = shown(frame.at[row, "article_a"])
        why = f"repeats claim_a of the same article ({article}): a pair needs two different claims"
        raise _bad_value(frame, source, row, "claim_b", why)


def _check_one_pair_per_id(frame: pd.DataFrame, source: str) -> None:
    """Rows that share a pair_id are copies of one pair (the same :data:`PAIR_IDENTITY`), which the split
    builder reduces to one (the LLM-labelled copy first: :func:`~medunlearn.biodivergence.splits.clean_pool`);
    two different pairs under one pair_id would lose one of them without a word, so they are refused, naming
    both rows."""
    ids = frame["pair_id"]
    shared = ids.duplicated(keep=False).to_numpy()
    if not shared.any():
        return
    copies = frame.loc[shared, ["pair_id", *PAIR_IDENTITY]]
    first = copies.groupby("pair_id", sort=False)[list(PAIR_IDENTITY)].transform("first")
    differs = copies[list(PAIR_IDENTITY)].ne(first)
    rows = np.flatnonzero(differs.any(axis=1).to_numpy())
    if rows.size:
        row = int(copies.index[rows[0]])
        earlier = int(np.flatnonzero((ids == ids.at[row]).to_numpy())[0])
        fields = ", ".join(name for name in PAIR_IDENTITY if differs.at[row, name])
        why = (
            f"row {earlier + 1} has this pair_id too, but the two rows are different pairs (they differ in "
            f"{fields}); copies of one pair (same domain, claims and articles) may share a pair_id, "
            "different pairs may not: give each pair its own"
        )
        raise _bad_value(frame, source, row, "pair_id", why)


def _check_strings_and_labels(frame: pd.DataFrame, source: str) -> None:
    """Text columns are strings (the identifying ones non-empty); closed label sets hold known labels."""
    for name in STRING_COLUMNS:
        column = frame[name]
        row = _first_bad(column.map(lambda v: isinstance(v, str)).to_numpy(bool))
        if row is not None:
            why = (
                "must be a string or an integer (a float or a boolean is no id)" if name in ID_COLUMNS else ""
            )
            raise _bad_value(frame, source, row, name, why or "must be a string")
        if name in ("pair_id", "domain", "claim_a", "claim_b", "article_a", "article_b"):
            row = _first_bad(column.str.strip().str.len().to_numpy() > 0)
            if row is not None:
                raise _bad_value(frame, source, row, name, "must not be empty")
    # `domain` is open (any non-empty string, checked above); these label sets are closed.
    checks = (
        ("conflict_type", CONFLICT_TYPE_IDS),
        ("label_source", LABEL_SOURCES),
        ("dominant_confounder", (*AXIS_IDS, NO_CONFOUNDER)),
    )
    for name, allowed in checks:
        row = _first_bad(frame[name].isin(allowed).to_numpy())
        if row is not None:
            raise _bad_value(frame, source, row, name, f"unknown label; allowed: {', '.join(allowed)}")


def _check_axes(frame: pd.DataFrame, source: str) -> None:
    """Turn ``axes`` into lists in place, then check they hold known axes and contain the confounder."""
    axes = frame["axes"].map(lambda v: list(v) if isinstance(v, (list, tuple, np.ndarray)) else None)
    row = _first_bad(axes.notna().to_numpy())
    if row is not None:
        raise _bad_value(frame, source, row, "axes", "must be a list of axis ids")
    frame["axes"] = axes
    exploded = axes.explode().dropna()
    bad_axes = ~exploded.isin(AXIS_IDS)
    if bad_axes.any():
        row = int(exploded.index[bad_axes.to_numpy()][0])
        raise _bad_value(frame, source, row, "axes", f"unknown axis; allowed: {', '.join(AXIS_IDS)}")
    # The confounder must be among the pair's own axes: compare "row|axis" keys instead of looping rows.
    axis_keys = exploded.index.astype(str) + "|" + exploded.astype(str)
    confounder_keys = frame.index.astype(str) + "|" + frame["dominant_confounder"]
    confounder_ok = frame["dominant_confounder"].eq(NO_CONFOUNDER).to_numpy() | confounder_keys.isin(
        axis_keys
    )
    row = _first_bad(confounder_ok)
    if row is not None:
        raise _bad_value(
            frame, source, row, "dominant_confounder", "must be one of the pair's axes or 'none'"
        )


def normalise_pool(frame: pd.DataFrame, source: str = "pool") -> pd.DataFrame:
    """Check every row of ``frame`` and return it with all :data:`PAIR_COLUMNS`, typed and filled.

    Optional columns get defaults: empty abstracts, ``evidence_a/b`` = the claim text (the v1.0
    claim-verbatim rule), ``reconciliation`` = "", ``dominant_confounder`` = "none"; integer ids become
    text (:data:`ID_COLUMNS`). Raises :class:`PoolFormatError` naming ``source``, the first bad row (1-based,
    the file's record number) and the field.
    """
    missing = [name for name in REQUIRED_COLUMNS if name not in frame.columns]
    if missing:
        raise PoolFormatError(f"{source}: missing column(s) {missing}; a pool needs {list(REQUIRED_COLUMNS)}")
    frame = _with_defaults(frame)
    for name in ID_COLUMNS:
        frame[name] = frame[name].map(_id_text)
    _check_strings_and_labels(frame, source)
    _check_two_claims(frame, source)
    _check_one_pair_per_id(frame, source)
    _check_axes(frame, source)
    frame["confidence"] = _checked_confidence(frame, source)
    return frame[list(PAIR_COLUMNS)]


def eval_label_sources(eval_labels: str) -> tuple[str, ...]:
    """The label sources v1.0's dev and test admit under ``eval_labels`` (:data:`EVAL_LABELS`).

    >>> eval_label_sources("llm"), eval_label_sources("heuristic")
    (('llm',), ('llm', 'heuristic'))
    """
    if eval_labels not in EVAL_LABELS:
        raise InputError(f"eval_labels {eval_labels!r} is not one of {', '.join(EVAL_LABELS)}")
    return EVAL_LABELS[eval_labels]
