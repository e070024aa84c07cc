"""Mining candidate pairs per domain (medunlearn.biodivergence.mining.pairs, .embed)."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from medunlearn.biodivergence.mining import pairs as pairs_module
from medunlearn.biodivergence.mining.pairs import (
    COUNT_COLUMNS,
    PAIR_COLUMNS,
    MiningConfig,
    mine_pairs,
    mine_pairs_with_counts,
    mining_counts,
)
from medunlearn.errors import InputError

SENTENCES = (
    "Drug {x} increased survival in {pop}.",
    "Drug {x} did not improve survival in {pop}.",
    "Drug {x} reduced mortality in {pop} in a randomized trial.",
    "Drug {x} was associated with higher risk of sepsis in {pop}.",
    "Drug {x} was not associated with sepsis in {pop}.",
)
POPULATIONS = ("children", "adults", "elderly patients", "women", "mice")


def claims_frame(
    n_articles: int, claims_per_article: int, domains=("oncology", "genomics"), seed: int = 0, dim: int = 16
) -> tuple[pd.DataFrame, np.ndarray]:
    """A claims frame (the ``claims.extract_claims`` columns) and embeddings in which the claims of one
    article lie close together, so an article's own claims are its nearest neighbours."""
    rng = np.random.default_rng(seed)
    rows, vectors = [], []
    topics = rng.normal(size=(3, dim))
    for article in range(n_articles):
        centre = topics[article % 3] + 0.5 * rng.normal(size=dim)
        domain = domains[article % len(domains)]
        for index in range(claims_per_article):
            rows.append(
                {
                    "claim_id": f"{article}:{index}",
                    "pmid": str(1000 + article),
                    "sentence_index": index,
                    "section": "conclusions" if index == claims_per_article - 1 else "results",
                    "text": SENTENCES[int(rng.integers(len(SENTENCES)))].format(
                        x=article % 4, pop=POPULATIONS[int(rng.integers(len(POPULATIONS)))]
                    ),
                    "cues": ["finding_verb"],
                    "domain": domain,
                    "year": 2000 + article % 20,
                }
            )
            vectors.append(centre + 0.1 * rng.normal(size=dim))
    return pd.DataFrame(rows), np.asarray(vectors)


WIDE = MiningConfig(k=8, min_similarity=-1.0, max_similarity=1.0, cap_per_domain=None)


def test_doctests():
    assert doctest.testmod(pairs_module).failed == 0


def test_columns_and_canonical_order():
    claims, vectors = claims_frame(12, 4)
    mined, counts = mine_pairs_with_counts(claims, WIDE, embeddings=vectors)
    assert tuple(mined.columns) == PAIR_COLUMNS
    assert tuple(counts.columns) == COUNT_COLUMNS
    assert len(mined) > 0
    assert (mined["claim_a"] < mined["claim_b"]).all()
    assert (mined["pair_id"] == mined["claim_a"] + "|" + mined["claim_b"]).all()
    assert mined["pair_id"].is_unique
    by_id = claims.set_index("claim_id")
    assert (mined["text_a"].to_numpy() == by_id.loc[mined["claim_a"], "text"].to_numpy()).all()
    assert (mined["article_b"].to_numpy() == by_id.loc[mined["claim_b"], "pmid"].to_numpy()).all()
    assert (mined["section_a"].to_numpy() == by_id.loc[mined["claim_a"], "section"].to_numpy()).all()
    # pairs stay inside a domain
    assert (by_id.loc[mined["claim_a"], "domain"].to_numpy() == mined["domain"].to_numpy()).all()
    assert (by_id.loc[mined["claim_b"], "domain"].to_numpy() == mined["domain"].to_numpy()).all()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n_articles=st.integers(1, 15),
    per_article=st.integers(1, 12),
    k=st.integers(1, 15),
)
def test_never_pairs_claims_of_the_same_article(seed, n_articles, per_article, k):
    claims, vectors = claims_frame(n_articles, per_article, seed=seed)
    config = MiningConfig(k=k, min_similarity=-1.0, max_similarity=1.0, cap_per_domain=None)
    mined, counts = mine_pairs_with_counts(claims, config, embeddings=vectors)
    assert (mined["article_a"] != mined["article_b"]).all()
    # the funnel adds up
    assert (
        counts["candidates"]
        == counts["same_article_dropped"] + counts["outside_window"] + counts["in_window"]
    ).all()
    assert (counts["in_window"] == counts["capped"] + counts["kept"]).all()
    assert counts["kept"].sum() == len(mined)
    if per_article > 1:
        assert counts["same_article_dropped"].sum() > 0  # the neighbours were mostly same-article


