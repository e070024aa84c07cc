"""Stage 4 of BioDivergence construction: a domain for every abstract or claim
(docs: biodivergence-construction.md).

The paper [paper] mines five domains: antimicrobial resistance, oncology, infectious disease, genomics and
clinical trials / epidemiology (:data:`PAPER_DOMAINS`, the ids the pool schema documents). The label set is
*open* [ours]: a domain given by the input (a CSV ``domain`` column, say ``cardiovascular``) is kept and
reported as it is; only rows without one are classified.

The classifier is transparent on purpose [ours]: for each domain, count the whole-word, case-insensitive
hits of its keywords (a keyword also matches its plural in ``-s`` / ``-es``) in the title and abstract (or
the claim ``text``); the domain with most hits wins, ties going to the domain listed first in the mapping;
a row with no hit gets ``fallback``. ``domain_source`` says which happened: ``"input"``, ``"keyword"`` or
``"fallback"``. Pass your own ``keywords`` (they replace :data:`DEFAULT_KEYWORDS`; merge with
``{**DEFAULT_KEYWORDS, "cardiovascular": [...]}`` to extend them) to classify into your own domains.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from medunlearn.biodivergence.schema import DOMAINS
from medunlearn.errors import InputError

PAPER_DOMAINS: tuple[str, ...] = DOMAINS
DOMAIN_SOURCES: tuple[str, ...] = ("input", "keyword", "fallback")

# [ours] Keywords per paper domain; a sentence-level "resistance" alone is left out on purpose (insulin
# resistance, resistance training), only its antimicrobial phrases count.
DEFAULT_KEYWORDS: dict[str, list[str]] = {
    "antimicrobial_resistance": [
        "antimicrobial resistance",
        "antibiotic resistance",
        "antimicrobial",
        "antibiotic",
        "drug resistance",
        "drug-resistant",
        "multidrug-resistant",
        "multidrug resistance",
        "resistant strain",
        "resistance gene",
        "MRSA",
        "methicillin",
        "vancomycin",
        "carbapenem",
        "carbapenemase",
        "beta-lactamase",
        "β-lactamase",
        "ESBL",
        "colistin",
        "fluoroquinolone",
        "minimum inhibitory concentration",
        "susceptibility testing",
        "stewardship",
    ],
    "oncology": [
        "cancer",
        "tumor",
        "tumour",
        "carcinoma",
        "adenocarcinoma",
        "neoplasm",
        "malignancy",
        "malignant",
        "oncology",
        "chemotherapy",
        "radiotherapy",
        "metastasis",
        "metastases",
        "metastatic",
        "lymphoma",
        "leukemia",
        "leukaemia",
        "melanoma",
        "sarcoma",
        "glioma",
        "myeloma",
    ],
    "infectious_disease": [
        "infection",
        "infectious",
        "virus",
        "viral",
        "HIV",
        "hepatitis",
        "tuberculosis",
        "malaria",
        "influenza",
        "COVID-19",
        "SARS-CoV-2",
        "sepsis",
        "pneumonia",
        "bacterial",
        "bacteremia",
        "pathogen",
        "vaccine",
        "vaccination",
        "fungal",
        "parasitic",
        "dengue",
    ],
    "genomics": [
        "gene",
        "genetic",
        "genome",
        "genomic",
        "genotype",
        "mutation",
        "allele",
        "polymorphism",
        "SNP",
        "locus",
        "loci",
        "chromosome",
        "linkage",
        "exon",
        "intron",
        "sequencing",
        "GWAS",
        "heterozygous",
        "homozygous",
        "heterozygote",
        "transcript",
    ],
    "clinical_trials_epidemiology": [
        "randomized",
        "randomised",
        "clinical trial",
        "trial",
        "placebo",
        "cohort",
        "case-control",
        "cross-sectional",
        "prevalence",
        "incidence",
        "epidemiology",
        "epidemiological",
        "population-based",
        "mortality",
        "risk factor",
        "meta-analysis",
        "odds ratio",
        "hazard ratio",
        "survey",
        "registry",
    ],
}


class DomainInputError(InputError):
    """A frame without text to classify, or a keyword mapping that is not ``{domain: [keyword, ...]}``."""


def keyword_pattern(keywords: Sequence[str]) -> str:
    """One regex for a domain: any keyword as a whole word, case-insensitive, optional plural ``s``/``es``.

    >>> bool(re.search(keyword_pattern(["tumour", "gene"]), "Tumours grew.", re.IGNORECASE))
    True
    >>> bool(re.search(keyword_pattern(["gene"]), "in general", re.IGNORECASE))
    False
    """
    terms = sorted({term.strip() for term in keywords if term.strip()}, key=len, reverse=True)
    return r"(?<!\w)(?:" + "|".join(map(re.escape, terms)) + r")(?:e?s)?(?!\w)"


def _classified_text(frame: pd.DataFrame) -> pd.Series:
    if "text" in frame.columns:
        return frame["text"].fillna("").astype(str)
    parts = [frame[name].fillna("").astype(str) for name in ("title", "abstract") if name in frame.columns]
    if not parts:
        raise DomainInputError(
            f"a frame to classify needs `text`, or `title` and/or `abstract`; got {list(frame.columns)}"
        )
    return parts[0] if len(parts) == 1 else parts[0] + " " + parts[1]


def keyword_hits(frame: pd.DataFrame, keywords: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """Keyword hit counts, one column per domain in the mapping's order, one row per row of ``frame``."""
    keywords = DEFAULT_KEYWORDS if keywords is None else keywords
    if not isinstance(keywords, Mapping) or not keywords:
        raise DomainInputError("keywords must be a non-empty {domain: [keyword, ...]} mapping")
    text = _classified_text(frame)
    hits = {}
    for domain, terms in keywords.items():
        if not isinstance(domain, str) or not domain.strip():
            raise DomainInputError(f"keywords: domain {domain!r} must be a non-empty string")
        if isinstance(terms, str) or not all(isinstance(term, str) for term in terms) or not terms:
            raise DomainInputError(f"keywords[{domain!r}] must be a non-empty list of strings")
        hits[domain] = text.str.count(re.compile(keyword_pattern(terms), re.IGNORECASE))
    return pd.DataFrame(hits, index=frame.index)


