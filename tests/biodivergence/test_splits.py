import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from medunlearn.biodivergence.audit import audit_configs
from medunlearn.biodivergence.schema import normalise_pool
from medunlearn.biodivergence.splits import (
    SplitConfig,
    build_splits,
    carve_component,
    clean_pool,
    key_components,
    naive_union_find_components,
    pair_keys,
)


def test_clean_keeps_llm_copy_then_drops_low_confidence(pair_factory):
    rows = [
        pair_factory(
            "dup",
            "1",
            "2",
            label_source="heuristic",
            confidence=0.99,
            conflict_type="no_conflict",
            axes=(),
            confounder="none",
        ),
        pair_factory("dup", "1", "2", label_source="llm", confidence=0.6),
        pair_factory("low", "3", "4", confidence=0.44),
        pair_factory("edge", "5", "6", label_source="heuristic", confidence=0.45),
    ]
    cleaned, counts = clean_pool(normalise_pool(pd.DataFrame(rows)))
    assert cleaned["pair_id"].tolist() == ["dup", "edge"]
    assert cleaned.set_index("pair_id").loc["dup", "label_source"] == "llm"
    assert counts == {"duplicate_rows_removed": 1, "low_confidence_removed": 1}


def test_components_join_articles_and_shared_claims(pair_factory):
    rows = [
        pair_factory("a", "1", "2"),
        pair_factory("b", "2", "3"),  # shares article 2 with a
        pair_factory("c", "4", "5", claim_a="Statins prevent stroke."),
        pair_factory("d", "6", "7", claim_b="statins prevent  stroke"),  # same claim after normalisation as c
        pair_factory("e", "8", "9"),
    ]
    keys, n_keys = pair_keys(normalise_pool(pd.DataFrame(rows)))
    labels = key_components(keys, n_keys)
    assert labels[0] == labels[1] and labels[2] == labels[3]
    assert len({labels[0], labels[2], labels[4]}) == 3


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 5), st.integers(0, 5)),
        min_size=1,
        max_size=60,
    )
)
def test_vectorised_components_equal_union_find(edges):
    keys = np.array([[a, b, 40 + c, 40 + d] for a, b, c, d in edges])
    fast = key_components(keys, 50)
    slow = naive_union_find_components(keys)
    # same partition: the label maps are a bijection
    assert len(set(zip(fast, slow))) == len(set(fast)) == len(set(slow))


def test_carve_component_cuts_a_chain_with_one_bridge_per_cut():
    # a path of 10 articles, keys ordered along the path: each cut straddles exactly one pair
    keys = np.array([[i, i + 1] for i in range(9)])
    position = np.arange(10)
    split, straddling = carve_component(keys, np.ones(9, bool), position, dev_need=2, test_need=2)
    assert split.tolist() == ["dev", "dev", "", "test", "test", "", "train", "train", "train"]
    assert straddling.sum() == 2
    split, straddling = carve_component(
        keys, np.ones(9, bool), position, dev_need=2, test_need=2, test_at_end=True
    )
    assert split.tolist() == ["dev", "dev", "", "train", "train", "train", "", "test", "test"]
    assert straddling.sum() == 2


def test_percolating_pool_drops_few_bridging_pairs(pair_factory):
    # 30 clusters of 6 pairs (a 4-article ring + 2 chords), each tied to one hub article by one pair: the
    # whole pool is one component. Cutting whole clusters away costs one bridging pair per cluster.
    rows = []
    for cluster in range(30):
        articles = [f"c{cluster}-{i}" for i in range(4)]
        ring = list(zip(articles, articles[1:] + articles[:1])) + [
            (articles[0], articles[2]),
            (articles[1], articles[3]),
        ]
        rows += [pair_factory(f"p{cluster}-{j}", a, b) for j, (a, b) in enumerate(ring)]
        rows.append(pair_factory(f"hub{cluster}", "hub", articles[0]))
    configs, stats = build_splits(normalise_pool(pd.DataFrame(rows)))
    assert stats.percolating and stats.largest_component_pairs == len(rows)
    sizes = stats.split_sizes
    assert sizes["dev"] >= 6 and sizes["test"] >= 6 and sizes["train"] > sizes["dev"] + sizes["test"]
    eval_clusters = (sizes["dev"] + sizes["test"]) / 6
    assert stats.bridging_pairs_dropped <= eval_clusters + 2  # about one bridge per carved cluster, not more
    assert audit_configs(configs).ok