def test_never_pairs_same_article_through_the_ann_index():
    claims, vectors = claims_frame(60, 10, seed=5)
    config = MiningConfig(k=10, min_similarity=-1.0, max_similarity=1.0, cap_per_domain=None, exact_below=50)
    mined, counts = mine_pairs_with_counts(claims, config, embeddings=vectors)
    assert len(mined) > 0 and (mined["article_a"] != mined["article_b"]).all()
    assert counts["same_article_dropped"].sum() > 0


def test_cap_and_ranking():
    claims, vectors = claims_frame(30, 5, seed=2)
    capped, counts = mine_pairs_with_counts(
        claims, MiningConfig(k=8, min_similarity=-1.0, max_similarity=1.0, cap_per_domain=7), vectors
    )
    full = mine_pairs(claims, WIDE, embeddings=vectors)
    for domain, group in capped.groupby("domain"):
        assert len(group) == 7
        assert group["rank"].tolist() == list(range(1, 8))
        # the cap keeps the best-ranked pairs of the uncapped run
        assert group["pair_id"].tolist() == full[full["domain"] == domain]["pair_id"].head(7).tolist()
    assert (counts["capped"] > 0).all() and (counts["kept"] == 7).all()
    for _, group in full.groupby("domain"):
        key = list(zip(-group["divergence_score"], -group["similarity"], group["claim_a"], group["claim_b"]))
        assert key == sorted(key)


def test_similarity_window():
    claims, vectors = claims_frame(20, 3, seed=4)
    config = MiningConfig(k=10, min_similarity=0.6, max_similarity=0.9, cap_per_domain=None)
    mined, counts = mine_pairs_with_counts(claims, config, embeddings=vectors)
    assert mined["similarity"].between(0.6, 0.9).all()
    assert counts["outside_window"].sum() > 0
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    position = {claim_id: i for i, claim_id in enumerate(claims["claim_id"])}
    expected = [
        float(unit[position[a]] @ unit[position[b]]) for a, b in zip(mined["claim_a"], mined["claim_b"])
    ]
    np.testing.assert_allclose(mined["similarity"], expected, atol=1e-5)


def test_deterministic_and_independent_of_row_order():
    claims, vectors = claims_frame(25, 4, seed=9)
    config = MiningConfig(k=6, min_similarity=-1.0, max_similarity=1.0, cap_per_domain=20)
    first = mine_pairs(claims, config, embeddings=vectors)
    pd.testing.assert_frame_equal(first, mine_pairs(claims, config, embeddings=vectors))
    order = np.random.default_rng(0).permutation(len(claims))
    shuffled = mine_pairs(claims.iloc[order], config, embeddings=vectors[order])
    pd.testing.assert_frame_equal(first, shuffled)
    ann = MiningConfig(
        k=6, min_similarity=-1.0, max_similarity=1.0, cap_per_domain=20, exact_below=10, seed=3
    )
    pd.testing.assert_frame_equal(mine_pairs(claims, ann, vectors), mine_pairs(claims, ann, vectors))


@pytest.mark.parametrize("exact_below", [20_000, 2])
def test_tied_neighbours_do_not_make_the_pairs_depend_on_row_order(exact_below):
    """Claim a has three neighbours at the same cosine and k=1 keeps one: random vectors never tie, so
    the test above cannot see a tie broken by row number."""
    claims = pd.DataFrame(
        {
            "claim_id": ["a", "b", "c", "d"],
            "pmid": ["1", "2", "3", "4"],
            "domain": "oncology",
            "text": [
                "Drug X improved survival.",
                "Drug X did not improve survival.",
                "Drug X did not improve survival in men.",
                "Drug X did not improve survival in women.",
            ],
        }
    )
    vectors = np.array([[1.0, 0.0], [0.8, 0.6], [0.8, -0.6], [0.8, 0.6]])
    config = MiningConfig(k=1, min_similarity=0.0, exact_below=exact_below)
    first = mine_pairs(claims, config, embeddings=vectors)
    for order in ([3, 2, 1, 0], [2, 0, 3, 1]):
        shuffled = mine_pairs(claims.iloc[order], config, embeddings=vectors[order])
        pd.testing.assert_frame_equal(first, shuffled)