def assign_domains(
    frame: pd.DataFrame, keywords: Mapping[str, Sequence[str]] | None = None, fallback: str = "other"
) -> pd.DataFrame:
    """A copy of ``frame`` with ``domain`` filled and ``domain_source`` saying where each came from.

    A non-empty input ``domain`` is kept as it is (an existing ``domain_source`` too, else ``"input"``);
    other rows get the domain with most keyword hits (``"keyword"``) or ``fallback`` (``"fallback"``).

    >>> frame = pd.DataFrame({"title": ["", "", "", ""], "abstract": [
    ...     "Carbapenemase genes spread among resistant strains of Klebsiella.",
    ...     "Statins lowered LDL cholesterol.",
    ...     "Tumour growth slowed.",
    ...     "Heart failure admissions fell."], "domain": [None, None, "", "cardiovascular"]})
    >>> assign_domains(frame)[["domain", "domain_source"]].values.tolist()
    [['antimicrobial_resistance', 'keyword'], ['other', 'fallback'], ['oncology', 'keyword'], \
['cardiovascular', 'input']]
    """
    if not isinstance(fallback, str) or not fallback.strip():
        raise DomainInputError(f"fallback must be a non-empty domain string, got {fallback!r}")
    result = frame.copy()
    given = (
        result["domain"].map(lambda v: v.strip() if isinstance(v, str) else None)
        if "domain" in result.columns
        else pd.Series([None] * len(result), index=result.index, dtype=object)
    )
    given = given.where(given.fillna("").str.len() > 0, None)
    has_input = given.notna().to_numpy()
    hits = keyword_hits(result.loc[~has_input], keywords)
    names = np.array(list(hits.columns), dtype=object)
    counts = hits.to_numpy()
    best = counts.argmax(axis=1) if counts.size else np.zeros(len(hits), dtype=np.int64)
    matched = counts.max(axis=1) > 0 if counts.size else np.zeros(len(hits), dtype=bool)
    domain = given.astype(object).to_numpy(copy=True)
    source = np.full(len(result), "input", dtype=object)
    if "domain_source" in result.columns:
        previous = result["domain_source"].to_numpy(dtype=object)
        keep_previous = has_input & pd.Series(previous).isin(DOMAIN_SOURCES).to_numpy()
        source[keep_previous] = previous[keep_previous]
    domain[~has_input] = np.where(matched, names[best] if names.size else fallback, fallback)
    source[~has_input] = np.where(matched, "keyword", "fallback")
    result["domain"] = pd.Series(domain, index=result.index, dtype=object)
    result["domain_source"] = pd.Series(source, index=result.index, dtype=object)
    return result


def domain_counts(frame: pd.DataFrame) -> dict[str, int]:
    """Rows per domain: the paper's domains that occur first (in their order), then the others, most first.

    >>> domain_counts(pd.DataFrame({"domain": ["cardiovascular", "oncology", "cardiovascular", "genomics"]}))
    {'oncology': 1, 'genomics': 1, 'cardiovascular': 2}
    """
    if "domain" not in frame.columns:
        raise DomainInputError(f"domain_counts needs a `domain` column; got {list(frame.columns)}")
    counts = frame["domain"].fillna("(none)").astype(str).value_counts()
    paper = [name for name in PAPER_DOMAINS if name in counts.index]
    others = sorted(
        (name for name in counts.index if name not in PAPER_DOMAINS), key=lambda n: (-counts[n], n)
    )
    return {name: int(counts[name]) for name in (*paper, *others)}
