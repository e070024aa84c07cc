"""Pool readers and writers: a pool file (JSON Lines / JSON / Parquet) and the PubMedQA-derived pool.

A pool file holds one pair per row with the columns of :data:`~medunlearn.biodivergence.schema.PAIR_COLUMNS`
(``axes`` a list). The PubMedQA pool pairs the conclusion sentences of real PubMed abstracts that share a
MeSH topic; its silver labels come from rules over the abstracts' expert yes/no/maybe decisions and MeSH
terms (ours, described in :func:`pubmedqa_pool`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.biodivergence.schema import ID_COLUMNS, PAIR_COLUMNS, PoolFormatError, normalise_pool
from medunlearn.errors import MedunlearnError
from medunlearn.ontology.biodivergence import AXIS_IDS, NO_CONFOUNDER
from medunlearn.utils.user_files import json_type_name, not_a_file, read_json, read_jsonl, read_parquet


class PoolNotFoundError(MedunlearnError, FileNotFoundError):
    """The pool file does not exist."""


def read_pool(path: str | Path) -> pd.DataFrame:
    """Read and validate a pool file (``.jsonl``, ``.json`` list of rows, or ``.parquet``)."""
    path = Path(path)
    if not path.is_file():
        raise PoolNotFoundError(f"pool file {path} {not_a_file(path)}")
    # JSON rows are read as objects, so an integer id beside a missing one stays an integer (pandas would
    # make the column float: 12345.0) and a boolean stays a boolean for the schema check to name.
    if path.suffix == ".parquet":
        frame = _typed_parquet(path).to_pandas()
    elif path.suffix == ".jsonl":
        frame = pd.DataFrame([row for _, row in read_jsonl(path)], dtype=object)
    elif path.suffix == ".json":
        rows = read_json(path, expect=list, what="a .json pool")
        bad = next((number for number, row in enumerate(rows, start=1) if not isinstance(row, dict)), None)
        if bad is not None:
            raise PoolFormatError(
                f"{path}: row {bad}: expected a JSON object, got {json_type_name(rows[bad - 1])}"
            )
        frame = pd.DataFrame(rows, dtype=object)
    else:
        raise PoolFormatError(f"{path}: unknown pool format {path.suffix!r}; use .jsonl, .json or .parquet")
    if "axes" in frame.columns:
        frame["axes"] = frame["axes"].map(lambda v: list(v) if isinstance(v, (list, np.ndarray)) else v)
    return _checked_pool(frame, path)


def _checked_pool(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """:func:`normalise_pool` for a pool read from ``path``, which must hold a pair: a pool without rows
    would build a dataset folder without a pair (the splits of a built folder may be empty, a pool not)."""
    if len(frame) == 0:
        raise PoolFormatError(f"{path}: the pool has no rows; a pool needs at least one pair")
    return normalise_pool(frame, source=str(path))


def _parquet_kind(kind) -> str:
    """What a parquet column type is in the pool schema's words: text, integer, number, list of text, empty
    (all null), or the type itself."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "text"
    if pa.types.is_integer(kind):
        return "integer"
    if pa.types.is_floating(kind):
        return "number"
    if pa.types.is_null(kind):
        return "empty"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return "list of text" if _parquet_kind(kind.value_type) in ("text", "empty") else str(kind)
    return str(kind)


# The parquet column kinds (:func:`_parquet_kind`) the non-text pool columns admit, and how to say so.
_PARQUET_WANTS: dict[str, tuple[tuple[str, ...], str]] = {
    "confidence": (("number", "integer"), "a number in [0, 1] (float)"),
    "axes": (("list of text",), "a list of axis ids (strings)"),
}


def _typed_parquet(path: Path):
    """A parquet pool as a ``pyarrow.Table`` whose columns have the pool schema's types: text columns text
    (integer ids cast to their digits, as in JSON), ``confidence`` a number, ``axes`` a list of text. A
    column of another type (confidence stored as strings) is refused by name and the row of its first value:
    converting it would hide a column written wrongly."""
    import pyarrow as pa

    table = read_parquet(path)
    for index, name in enumerate(table.column_names):
        if name not in PAIR_COLUMNS:
            continue
        kind = _parquet_kind(table.schema.field(name).type)
        allowed, wanted = _PARQUET_WANTS.get(name, (("text",), "text (strings)"))
        if name in ID_COLUMNS and kind == "integer":
            table = table.set_column(index, name, table.column(name).cast(pa.string()))
        elif kind not in (*allowed, "empty"):
            filled = np.flatnonzero(table.column(name).is_valid().to_numpy(zero_copy_only=False))
            if filled.size:  # an all-null column is a missing value per row, which the schema check names
                raise PoolFormatError(
                    f"{path}: row {filled[0] + 1}, field `{name}`: the parquet column holds {kind} values; "
                    f"the pool schema wants {wanted}"
                )
    return table


