"""A fictitious BioDivergence pair pool: seeded, five domains, claim sentences built from study contexts.

Nothing here describes real studies. Each fictitious article has a domain, a topic (exposure → outcome), a
direction of effect and a study context (population, geography, period, design, assay, sample source,
molecular context, strain). A pair joins two articles of the same domain and topic; its silver labels follow
from comparing the two contexts, so they are learnable but not trivial:

- the *axes* are the context fields on which the articles differ;
- opposite directions with differing axes → ``contextual_contradiction``; with no differing axis →
  ``direct_contradiction``; same direction → ``no_conflict``; a small share of each other class, so the
  ontology is populated the way the paper describes (two classes carry most of the mass);
- the *dominant confounder* is one of the differing axes, the *reconciliation* a sentence naming it.

Articles are drawn so that they share pairs: many articles take part in several pairs, and a share
``hub_share`` of pairs attaches to a few *hub* articles per domain, which makes the article graph percolate
the way real retrieval-built pools do (docs/benchmarks/biodivergence.md, "Data and splits"). Everything is
vectorised over pairs (numpy / pandas).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from medunlearn.biodivergence.schema import DOMAINS, PAIR_COLUMNS
from medunlearn.ontology.biodivergence import NO_CONFOUNDER

TOPICS: dict[str, list[tuple[str, str]]] = {
    "antimicrobial_resistance": [
        ("carbapenem exposure", "carriage of carbapenemase-producing Enterobacterales"),
        ("fluoroquinolone use", "ciprofloxacin resistance in Escherichia coli"),
        ("colistin treatment", "mcr-1 detection in Klebsiella pneumoniae isolates"),
        ("vancomycin prescribing", "vancomycin-resistant enterococcal colonisation"),
    ],
    "oncology": [
        ("adjuvant capecitabine", "disease-free survival in triple-negative breast cancer"),
        ("PD-1 blockade", "overall survival in metastatic melanoma"),
        ("statin use", "recurrence of colorectal adenoma"),
        ("low-dose CT screening", "lung cancer mortality"),
    ],
    "infectious_disease": [
        ("oseltamivir", "duration of influenza symptoms"),
        ("BCG vaccination", "incidence of latent tuberculosis infection"),
        ("vitamin D supplementation", "acute respiratory infection"),
        ("doxycycline prophylaxis", "incident syphilis"),
    ],
    "genomics": [
        ("the APOE e4 allele", "age at onset of cognitive decline"),
        ("TP53 loss-of-function variants", "response to platinum chemotherapy"),
        ("CYP2C19 poor-metaboliser status", "stent thrombosis on clopidogrel"),
        ("polygenic risk score", "incident type 2 diabetes"),
    ],
    "clinical_trials_epidemiology": [
        ("intensive blood-pressure control", "stroke incidence"),
        ("Mediterranean diet", "major cardiovascular events"),
        ("aspirin for primary prevention", "all-cause mortality"),
        ("early mobilisation", "ICU-acquired weakness"),
    ],
}

# Context fields of an article: the divergence axis each one feeds, and its values.
CONTEXT_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("population", ("adults", "children", "older adults", "pregnant women")),
    ("geography", ("in Sweden", "in Brazil", "in India", "in the United States", "in Kenya")),
    ("time_period", ("during 2005-2010", "during 2015-2020")),
    ("study_design", ("a randomised trial", "a retrospective cohort", "a case-control study")),
    ("assay_protocol", ("culture-based testing", "PCR-based testing")),
    ("sample_source", ("blood samples", "tissue samples", "stool samples")),
    ("molecular_context", ("wild-type tumours", "KRAS-mutant tumours")),
    ("biological_strain", ("ST131 isolates", "ST258 isolates")),
)
# Fields whose values are mentioned in the claim sentence; the others only in the abstract.
SENTENCE_FIELDS = ("population", "geography", "study_design", "time_period")
DIRECTIONS = ("was associated with lower", "was associated with higher", "was not associated with")
OTHER_CLASSES = (
    "underspecified_surface_contradiction",
    "insufficient_evidence",
    "unresolved_scientific_controversy",
)


@dataclass
class SyntheticPoolConfig:
    """Knobs of the fictitious pool (all ours).

    n_pairs: rows before duplicates are added. articles_per_pair: distinct articles per pair (lower → articles
    share more pairs). hub_share: share of pairs whose second article is a hub. hubs_per_domain: hub articles
    per domain. heuristic_share: pairs labelled by the heuristic rather than the LLM. duplicate_share: pair
    ids repeated with the other label source (the builder keeps the LLM copy). other_class_share: pairs given
    one of the three rare conflict classes. field_change_rate: chance that each context field differs within
    a pair.
    """

    n_pairs: int = 2000
    seed: int = 0
    articles_per_pair: float = 1.2
    hub_share: float = 0.15
    hubs_per_domain: int = 4
    heuristic_share: float = 0.3
    duplicate_share: float = 0.03
    other_class_share: float = 0.06
    field_change_rate: float = 0.3


def _pick(values: tuple[str, ...] | list[str], index: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=object)[index]


@dataclass(frozen=True)
class _Articles:
    """The fictitious articles, laid out contiguously by (domain, topic) group."""

    group_start: np.ndarray  # first article of each group
    group_size: np.ndarray  # articles per group
    direction: np.ndarray  # index into DIRECTIONS, per article
    context: np.ndarray  # (articles, fields): index of each context field's value


@dataclass(frozen=True)
class _Pairs:
    """Which two articles, and which of their claims, each pair joins."""

    group: np.ndarray  # (domain, topic) group of the pair
    article_a: np.ndarray
    article_b: np.ndarray
    claim_a: np.ndarray  # claim index within article A
    claim_b: np.ndarray


@dataclass(frozen=True)
class _ClaimNumbers:
    """Article-specific numbers that make every (article, claim) sentence distinct, as real claims are."""

    sample_size: np.ndarray  # per article
    odds_ratio: np.ndarray  # (articles, claims) formatted strings


@dataclass(frozen=True)
class _Labels:
    """The silver labels of each pair, derived from comparing the two articles' contexts."""

    conflict: np.ndarray
    axes: list[list[str]]
    confounder: np.ndarray
    reconciliation: np.ndarray


