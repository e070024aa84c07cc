"""Stage 2: normalisation, exact and near-duplicate abstracts (planted), duplicate claims."""

import doctest

import numpy as np
import pandas as pd
import pytest

from medunlearn.biodivergence.mining import dedup
from medunlearn.biodivergence.mining.dedup import (
    DedupInputError,
    deduplicate_abstracts,
    deduplicate_claims,
    minhash_signatures,
    normalise_text,
    shingle_hashes,
)

TOPICS = [
    "aspirin and migraine pain",
    "statins and LDL cholesterol",
    "colistin resistance in Escherichia coli",
    "BRCA2 mutations in breast cancer families",
    "influenza vaccination in care homes",
    "metformin and gestational diabetes",
]


def _word_change(text: str, rng: np.random.Generator, n_changes: int = 3) -> str:
    """The text with ``n_changes`` words, spread over it, replaced by other words."""
    words = text.split()
    positions = np.linspace(len(words) * 0.1, len(words) * 0.9, n_changes).astype(int)
    for position in positions:
        words[position] = ["notably", "several", "markedly", "patients"][int(rng.integers(4))]
    return " ".join(words)


def _surface_change(text: str, index: int) -> str:
    """The same text with case, whitespace and punctuation changed only."""
    variants = [
        lambda t: t.upper(),
        lambda t: "  " + t.replace(" ", "   ") + "\n",
        lambda t: t.replace(",", " ,").replace(".", " . "),
        lambda t: t.lower().replace(" ", "\t"),
    ]
    return variants[index % len(variants)](text)


