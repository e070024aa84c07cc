import json

import pandas as pd
import pytest

from medunlearn.biodivergence.pools import PoolNotFoundError, read_pool, write_pool
from medunlearn.biodivergence.schema import PAIR_COLUMNS, PoolFormatError, normalise_pool
from medunlearn.ontology.biodivergence import (
    AXIS_IDS,
    CONFLICT_TYPE_IDS,
    DIVERGENCE_AXES,
    UnknownLabelError,
    check_axes,
    check_conflict_type,
    check_confounder,
)


def test_registry_sizes_and_flags():
    assert len(CONFLICT_TYPE_IDS) == 6 and len(set(CONFLICT_TYPE_IDS)) == 6
    assert len(AXIS_IDS) == 13 and len(set(AXIS_IDS)) == 13
    assert sum(not axis.primary for axis in DIVERGENCE_AXES) == 4  # 9 primary + 4 provisional [paper]


def test_unknown_labels_list_the_allowed_ones():
    with pytest.raises(UnknownLabelError, match="allowed: direct_contradiction, contextual_contradiction"):
        check_conflict_type("contradiction")
    with pytest.raises(UnknownLabelError, match="unknown axis 'age'.*population"):
        check_axes(["population", "age"])
    with pytest.raises(UnknownLabelError, match="not one of the pair's axes"):
        check_confounder("geography", axes=["population"])
    assert check_confounder(None) == "none"


def test_normalise_fills_defaults(pair_factory):
    frame = normalise_pool(pd.DataFrame([pair_factory("p1", "1", "2")]))
    assert list(frame.columns) == list(PAIR_COLUMNS)
    row = frame.iloc[0]
    assert row["evidence_a"] == row["claim_a"] and row["evidence_b"] == row["claim_b"]  # claim-verbatim rule
    assert row["abstract_a"] == ""


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("conflict_type", "contradiction", r"row 2, field `conflict_type`: unknown label"),
        ("axes", ["population", "age"], r"row 2, field `axes`: unknown axis"),
        (
            "dominant_confounder",
            "geography",
            r"row 2, field `dominant_confounder`: must be one of the pair's axes",
        ),
        ("confidence", 1.7, r"row 2, field `confidence`"),
        ("label_source", "human", r"row 2, field `label_source`"),
        ("article_b", "", r"row 2, field `article_b`: must not be empty"),
        ("domain", "  ", r"row 2, field `domain`: must not be empty"),
        ("domain", 7, r"row 2, field `domain`: must be a string"),
    ],
)
def test_bad_rows_are_named(pair_factory, field, value, message):
    rows = [pair_factory("p0", "1", "2"), pair_factory("p1", "3", "4")]
    rows[1][field] = value  # the second row: "row 2", counted from 1
    with pytest.raises(PoolFormatError, match="mypool: " + message):
        normalise_pool(pd.DataFrame(rows), source="mypool")


def test_domain_label_set_is_open(tmp_path, small_pool):
    """A user's own domain (a real cardiovascular pool was once rejected with "unknown label") is kept
    through validation, both split builders, the folder, its card and the audit."""
    from medunlearn.biodivergence.audit import audit_folder, read_hub_folder
    from medunlearn.biodivergence.export import write_hub_folder
    from medunlearn.biodivergence.schema import DOMAINS, domain_order
    from medunlearn.biodivergence.splits import build_splits

    pool = small_pool.copy()
    pool.loc[pool["domain"] == "oncology", "domain"] = "cardiovascular"
    pool = normalise_pool(pool, "cardio pool")
    assert "cardiovascular" in set(pool["domain"])
    configs, stats = build_splits(pool)
    for name in ("v1.0", "v1.0-pairlevel"):
        domains = pd.concat(configs[name].values())["domain"]
        assert "cardiovascular" in set(domains) and "oncology" not in set(domains)
    v1_test = configs["v1.0"]["test"]
    assert (v1_test["domain"] == "cardiovascular").sum() > 0  # the user's domain reaches the eval splits
    folder = write_hub_folder(configs, stats, tmp_path / "cardio", {"seed": 0, "source": "cardio"})
    assert audit_folder(folder).ok
    assert "| cardiovascular |" in (folder / "README.md").read_text()
    again = read_hub_folder(folder)
    assert "cardiovascular" in set(again["v1.0"]["train"]["domain"])
    assert domain_order(["zoology", "cardiovascular", "oncology"]) == (*DOMAINS, "cardiovascular", "zoology")


def test_missing_column_is_named(pair_factory):
    frame = pd.DataFrame([pair_factory("p0", "1", "2")]).drop(columns=["article_a"])
    with pytest.raises(PoolFormatError, match=r"missing column\(s\) \['article_a'\]"):
        normalise_pool(frame)


def test_pool_round_trip_jsonl_and_parquet(tmp_path, small_pool):
    path = write_pool(small_pool, tmp_path / "pool.jsonl")
    again = read_pool(path)
    pd.testing.assert_frame_equal(
        again.reset_index(drop=True), small_pool.reset_index(drop=True), check_dtype=False
    )
    small_pool.to_parquet(tmp_path / "pool.parquet")
    assert read_pool(tmp_path / "pool.parquet")["axes"].map(len).sum() == small_pool["axes"].map(len).sum()


def test_read_pool_errors(tmp_path, pair_factory):
    with pytest.raises(PoolNotFoundError):
        read_pool(tmp_path / "absent.jsonl")
    bad = pair_factory("p0", "1", "2") | {"axes": ["nope"]}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(PoolFormatError, match=r"bad.jsonl: row 1, field `axes`"):
        read_pool(path)
    numeric = pair_factory("p0", "1", "2") | {"article_a": 12345, "article_b": 678}
    path.write_text(json.dumps(numeric) + "\n")
    assert read_pool(path)["article_a"].iloc[0] == "12345"


def test_synthetic_pool_is_seeded_and_populates_the_ontology():
    from medunlearn.biodivergence.synthetic import generate_pair_pool

    first, second = generate_pair_pool(n_pairs=300, seed=1), generate_pair_pool(n_pairs=300, seed=1)
    pd.testing.assert_frame_equal(first, second)
    assert not first.equals(generate_pair_pool(n_pairs=300, seed=2))
    normalise_pool(first)  # every generated row is valid
    counts = first["conflict_type"].value_counts(normalize=True)
    assert counts.index[:2].tolist() == [
        "contextual_contradiction",
        "no_conflict",
    ]  # two classes carry the mass
    assert set(first["domain"]) == {
        "antimicrobial_resistance",
        "oncology",
        "infectious_disease",
        "genomics",
        "clinical_trials_epidemiology",
    }
    assert first["pair_id"].duplicated().any()  # duplicates exercise the keep-the-LLM-copy rule
    # articles take part in several pairs, so the article graph has non-trivial components
    articles = pd.concat([first["article_a"], first["article_b"]])
    assert articles.value_counts().max() >= 3