pair_rows = st.lists(
    st.fixed_dictionaries(
        {
            "pair_id": st.integers(0, 40).map(lambda i: f"p{i}"),
            "article_a": st.integers(0, 25).map(str),
            "article_b": st.integers(0, 25).map(str),
            "claim_variant": st.integers(0, 3),
            "label_source": st.sampled_from(["llm", "llm", "heuristic"]),
            "confidence": st.floats(0.0, 1.0),
            "domain": st.sampled_from(["oncology", "genomics"]),
            "conflict_type": st.sampled_from(
                ["contextual_contradiction", "no_conflict", "direct_contradiction"]
            ),
        }
    ),
    min_size=1,
    max_size=50,
)


def _pool(rows) -> pd.DataFrame:
    """The drawn rows as a pool; rows drawing one pair_id are copies of its first row's pair (a pair_id names
    one pair: domain, claims, articles), each with its own label, as the builder's dedupe expects."""
    records, pairs = [], {}
    for drawn in rows:
        pair = pairs.setdefault(drawn["pair_id"], drawn)
        row = {**drawn, **{key: pair[key] for key in ("domain", "article_a", "article_b", "claim_variant")}}
        records.append(
            {
                "pair_id": row["pair_id"],
                "domain": row["domain"],
                # claims repeat across articles (variant shared by several articles), testing
                # claim-disjointness
                "claim_a": f"Claim {row['claim_variant']} of article {int(row['article_a']) % 7}.",
                "claim_b": f"Finding {row['claim_variant']} from article {row['article_b']}.",
                "article_a": row["article_a"],
                "article_b": row["article_b"],
                "conflict_type": row["conflict_type"],
                "axes": ["population"],
                "dominant_confounder": "population",
                "label_source": row["label_source"],
                "confidence": row["confidence"],
            }
        )
    return normalise_pool(pd.DataFrame(records))


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair_rows, st.integers(0, 3))
def test_v1_splits_invariants_for_any_pool(rows, seed):
    pool = _pool(rows)
    configs, stats = build_splits(pool, SplitConfig(seed=seed))
    v1 = configs["v1.0"]
    report = audit_configs(configs)
    assert report.ok, report.first_violation
    # independent re-check of the invariants the audit claims
    articles = {name: set(f["article_a"]) | set(f["article_b"]) for name, f in v1.items()}
    claims = {name: set(f["claim_a"].str.lower()) | set(f["claim_b"].str.lower()) for name, f in v1.items()}
    for left, right in (("train", "dev"), ("train", "test"), ("dev", "test")):
        assert not articles[left] & articles[right]
        assert not claims[left] & claims[right]
        assert not set(v1[left]["pair_id"]) & set(v1[right]["pair_id"])
    assert (v1["dev"]["label_source"] == "llm").all() and (v1["test"]["label_source"] == "llm").all()
    for config in configs.values():
        for frame in config.values():
            assert (frame["confidence"] >= 0.45).all()
    kept = sum(len(f) for f in v1.values())
    assert (
        kept + stats.bridging_pairs_dropped + stats.heuristic_pairs_dropped_from_eval
        == stats.pairs_after_cleaning
    )
    again, _ = build_splits(pool, SplitConfig(seed=seed))
    for name in configs:
        for split in configs[name]:
            pd.testing.assert_frame_equal(configs[name][split], again[name][split])


