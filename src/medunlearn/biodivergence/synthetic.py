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


def generate_pair_pool(config: SyntheticPoolConfig | None = None, **overrides) -> pd.DataFrame:
    """A fictitious pool as a DataFrame with the columns of :data:`PAIR_COLUMNS` (deterministic in the
    seed)."""
    config = config or SyntheticPoolConfig()
    for key, value in overrides.items():
        setattr(config, key, value)
    rng = np.random.default_rng(config.seed)
    n = int(config.n_pairs)
    n_topics = len(next(iter(TOPICS.values())))
    n_groups = len(DOMAINS) * n_topics

    # Articles come in (domain, topic) groups laid out contiguously, so a partner in the same group is one
    # draw.
    n_articles = max(n_groups * 2, int(round(n * config.articles_per_pair)))
    group_of_article = np.sort(rng.integers(0, n_groups, n_articles))
    group_start = np.searchsorted(group_of_article, np.arange(n_groups))
    group_size = np.bincount(group_of_article, minlength=n_groups)
    article_direction = rng.integers(0, len(DIRECTIONS), n_articles)
    n_fields = len(CONTEXT_FIELDS)
    base_context = np.stack([rng.integers(0, len(values), n_groups) for _, values in CONTEXT_FIELDS], axis=1)
    # An article keeps its group's context except on fields that change, so pairs differ on a few axes.
    changes = rng.random((n_articles, n_fields)) < config.field_change_rate
    random_values = np.stack(
        [rng.integers(0, len(values), n_articles) for _, values in CONTEXT_FIELDS], axis=1
    )
    article_context = np.where(changes, random_values, base_context[group_of_article])

    pair_group = rng.integers(0, n_groups, n)
    pair_group = np.where(group_size[pair_group] > 1, pair_group, int(np.argmax(group_size)))
    size = group_size[pair_group]
    a_offset = rng.integers(0, size)
    b_offset = (a_offset + 1 + rng.integers(0, size - 1)) % size  # never the same article
    is_hub = rng.random(n) < config.hub_share
    hub_offset = rng.integers(0, np.minimum(config.hubs_per_domain, size))
    b_offset = np.where(is_hub & (hub_offset != a_offset), hub_offset, b_offset)
    article_a = group_start[pair_group] + a_offset
    article_b = group_start[pair_group] + b_offset
    claims_per_article = 3
    claim_a_index = rng.integers(0, claims_per_article, n)
    claim_b_index = rng.integers(0, claims_per_article, n)

    domain_index = pair_group // n_topics
    exposures = np.array([TOPICS[d][t][0] for d in DOMAINS for t in range(n_topics)], dtype=object)
    outcomes = np.array([TOPICS[d][t][1] for d in DOMAINS for t in range(n_topics)], dtype=object)
    outcome_prefix = np.array(["", "12-month ", "5-year "], dtype=object)

    # Article-specific numbers make every (article, claim) sentence distinct, as real claims are.
    sample_size = rng.integers(40, 5000, n_articles)
    effect = np.where(
        article_direction == 0,
        rng.uniform(0.3, 0.95, (3, n_articles)),
        np.where(
            article_direction == 1,
            rng.uniform(1.05, 3.0, (3, n_articles)),
            rng.uniform(0.9, 1.1, (3, n_articles)),
        ),
    ).T
    odds_ratio = np.char.mod("%.2f", effect).astype(object)

    def claim_text(article: np.ndarray, claim_index: np.ndarray) -> pd.Series:
        context = article_context[article]
        pieces = {name: _pick(values, context[:, i]) for i, (name, values) in enumerate(CONTEXT_FIELDS)}
        text = (
            "In "
            + pd.Series(pieces["study_design"])
            + " of "
            + pieces["population"]
            + " "
            + pieces["geography"]
            + " "
            + pieces["time_period"]
            + ", "
            + exposures[pair_group]
            + " "
            + _pick(DIRECTIONS, article_direction[article])
            + " "
            + outcome_prefix[claim_index]
            + outcomes[pair_group]
            + " (n = "
            + sample_size[article].astype(str)
            + ", odds ratio "
            + odds_ratio[article, claim_index]
            + ")."
        )
        return text

    def abstract_text(article: np.ndarray, claim: pd.Series) -> pd.Series:
        context = article_context[article]
        pieces = {name: _pick(values, context[:, i]) for i, (name, values) in enumerate(CONTEXT_FIELDS)}
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

    claim_a = claim_text(article_a, claim_a_index)
    claim_b = claim_text(article_b, claim_b_index)

    differ = article_context[article_a] != article_context[article_b]  # (n, fields)
    field_names = np.array([name for name, _ in CONTEXT_FIELDS], dtype=object)
    axes = [list(field_names[row]) for row in differ]  # list-of-lists is the output format itself
    opposite = article_direction[article_a] != article_direction[article_b]
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
    # Look the confounder's two values up in one (field, value) table instead of looping over pairs.
    width = max(len(values) for _, values in CONTEXT_FIELDS)
    value_table = np.array(
        [list(values) + [""] * (width - len(values)) for _, values in CONTEXT_FIELDS], dtype=object
    )
    conf_col = np.argmax(scores, axis=1)
    value_a = value_table[conf_col, article_context[article_a, conf_col]]
    value_b = value_table[conf_col, article_context[article_b, conf_col]]
    reconciliation = np.where(
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

    heuristic = rng.random(n) < config.heuristic_share
    confidence = np.where(heuristic, rng.uniform(0.3, 0.9, n), rng.uniform(0.5, 1.0, n)).round(3)
    article_ids = (31_000_000 + rng.permutation(n_articles) * 7 + 3).astype(str)
    frame = pd.DataFrame(
        {
            "pair_id": np.char.add("bd-", np.char.zfill(np.arange(n).astype(str), 7)),
            "domain": _pick(DOMAINS, domain_index),
            "claim_a": claim_a,
            "claim_b": claim_b,
            "article_a": article_ids[article_a],
            "article_b": article_ids[article_b],
            "abstract_a": abstract_text(article_a, claim_a),
            "abstract_b": abstract_text(article_b, claim_b),
            "conflict_type": conflict,
            "axes": axes,
            "dominant_confounder": confounder,
            "reconciliation": reconciliation,
            "evidence_a": claim_a,
            "evidence_b": claim_b,
            "label_source": np.where(heuristic, "heuristic", "llm").astype(object),
            "confidence": confidence,
        }
    )
    duplicates = frame.sample(frac=config.duplicate_share, random_state=config.seed).copy()
    duplicates["label_source"] = np.where(duplicates["label_source"] == "llm", "heuristic", "llm")
    duplicates["confidence"] = np.maximum(duplicates["confidence"], 0.5)
    frame = pd.concat([frame, duplicates], ignore_index=True)
    frame = frame.sample(frac=1.0, random_state=config.seed + 1).reset_index(drop=True)
    return frame[list(PAIR_COLUMNS)]