_CLAIMS_PER_ARTICLE = 3
_N_TOPICS = len(next(iter(TOPICS.values())))


def _draw_articles(rng: np.random.Generator, config: SyntheticPoolConfig, n_groups: int) -> _Articles:
    """Articles with a direction and a context that keeps its group's values except on fields that change,
    so pairs differ on a few axes."""
    n_articles = max(n_groups * 2, int(round(int(config.n_pairs) * config.articles_per_pair)))
    group_of_article = np.sort(rng.integers(0, n_groups, n_articles))
    direction = rng.integers(0, len(DIRECTIONS), n_articles)
    base_context = np.stack([rng.integers(0, len(values), n_groups) for _, values in CONTEXT_FIELDS], axis=1)
    changes = rng.random((n_articles, len(CONTEXT_FIELDS))) < config.field_change_rate
    random_values = np.stack(
        [rng.integers(0, len(values), n_articles) for _, values in CONTEXT_FIELDS], axis=1
    )
    return _Articles(
        group_start=np.searchsorted(group_of_article, np.arange(n_groups)),
        group_size=np.bincount(group_of_article, minlength=n_groups),
        direction=direction,
        context=np.where(changes, random_values, base_context[group_of_article]),
    )


def _draw_pairs(rng: np.random.Generator, config: SyntheticPoolConfig, articles: _Articles) -> _Pairs:
    """Two distinct articles of one group per pair (groups are contiguous, so a partner is one draw); a
    ``hub_share`` of pairs takes a hub article as the second one."""
    n = int(config.n_pairs)
    group_size = articles.group_size
    group = rng.integers(0, len(group_size), n)
    group = np.where(group_size[group] > 1, group, int(np.argmax(group_size)))
    size = group_size[group]
    a_offset = rng.integers(0, size)
    b_offset = (a_offset + 1 + rng.integers(0, size - 1)) % size  # never the same article
    is_hub = rng.random(n) < config.hub_share
    hub_offset = rng.integers(0, np.minimum(config.hubs_per_domain, size))
    b_offset = np.where(is_hub & (hub_offset != a_offset), hub_offset, b_offset)
    return _Pairs(
        group=group,
        article_a=articles.group_start[group] + a_offset,
        article_b=articles.group_start[group] + b_offset,
        claim_a=rng.integers(0, _CLAIMS_PER_ARTICLE, n),
        claim_b=rng.integers(0, _CLAIMS_PER_ARTICLE, n),
    )