def test_mining_counts_and_small_domains():
    claims, vectors = claims_frame(3, 2, domains=("oncology", "oncology", "cardiovascular"))
    mined, counts = mine_pairs_with_counts(claims, WIDE, embeddings=vectors)
    assert counts["domain"].tolist() == ["cardiovascular", "oncology"]  # a user's own domain is kept
    cardio = counts.set_index("domain").loc["cardiovascular"]
    assert cardio["claims"] == 2 and cardio["kept"] == 0  # one article: nothing to pair
    assert mining_counts(counts)["kept"] == len(mined)
    assert set(mined["domain"]) == {"oncology"}


def test_bad_input():
    claims, vectors = claims_frame(4, 2)
    with pytest.raises(InputError, match=r"missing column\(s\) \['pmid'\]"):
        mine_pairs(claims.drop(columns="pmid"), embeddings=vectors)
    duplicated = claims.copy()
    duplicated.loc[3, "claim_id"] = duplicated.loc[0, "claim_id"]
    with pytest.raises(InputError, match="row 3, field `claim_id`: duplicate"):
        mine_pairs(duplicated, embeddings=vectors)
    no_domain = claims.copy()
    no_domain.loc[2, "domain"] = None
    with pytest.raises(InputError, match="row 2, field `domain`: empty"):
        mine_pairs(no_domain, embeddings=vectors)
    with pytest.raises(InputError, match="does not match the 8 claims"):
        mine_pairs(claims, embeddings=vectors[:5])
    with pytest.raises(InputError, match="min_similarity"):
        mine_pairs(claims, MiningConfig(min_similarity=0.9, max_similarity=0.5), embeddings=vectors)


REAL_SENTENCES = [
    "Metformin reduced the incidence of type 2 diabetes in adults with prediabetes.",
    "In adults with prediabetes, metformin lowered the rate of new type 2 diabetes.",
    "Ciprofloxacin resistance in Escherichia coli increased over the last decade.",
    "The prevalence of ciprofloxacin-resistant E. coli rose during the past ten years.",
    "Tamoxifen did not improve survival in postmenopausal women with breast cancer.",
    "Tamoxifen improved survival in premenopausal women with breast cancer.",
    "Vitamin D supplementation had no effect on fracture risk in elderly people.",
    "High-dose vitamin D reduced fractures in nursing home residents.",
    "BRCA1 mutations were associated with ovarian cancer in Ashkenazi Jewish women.",
    "Malaria transmission was highest during the rainy season in rural Kenya.",
    "Statins lowered LDL cholesterol in a randomized placebo-controlled trial.",
    "Smoking cessation reduced the risk of myocardial infarction.",
    "The new vaccine was immunogenic in children aged 2 to 5 years.",
    "Hand hygiene campaigns decreased hospital-acquired infections.",
    "Aspirin did not reduce cardiovascular events in healthy older adults.",
    "Aspirin reduced cardiovascular events in patients with prior stroke.",
    "Carbapenem-resistant Klebsiella pneumoniae spread across intensive care units.",
    "Exercise training improved quality of life in heart failure patients.",
    "Gene expression profiling identified three subtypes of colorectal cancer.",
    "The football match was cancelled because of heavy snow.",
]


@pytest.mark.integration
def test_real_minilm_embeddings_rank_paraphrases_above_unrelated():
    pytest.importorskip("sentence_transformers")
    from medunlearn.biodivergence.mining.embed import embed_texts

    try:
        vectors = embed_texts(REAL_SENTENCES)
    except ImportError as error:
        pytest.skip(f"offline MiniLM package absent: {error}")
    assert vectors.shape == (20, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 19] + 0.3  # paraphrase vs unrelated
    assert similarity[2, 3] > similarity[2, 19] + 0.3
    assert similarity[14, 15] > similarity[14, 12]  # same drug and endpoint vs other topic

    claims = pd.DataFrame(
        {
            "claim_id": [f"c{i:02d}" for i in range(20)],
            "pmid": [str(i // 2) if i < 4 else str(i) for i in range(20)],  # 0/1 and 2/3 share an article
            "text": REAL_SENTENCES,
            "domain": "clinical_trials_epidemiology",
        }
    )
    mined, counts = mine_pairs_with_counts(claims, MiningConfig(k=5, min_similarity=0.3))
    assert len(mined) > 0 and (mined["article_a"] != mined["article_b"]).all()
    assert "c00|c01" not in set(mined["pair_id"])  # the paraphrases share an article: never paired
    assert "c14|c15" in set(mined["pair_id"])  # the aspirin pair: similar, reversed by negation
    assert counts["same_article_dropped"].sum() >= 2
    assert mined.iloc[0]["divergence_score"] == mined["divergence_score"].max()
