import pandas as pd
import pytest

from medunlearn.biodivergence.released import ReleasedSchemaError, load_released


def _write_released_like(folder, columns):
    """A local folder shaped like a Hub dataset: README configs + parquet with the release's column names."""
    (folder / "data").mkdir(parents=True)
    rows = pd.DataFrame(
        {
            "id": ["r1", "r2"],
            "domain": ["oncology", "genomics"],
            "claim_1": ["Drug A helps adults.", "Gene B raises risk."],
            "claim_2": ["Drug A fails in children.", "Gene B lowers risk."],
            "pmid_a": ["111", "333"],
            "pmid_b": ["222", "444"],
            "conflict_type": ["Contextual contradiction", "direct contradiction"],
            "divergence_axes": [["Population"], []],
            "dominant_confounder": ["population", None],
            "reconciliation_explanation": ["Different ages.", ""],
        }
    )[columns]
    for split in ("train", "validation", "test"):
        rows.to_parquet(folder / "data" / f"{split}.parquet")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n"
        + "".join(f"  - split: {s}\n    path: data/{s}.parquet\n" for s in ("train", "validation", "test"))
        + "---\n"
    )


ALL = [
    "id",
    "domain",
    "claim_1",
    "claim_2",
    "pmid_a",
    "pmid_b",
    "conflict_type",
    "divergence_axes",
    "dominant_confounder",
    "reconciliation_explanation",
]


def test_local_copy_maps_to_our_schema(tmp_path):
    _write_released_like(tmp_path, ALL)
    dataset = load_released(str(tmp_path))
    assert set(dataset) == {"train", "dev", "test"}
    row = dataset["dev"][0]
    assert (
        row["pair_id"] == "r1" and row["article_a"] == "111" and row["claim_b"] == "Drug A fails in children."
    )
    assert row["conflict_type"] == "contextual_contradiction" and row["axes"] == ["population"]
    assert row["evidence_a"] == row["claim_a"] and row["label_source"] == "llm"
    assert dataset["test"][1]["dominant_confounder"] == "none"


def test_missing_column_is_named(tmp_path):
    _write_released_like(tmp_path, [c for c in ALL if c != "pmid_b"])
    with pytest.raises(ReleasedSchemaError, match=r"no column for \['article_b'\]"):
        load_released(str(tmp_path))