def _draw_claim_numbers(rng: np.random.Generator, direction: np.ndarray) -> _ClaimNumbers:
    """A sample size per article and an odds ratio per claim that agrees with the article's direction."""
    n_articles = len(direction)
    sample_size = rng.integers(40, 5000, n_articles)
    effect = np.where(
        direction == 0,
        rng.uniform(0.3, 0.95, (_CLAIMS_PER_ARTICLE, n_articles)),
        np.where(
            direction == 1,
            rng.uniform(1.05, 3.0, (_CLAIMS_PER_ARTICLE, n_articles)),
            rng.uniform(0.9, 1.1, (_CLAIMS_PER_ARTICLE, n_articles)),
        ),
    ).T
    return _ClaimNumbers(sample_size=sample_size, odds_ratio=np.char.mod("%.2f", effect).astype(object))


def _context_words(context: np.ndarray) -> dict[str, np.ndarray]:
    """The words of each context field, for rows of article contexts."""
    return {name: _pick(values, context[:, i]) for i, (name, values) in enumerate(CONTEXT_FIELDS)}


def _claim_text(
    articles: _Articles, numbers: _ClaimNumbers, group: np.ndarray, article: np.ndarray, claim: np.ndarray
) -> pd.Series:
    """One claim sentence per pair: design, population, place and period, then the topic's finding."""
    exposures = np.array([TOPICS[d][t][0] for d in DOMAINS for t in range(_N_TOPICS)], dtype=object)
    outcomes = np.array([TOPICS[d][t][1] for d in DOMAINS for t in range(_N_TOPICS)], dtype=object)
    outcome_prefix = np.array(["", "12-month ", "5-year "], dtype=object)
    pieces = _context_words(articles.context[article])
    return (
        "In "
        + pd.Series(pieces["study_design"])
        + " of "
        + pieces["population"]
        + " "
        + pieces["geography"]
        + " "
        + pieces["time_period"]
        + ", "
        + exposures[group]
        + " "
        + _pick(DIRECTIONS, articles.direction[article])
        + " "
        + outcome_prefix[claim]
        + outcomes[group]
        + " (n = "
        + numbers.sample_size[article].astype(str)
        + ", odds ratio "
        + numbers.odds_ratio[article, claim]
        + ")."
    )


def _abstract_text(articles: _Articles, article: np.ndarray, claim: pd.Series) -> pd.Series:
    """The abstract names the context fields the claim sentence leaves out, then repeats the claim."""
    pieces = _context_words(articles.context[article])
    return (
        "Fictitious abstract. Samples: "
        + pd.Series(pieces["sample_source"])
        + " analysed with "
        + pieces["assay_protocol"]
        + " ("
        + pieces["molecular_context"]
        + "; "
        + pieces["biological_strain"]
        + "). "
        + claim
    )


def _silver_labels(
    rng: np.random.Generator, config: SyntheticPoolConfig, articles: _Articles, pairs: _Pairs
) -> _Labels:
    """Conflict type, axes, dominant confounder and reconciliation from the two contexts and directions."""
    n = len(pairs.group)
    context_a, context_b = articles.context[pairs.article_a], articles.context[pairs.article_b]
    differ = context_a != context_b  # (n, fields)
    field_names = np.array([name for name, _ in CONTEXT_FIELDS], dtype=object)
    axes = [list(field_names[row]) for row in differ]  # list-of-lists is the output format itself
    opposite = articles.direction[pairs.article_a] != articles.direction[pairs.article_b]
    has_axis = differ.any(axis=1)
    conflict = np.where(
        opposite, np.where(has_axis, "contextual_contradiction", "direct_contradiction"), "no_conflict"
    )
    other = rng.random(n) < config.other_class_share
    conflict = np.where(other, _pick(OTHER_CLASSES, rng.integers(0, len(OTHER_CLASSES), n)), conflict).astype(
        object
    )

    # Dominant confounder: a random differing axis (argmax of random scores over the differing ones).
    scores = np.where(differ, rng.random(differ.shape), -1.0)
    confounder = np.where(has_axis, field_names[np.argmax(scores, axis=1)], NO_CONFOUNDER).astype(object)
    confounder = np.where(conflict == "no_conflict", NO_CONFOUNDER, confounder)
    axes = [a if c != "no_conflict" else [] for a, c in zip(axes, conflict)]
    reconciliation = _reconciliation(confounder, np.argmax(scores, axis=1), context_a, context_b)
    return _Labels(conflict=conflict, axes=axes, confounder=confounder, reconciliation=reconciliation)