def _planted(originals: list[str], seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """30 originals, then 10 exact copies (surface changes) and 10 near copies (3 words), shuffled after."""
    rng = np.random.default_rng(seed)
    rows = [
        {"pmid": f"o{i}", "abstract": text, "kind": "original", "of": f"o{i}"}
        for i, text in enumerate(originals)
    ]
    exact_of = rng.choice(len(originals), 10, replace=False)
    near_of = rng.choice(len(originals), 10, replace=False)
    copies = [
        {"pmid": f"e{k}", "abstract": _surface_change(originals[i], k), "kind": "exact", "of": f"o{i}"}
        for k, i in enumerate(exact_of)
    ] + [
        {"pmid": f"n{k}", "abstract": _word_change(originals[i], rng), "kind": "near", "of": f"o{i}"}
        for k, i in enumerate(near_of)
    ]
    order = rng.permutation(len(copies))
    return pd.DataFrame(rows + [copies[i] for i in order]), {"exact": 10, "near": 10}


@pytest.fixture(scope="module")
def real_abstracts(shared_data) -> list[str]:
    from medunlearn.biodivergence.mining.read import read_abstracts

    frame = read_abstracts([shared_data / "pubmedqa" / "ori_pqal.json"])
    return frame["abstract"].iloc[:30].tolist()


def test_normalise_text():
    assert normalise_text("  Aspirin  REDUCED\tpain (p < 0.05).  ") == "aspirin reduced pain p 0 05"
    assert normalise_text("ﬁbrosis, ２０ mg") == "fibrosis 20 mg"  # NFKC: ligature and full-width digits
    assert normalise_text("Straße") == normalise_text("STRASSE")  # case-fold, not lower()
    assert normalise_text("beta-catenin") != normalise_text("betacatenin")  # punctuation splits words


def test_planted_duplicates_on_real_abstracts(real_abstracts):
    frame, planted = _planted(real_abstracts)
    kept, counts = deduplicate_abstracts(frame)
    assert counts == {"abstracts": 50, "exact_duplicates": 10, "near_duplicates": 10, "kept": 30}
    # recall 1.0 on the planted copies, and none of the 30 distinct abstracts merged
    assert set(kept["pmid"]) == {f"o{i}" for i in range(30)}
    assert kept.index.tolist() == list(range(30))  # the first of each group, input order, original index


def test_word_shingles_find_the_same_planted_duplicates(real_abstracts):
    frame, _ = _planted(real_abstracts, seed=1)
    kept, counts = deduplicate_abstracts(frame, unit="word", threshold=0.6)
    assert counts["exact_duplicates"] == 10 and counts["near_duplicates"] == 10
    assert set(kept["pmid"]) == {f"o{i}" for i in range(30)}


def test_first_of_a_group_wins_even_when_it_is_the_copy():
    base = (
        "In this randomised trial of 400 adults with episodic migraine, aspirin 900 mg reduced pain at two "
        "hours compared with placebo, with more patients pain free and no increase in serious adverse events."
    )
    other = (
        "Among 1,200 older women followed for ten years, statin use was associated with lower LDL "
        "cholesterol and fewer cardiovascular events, while muscle symptoms were rare and did not differ "
        "between groups."
    )
    near = base.replace("episodic", "chronic").replace("two", "three")
    frame = pd.DataFrame({"pmid": ["n", "b", "x", "b2"], "abstract": [near, base, other, base.upper()]})
    kept, counts = deduplicate_abstracts(frame)
    assert kept["pmid"].tolist() == ["n", "x"]
    assert counts == {"abstracts": 4, "exact_duplicates": 1, "near_duplicates": 1, "kept": 2}


def test_repeated_pmid_is_an_exact_duplicate_and_short_texts_are_not_merged():
    frame = pd.DataFrame(
        {
            "pmid": ["1", "1", "2", "3"],
            "abstract": [
                "Aspirin reduced pain.",
                "Aspirin reduced pain in a later version.",
                "Statins work.",
                "Statins fail.",
            ],
        }
    )
    kept, counts = deduplicate_abstracts(frame)
    assert kept["pmid"].tolist() == ["1", "2", "3"]
    assert counts["exact_duplicates"] == 1 and counts["near_duplicates"] == 0


def test_signatures_match_datasketch_affine32_on_the_same_shingle_hashes(monkeypatch):
    from datasketch import MinHash

    texts = [normalise_text(t) for t in (TOPICS * 3)] + ["ab", ""]
    hashes, counts = shingle_hashes(texts, shingle=5)
    assert counts.tolist()[-2:] == [1, 0]  # a text shorter than a shingle is one shingle; empty is none
    monkeypatch.setattr(dedup, "_BATCH_SHINGLES", 7)  # blocks cut through documents
    ours = minhash_signatures(texts, num_perm=64, seed=3)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    for index in range(len(texts)):
        reference = MinHash(num_perm=64, seed=3, hashfunc=int)
        reference.update_batch(hashes[bounds[index] : bounds[index + 1]].tolist())
        np.testing.assert_array_equal(ours[index], reference.hashvalues)


def test_estimated_jaccard_tracks_the_true_jaccard():
    rng = np.random.default_rng(0)
    vocabulary = [f"w{i}" for i in range(400)]
    base = " ".join(rng.choice(vocabulary, 300))
    texts = (
        [base] + [_word_change(base, rng, n) for n in (2, 10, 40)] + [" ".join(rng.choice(vocabulary, 300))]
    )
    signatures = minhash_signatures(texts, num_perm=256, seed=0)

    def shingles(text):
        return {text[i : i + 5] for i in range(len(text) - 4)}

    for other in range(1, len(texts)):
        a, b = shingles(texts[0]), shingles(texts[other])
        true = len(a & b) / len(a | b)
        estimate = (signatures[0] == signatures[other]).mean()
        assert abs(estimate - true) < 0.08, (other, estimate, true)


def test_deterministic_for_a_seed():
    texts = [normalise_text(t) for t in TOPICS]
    np.testing.assert_array_equal(minhash_signatures(texts, seed=5), minhash_signatures(texts, seed=5))
    assert not np.array_equal(minhash_signatures(texts, seed=5), minhash_signatures(texts, seed=6))


def test_deduplicate_claims_keeps_the_first_of_each_normalised_text():
    claims = pd.DataFrame(
        {
            "claim_id": ["1:0", "2:3", "3:1", "4:0"],
            "text": [
                "Aspirin reduced pain.",
                "ASPIRIN  reduced pain",
                "Aspirin increased pain.",
                "Aspirin reduced pain!",
            ],
        }
    )
    kept, dropped = deduplicate_claims(claims)
    assert kept["claim_id"].tolist() == ["1:0", "3:1"] and dropped == 2


def test_bad_input_is_named():
    with pytest.raises(DedupInputError, match="`abstract` \\(or `text`\\) column"):
        deduplicate_abstracts(pd.DataFrame({"pmid": ["1"]}))
    with pytest.raises(DedupInputError, match="threshold must be in"):
        deduplicate_abstracts(pd.DataFrame({"abstract": ["a"]}), threshold=1.5)
    with pytest.raises(DedupInputError, match="`text` column"):
        deduplicate_claims(pd.DataFrame({"claim": ["a"]}))


def test_doctests():
    assert doctest.testmod(dedup).failed == 0