def write_pool(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write a pool as JSON Lines (sorted keys, one pair per line) so diffs stay readable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records = frame[list(PAIR_COLUMNS)].to_dict(orient="records")
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            record["axes"] = list(record["axes"])
            handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    return path


# MeSH terms that mark a context difference, by the axis they feed [ours].
MESH_AXES: dict[str, tuple[str, ...]] = {
    "population": (
        "Infant",
        "Child",
        "Child, Preschool",
        "Adolescent",
        "Adult",
        "Young Adult",
        "Middle Aged",
        "Aged",
        "Aged, 80 and over",
        "Pregnancy",
        "Infant, Newborn",
    ),
    "study_design": (
        "Retrospective Studies",
        "Prospective Studies",
        "Cross-Sectional Studies",
        "Case-Control Studies",
        "Cohort Studies",
        "Randomized Controlled Trials as Topic",
        "Follow-Up Studies",
        "Longitudinal Studies",
    ),
    "clinical_setting": (
        "Hospitals",
        "Intensive Care Units",
        "Emergency Service, Hospital",
        "Primary Health Care",
        "Outpatients",
        "Inpatients",
    ),
    "intervention": ("Drug Therapy", "Surgical Procedures, Operative", "Radiotherapy", "Laparoscopy"),
}
DOMAIN_PATTERNS: tuple[tuple[str, str], ...] = (
    ("antimicrobial_resistance", r"drug resistance|antibiotic|antimicrobial|anti-bacterial"),
    ("oncology", r"neoplasm|cancer|tumou?r|carcinoma|lymphoma|leukemia|melanoma"),
    ("infectious_disease", r"infection|virus|viral|bacteri|hiv|tubercul|sepsis|hepatitis"),
    ("genomics", r"\bgenes?\b|genetic|polymorphism|mutation|genom|genotype"),
)


@dataclass
class PubMedQAPoolConfig:
    """How the PubMedQA pool is made [ours].

    max_term_share: MeSH terms tagged on more than this share of abstracts (Humans, Female, ...) are too
    generic to make a topic. pairs_per_term: at most this many pairs per MeSH term (a chain through the
    term's abstracts in seeded random order). label_source: what the rule labels are recorded as ("heuristic"
    by default; use "llm" only to exercise dev/test on real text, the labels stay rule-made).
    """

    max_term_share: float = 0.03
    pairs_per_term: int = 2
    seed: int = 0
    label_source: str = "heuristic"


def _first_sentence(texts: pd.Series) -> pd.Series:
    return texts.str.strip().str.split(r"(?<=[.!?])\s+(?=[A-Z\"(])", n=1, regex=True).str[0]


def _domain(texts: pd.Series) -> pd.Series:
    lowered = texts.str.lower()
    domain = pd.Series("clinical_trials_epidemiology", index=texts.index, dtype=object)
    for name, pattern in reversed(DOMAIN_PATTERNS):  # first pattern wins, so apply it last
        domain = domain.mask(lowered.str.contains(pattern, regex=True), name)
    return domain


def rule_labels(
    opposite: np.ndarray, hedged: np.ndarray, differ: dict[str, np.ndarray], *, subject: str = "claims"
) -> dict[str, np.ndarray | list]:
    """The rule labels of pairs from three facts per pair [ours], shared by the PubMedQA pool and the mined
    pool's heuristic labeller (:mod:`medunlearn.biodivergence.mining.labels`):

    - ``opposite``: the two findings point opposite ways (yes vs no; a polarity reversal);
    - ``hedged``: one of them is too weak to tell (a ``maybe`` decision; a hedged, reversed claim);
    - ``differ``: ``{axis id: bool per pair}``, the axes on which the two contexts differ.

    Conflict type: hedged → ``insufficient_evidence``; else opposite → ``contextual_contradiction`` when
    some axis differs, else ``direct_contradiction``; else ``no_conflict``. Axes: the differing ones, in
    registry order. Dominant confounder of a contextual contradiction: its first axis in registry order
    (else "none"). Reconciliation: "The {subject} differ in {confounder}; both can hold in their own
    context." for a contextual contradiction, "The {subject} agree." for no conflict, else "".

    >>> labels = rule_labels(np.array([True, True, False]), np.array([False, False, False]),
    ...                      {"population": np.array([True, False, False])})
    >>> list(labels["conflict_type"]), labels["axes"], list(labels["dominant_confounder"])
    (['contextual_contradiction', 'direct_contradiction', 'no_conflict'], [['population'], [], []], \
['population', 'none', 'none'])
    """
    opposite, hedged = np.asarray(opposite, bool), np.asarray(hedged, bool)
    n = len(opposite)
    ordered_axes = [axis for axis in AXIS_IDS if axis in differ]
    matrix = (
        np.stack([np.asarray(differ[axis], bool) for axis in ordered_axes], axis=1)
        if ordered_axes
        else np.zeros((n, 0), bool)
    )
    axis_names = np.array(ordered_axes, dtype=object)
    axes = [list(axis_names[row]) for row in matrix]
    has_axis = matrix.any(axis=1)
    conflict = np.where(
        hedged,
        "insufficient_evidence",
        np.where(
            opposite,
            np.where(has_axis, "contextual_contradiction", "direct_contradiction"),
            "no_conflict",
        ),
    ).astype(object)
    carries_confounder = (conflict == "contextual_contradiction") & has_axis
    first_axis = axis_names[np.argmax(matrix, axis=1)] if ordered_axes else np.full(n, NO_CONFOUNDER)
    confounder = np.where(carries_confounder, first_axis, NO_CONFOUNDER).astype(object)
    reconciliation = np.where(
        carries_confounder,
        f"The {subject} differ in "
        + pd.Series(confounder, dtype=object).str.replace("_", " ").to_numpy(dtype=object)
        + "; both can hold in their own context.",
        np.where(conflict == "no_conflict", f"The {subject} agree.", ""),
    ).astype(object)
    return {
        "conflict_type": conflict,
        "axes": axes,
        "dominant_confounder": confounder,
        "reconciliation": reconciliation,
    }


def _pubmedqa_articles(path: Path) -> pd.DataFrame:
    """The abstracts of ``ori_pqal.json`` (indexed by PMID) with a claim, an abstract text and a domain; those
    whose conclusion yields no claim are left out."""
    if not path.is_file():
        raise PoolNotFoundError(f"PubMedQA file {path} {not_a_file(path)} (expected ori_pqal.json)")
    raw = read_json(path, expect=dict, what="PubMedQA's ori_pqal.json (an object keyed by PMID)")
    articles = pd.DataFrame.from_dict(raw, orient="index")
    articles.index = articles.index.astype(str)
    for field in ("QUESTION", "CONTEXTS", "LONG_ANSWER", "MESHES", "final_decision"):
        if field not in articles.columns:
            raise PoolFormatError(f"{path}: records lack the field {field!r}")
    articles["claim"] = _first_sentence(articles["LONG_ANSWER"].fillna(""))
    articles["abstract"] = articles["CONTEXTS"].map(" ".join) + " " + articles["LONG_ANSWER"]
    articles["domain"] = _domain(
        articles["QUESTION"] + " " + articles["MESHES"].map(" ".join) + " " + articles["abstract"]
    )
    return articles[articles["claim"].str.len() > 0]


def _pairs_within_terms(articles: pd.DataFrame, config: PubMedQAPoolConfig) -> pd.DataFrame:
    """``article_a``, ``article_b`` (PMIDs, in order): consecutive abstracts of each MeSH term's seeded
    chain, once per pair of abstracts (see :func:`pubmedqa_pool`)."""
    terms = (
        articles["MESHES"].explode().dropna().rename("term").reset_index().rename(columns={"index": "pmid"})
    )
    term_count = terms["term"].map(terms["term"].value_counts())
    terms = terms[(term_count >= 2) & (term_count <= max(2, config.max_term_share * len(articles)))]
    rng = np.random.default_rng(config.seed)
    terms = terms.assign(order=rng.random(len(terms))).sort_values(["term", "order"], kind="stable")
    same_term = terms["term"].to_numpy()[1:] == terms["term"].to_numpy()[:-1]
    rank = terms.groupby("term", sort=False).cumcount().to_numpy()[1:]
    take = same_term & (rank <= config.pairs_per_term)
    left, right = terms["pmid"].to_numpy()[:-1][take], terms["pmid"].to_numpy()[1:][take]
    first = np.where(left < right, left, right)
    second = np.where(left < right, right, left)
    return pd.DataFrame({"article_a": first, "article_b": second}).drop_duplicates(ignore_index=True)


def _differing_axes(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per axis, whether the paired abstracts differ on it: different MeSH terms of the axis (both carrying
    one), or publication years ten or more apart for ``time_period``."""
    differ = {}
    for axis, mesh_terms in MESH_AXES.items():
        wanted = set(mesh_terms)
        terms_a = a["MESHES"].map(lambda ts, w=wanted: frozenset(t for t in ts if t in w))
        terms_b = b["MESHES"].map(lambda ts, w=wanted: frozenset(t for t in ts if t in w))
        differ[axis] = ((terms_a != terms_b) & (terms_a.map(len) > 0) & (terms_b.map(len) > 0)).to_numpy()
    year_a = pd.to_numeric(a.get("YEAR"), errors="coerce").to_numpy()
    year_b = pd.to_numeric(b.get("YEAR"), errors="coerce").to_numpy()
    differ["time_period"] = np.abs(year_a - year_b) >= 10
    return differ


def pubmedqa_pool(path: str | Path, config: PubMedQAPoolConfig | None = None) -> pd.DataFrame:
    """A pair pool from PubMedQA ``ori_pqal.json`` (PMID → QUESTION, CONTEXTS, LONG_ANSWER, MESHES, ...).

    Claims are the first sentence of each abstract's conclusion (LONG_ANSWER). Within each MeSH term used by
    at least two and at most ``max_term_share`` of the abstracts, the abstracts are chained in seeded random
    order and consecutive ones are paired (at most ``pairs_per_term``); a pair of abstracts reached through
    several terms is kept once. Rule labels [ours]:

    - axes: for each axis of :data:`MESH_AXES`, the two abstracts carry different terms of that axis; years
      ten or more apart add ``time_period``;
    - conflict type: one ``maybe`` decision → ``insufficient_evidence``; yes vs no →
      ``contextual_contradiction`` when some axis differs, else ``direct_contradiction``; equal decisions →
      ``no_conflict``;
    - dominant confounder: the first differing axis in registry order; confidence 0.6 (0.5 with a ``maybe``).

    The last two rules are :func:`rule_labels`, which the mined pool's heuristic labeller shares.
    """
    config = config or PubMedQAPoolConfig()
    path = Path(path)
    articles = _pubmedqa_articles(path)
    pairs = _pairs_within_terms(articles, config)
    a, b = articles.loc[pairs["article_a"]].reset_index(), articles.loc[pairs["article_b"]].reset_index()
    differ = _differing_axes(a, b)
    decision_a, decision_b = a["final_decision"].to_numpy(), b["final_decision"].to_numpy()
    maybe = (decision_a == "maybe") | (decision_b == "maybe")
    labels = rule_labels(decision_a != decision_b, maybe, differ, subject="conclusions")
    conflict, axes = labels["conflict_type"], labels["axes"]
    confounder, reconciliation = labels["dominant_confounder"], labels["reconciliation"]
    frame = pd.DataFrame(
        {
            "pair_id": "pqa-" + pairs["article_a"] + "-" + pairs["article_b"],
            "domain": a["domain"],
            "claim_a": a["claim"],
            "claim_b": b["claim"],
            "article_a": pairs["article_a"],
            "article_b": pairs["article_b"],
            "abstract_a": a["abstract"],
            "abstract_b": b["abstract"],
            "conflict_type": conflict,
            "axes": axes,
            "dominant_confounder": confounder,
            "reconciliation": reconciliation,
            "evidence_a": a["claim"],
            "evidence_b": b["claim"],
            "label_source": config.label_source,
            "confidence": np.where(maybe, 0.5, 0.6),
        }
    )
    return _checked_pool(frame, path)