def _reconciliation(
    confounder: np.ndarray, confounder_field: np.ndarray, context_a: np.ndarray, context_b: np.ndarray
) -> np.ndarray:
    """A sentence naming the confounder and the two articles' values of it."""
    # Look the confounder's two values up in one (field, value) table instead of looping over pairs.
    width = max(len(values) for _, values in CONTEXT_FIELDS)
    value_table = np.array(
        [list(values) + [""] * (width - len(values)) for _, values in CONTEXT_FIELDS], dtype=object
    )
    rows = np.arange(len(confounder_field))
    value_a = value_table[confounder_field, context_a[rows, confounder_field]]
    value_b = value_table[confounder_field, context_b[rows, confounder_field]]
    return np.where(
        confounder == NO_CONFOUNDER,
        "Both findings can hold together; no reconciling factor is needed.",
        "The findings differ in "
        + pd.Series(confounder).str.replace("_", " ")
        + ": claim A concerns "
        + value_a
        + " whereas claim B concerns "
        + value_b
        + ".",
    )


def _with_duplicates(frame: pd.DataFrame, config: SyntheticPoolConfig) -> pd.DataFrame:
    """Repeat a ``duplicate_share`` of pair ids with the other label source, then shuffle the rows."""
    duplicates = frame.sample(frac=config.duplicate_share, random_state=config.seed).copy()
    duplicates["label_source"] = np.where(duplicates["label_source"] == "llm", "heuristic", "llm")
    duplicates["confidence"] = np.maximum(duplicates["confidence"], 0.5)
    frame = pd.concat([frame, duplicates], ignore_index=True)
    return frame.sample(frac=1.0, random_state=config.seed + 1).reset_index(drop=True)


def generate_pair_pool(config: SyntheticPoolConfig | None = None, **overrides) -> pd.DataFrame:
    """A fictitious pool as a DataFrame with the columns of :data:`PAIR_COLUMNS` (deterministic in the
    seed)."""
    config = config or SyntheticPoolConfig()
    for key, value in overrides.items():
        setattr(config, key, value)
    rng = np.random.default_rng(config.seed)
    n = int(config.n_pairs)
    # The draws below happen in this order on one generator; reordering them changes every pool.
    articles = _draw_articles(rng, config, n_groups=len(DOMAINS) * _N_TOPICS)
    pairs = _draw_pairs(rng, config, articles)
    numbers = _draw_claim_numbers(rng, articles.direction)
    claim_a = _claim_text(articles, numbers, pairs.group, pairs.article_a, pairs.claim_a)
    claim_b = _claim_text(articles, numbers, pairs.group, pairs.article_b, pairs.claim_b)
    labels = _silver_labels(rng, config, articles, pairs)
    heuristic = rng.random(n) < config.heuristic_share
    confidence = np.where(heuristic, rng.uniform(0.3, 0.9, n), rng.uniform(0.5, 1.0, n)).round(3)
    article_ids = (31_000_000 + rng.permutation(len(articles.direction)) * 7 + 3).astype(str)
    frame = pd.DataFrame(
        {
            "pair_id": np.char.add("bd-", np.char.zfill(np.arange(n).astype(str), 7)),
            "domain": _pick(DOMAINS, pairs.group // _N_TOPICS),
            "claim_a": claim_a,
            "claim_b": claim_b,
            "article_a": article_ids[pairs.article_a],
            "article_b": article_ids[pairs.article_b],
            "abstract_a": _abstract_text(articles, pairs.article_a, claim_a),
            "abstract_b": _abstract_text(articles, pairs.article_b, claim_b),
            "conflict_type": labels.conflict,
            "axes": labels.axes,
            "dominant_confounder": labels.confounder,
            "reconciliation": labels.reconciliation,
            "evidence_a": claim_a,
            "evidence_b": claim_b,
            "label_source": np.where(heuristic, "heuristic", "llm").astype(object),
            "confidence": confidence,
        }
    )
    return _with_duplicates(frame, config)[list(PAIR_COLUMNS)]
