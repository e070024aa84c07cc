"""Stage 4: domains from the input or the keyword classifier; the label set is open."""

import doctest

import pandas as pd
import pytest

from medunlearn.biodivergence.mining import domains as domains_module
from medunlearn.biodivergence.mining.domains import (
    DEFAULT_KEYWORDS,
    PAPER_DOMAINS,
    DomainInputError,
    assign_domains,
    domain_counts,
    keyword_hits,
)
from medunlearn.biodivergence.schema import DOMAINS

PLANTED = [
    (
        "Carbapenemase-producing Klebsiella and MRSA: antibiotic stewardship cut resistant strains.",
        "antimicrobial_resistance",
    ),
    ("Adjuvant chemotherapy improved survival in metastatic colorectal cancer and lymphoma.", "oncology"),
    ("Influenza and HIV infection raised the risk of bacterial pneumonia in adults.", "infectious_disease"),
    ("A GWAS found an allele at a locus on chromosome 9 and two exon mutations in the gene.", "genomics"),
    (
        "In this randomized placebo-controlled trial, mortality and incidence fell in the cohort.",
        "clinical_trials_epidemiology",
    ),
    ("The weather was mild and the committee met on Tuesday.", "other"),
]


def test_paper_domains_reuse_the_schema_ids():
    assert PAPER_DOMAINS == DOMAINS and len(PAPER_DOMAINS) == 5
    assert list(DEFAULT_KEYWORDS) == list(PAPER_DOMAINS)


def test_planted_texts_get_their_domain():
    frame = pd.DataFrame({"title": [""] * len(PLANTED), "abstract": [text for text, _ in PLANTED]})
    result = assign_domains(frame)
    assert result["domain"].tolist() == [domain for _, domain in PLANTED]
    assert result["domain_source"].tolist() == ["keyword"] * 5 + ["fallback"]
    assert "domain" not in frame.columns  # the input frame is not changed


def test_most_hits_wins_and_ties_follow_the_mapping_order():
    frame = pd.DataFrame({"text": ["cancer tumour gene", "cancer gene", "gene cancer"]})
    keywords = {"genomics": ["gene"], "oncology": ["cancer", "tumour"]}
    assert assign_domains(frame, keywords)["domain"].tolist() == ["oncology", "genomics", "genomics"]
    reversed_order = {"oncology": ["cancer", "tumour"], "genomics": ["gene"]}
    assert assign_domains(frame, reversed_order)["domain"].tolist() == ["oncology"] * 3


def test_whole_words_plurals_and_case():
    hits = keyword_hits(
        pd.DataFrame({"text": ["Genes and GENE, general generation", "viruses; Virus"]}),
        {"genomics": ["gene"], "infectious_disease": ["virus"]},
    )
    assert hits.to_dict("list") == {"genomics": [2, 0], "infectious_disease": [0, 2]}


def test_open_label_set_keeps_user_domains_and_user_keywords():
    frame = pd.DataFrame(
        {
            "title": ["", "", "", ""],
            "abstract": [
                "Beta blockers lowered blood pressure after myocardial infarction.",
                "Tumour growth slowed with the inhibitor.",
                "Atrial fibrillation and heart failure admissions rose.",
                "Nothing here matches.",
            ],
            "domain": ["cardiovascular", None, "", " neurology "],
        }
    )
    result = assign_domains(frame)
    assert result["domain"].tolist() == ["cardiovascular", "oncology", "other", "neurology"]
    assert result["domain_source"].tolist() == ["input", "keyword", "fallback", "input"]
    cardio = {
        **DEFAULT_KEYWORDS,
        "cardiovascular": ["heart failure", "atrial fibrillation", "myocardial infarction"],
    }
    result = assign_domains(frame.assign(domain=None), cardio, fallback="unassigned")
    assert result["domain"].tolist() == ["cardiovascular", "oncology", "cardiovascular", "unassigned"]
    assert domain_counts(result) == {"oncology": 1, "cardiovascular": 2, "unassigned": 1}


def test_existing_domain_source_is_kept():
    frame = pd.DataFrame(
        {"text": ["tumour", "x"], "domain": ["oncology", None], "domain_source": ["keyword", None]}
    )
    result = assign_domains(frame)
    assert result["domain_source"].tolist() == ["keyword", "fallback"]


def test_domain_counts_order():
    frame = pd.DataFrame({"domain": ["zoology", "genomics", "cardiovascular", "cardiovascular", "oncology"]})
    assert list(domain_counts(frame).items()) == [
        ("oncology", 1),
        ("genomics", 1),
        ("cardiovascular", 2),
        ("zoology", 1),
    ]


def test_bad_input_is_named():
    with pytest.raises(DomainInputError, match="needs `text`, or `title` and/or `abstract`"):
        assign_domains(pd.DataFrame({"pmid": ["1"]}))
    with pytest.raises(DomainInputError, match=r"keywords\['x'\] must be a non-empty list of strings"):
        assign_domains(pd.DataFrame({"text": ["a"]}), {"x": "tumour"})
    with pytest.raises(DomainInputError, match="fallback must be a non-empty"):
        assign_domains(pd.DataFrame({"text": ["a"]}), fallback="")
    with pytest.raises(DomainInputError, match="needs a `domain` column"):
        domain_counts(pd.DataFrame({"text": ["a"]}))


def test_doctests():
    assert doctest.testmod(domains_module).failed == 0


@pytest.mark.integration
def test_real_abstracts_spread_over_domains(shared_data):
    from medunlearn.biodivergence.mining.read import read_abstracts

    ncbi = read_abstracts(sorted((shared_data / "ncbi-disease").glob("NCBI*_corpus.txt")))
    counts = domain_counts(assign_domains(ncbi))
    # NCBI Disease is a corpus of genetic-disease abstracts: genomics must lead
    assert max(counts, key=counts.get) == "genomics" and sum(counts.values()) == 793