@settings(max_examples=15, deadline=None)
@given(pair_rows)
def test_pairlevel_is_pair_disjoint_and_keeps_every_clean_pair(rows):
    pool = _pool(rows)
    configs, stats = build_splits(pool)
    legacy = configs["v1.0-pairlevel"]
    ids = [set(frame["pair_id"]) for frame in legacy.values()]
    assert sum(len(s) for s in ids) == len(set().union(*ids)) == stats.pairs_after_cleaning
    assert (legacy["test"]["label_source"] == "llm").all() and (legacy["dev"]["label_source"] == "llm").all()


def test_proportions_on_a_realistic_pool(small_pool):
    configs, stats = build_splits(small_pool)
    sizes = stats.split_sizes
    total = sum(sizes.values())
    # published v1.0 shares: 85.8 / 7.1 / 7.1 %
    assert 0.04 < sizes["dev"] / total < 0.11 and 0.04 < sizes["test"] / total < 0.11
    legacy = stats.pairlevel_split_sizes
    assert abs(legacy["test"] / sum(legacy.values()) - 0.2) < 0.02  # 2,500 / 12,500


def test_each_domain_approaches_the_proportions(small_pool):
    configs, _ = build_splits(small_pool)
    counts = pd.concat(
        [frame["domain"].value_counts().rename(name) for name, frame in configs["v1.0"].items()], axis=1
    )
    eval_share = (counts["dev"] + counts["test"]) / counts.sum(axis=1)
    # published dev+test share 1,682 / 11,865 = 14.2%; every domain gets a comparable share on its own
    assert eval_share.between(0.08, 0.22).all(), eval_share.to_dict()


def test_eval_labels_heuristic_admits_heuristic_pairs_to_dev_and_test(small_pool):
    """By default (the paper's v1.0) a heuristic-only pool has no dev/test; asked with
    eval_labels="heuristic", the same pool gets dev and test of heuristic pairs, still article-, claim- and
    pair-disjoint, and the stats record what was admitted."""
    heuristic = small_pool.assign(label_source="heuristic")
    _, paper = build_splits(heuristic)
    assert paper.split_sizes["dev"] == paper.split_sizes["test"] == 0
    assert paper.eval_labels == "llm"
    configs, stats = build_splits(heuristic, SplitConfig(eval_labels="heuristic"))
    v1 = configs["v1.0"]
    total = sum(stats.split_sizes.values())
    assert 0.04 < stats.split_sizes["dev"] / total < 0.11 and 0.04 < stats.split_sizes["test"] / total < 0.11
    assert (v1["dev"]["label_source"] == "heuristic").all() and (
        v1["test"]["label_source"] == "heuristic"
    ).all()
    assert stats.eval_labels == "heuristic" and stats.heuristic_pairs_dropped_from_eval == 0
    assert stats.eval_label_sources == {
        "dev": {"heuristic": stats.split_sizes["dev"]},
        "test": {"heuristic": stats.split_sizes["test"]},
    }
    legacy = configs["v1.0-pairlevel"]
    assert len(legacy["test"]) > 0 and len(legacy["dev"]) > 0
    articles = {name: set(f["article_a"]) | set(f["article_b"]) for name, f in v1.items()}
    assert not articles["train"] & articles["dev"] and not articles["train"] & articles["test"]
    assert not articles["dev"] & articles["test"]


def test_eval_labels_heuristic_keeps_the_llm_copy_of_a_pair_labelled_twice(pair_factory):
    pool = normalise_pool(
        pd.DataFrame(
            [
                pair_factory("p1", "a1", "b1", label_source="heuristic", confidence=0.95),
                pair_factory("p1", "a1", "b1", label_source="llm", confidence=0.6),
            ]
        )
    )
    configs, _ = build_splits(pool, SplitConfig(eval_labels="heuristic"))
    kept = pd.concat(configs["v1.0"].values())
    assert kept["label_source"].tolist() == ["llm"]


def test_an_unknown_eval_labels_choice_is_refused(small_pool):
    from medunlearn.errors import InputError

    with pytest.raises(InputError, match="eval_labels.*'silver'.*llm, heuristic"):
        build_splits(small_pool, SplitConfig(eval_labels="silver"))
