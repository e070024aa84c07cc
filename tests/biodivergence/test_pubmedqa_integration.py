"""Real abstracts flow through: PubMedQA conclusions → pool → build → audit → lexical baseline."""

import pytest

from medunlearn.biodivergence.pools import PubMedQAPoolConfig, pubmedqa_pool


@pytest.mark.integration
def test_pubmedqa_pool_build_audit_and_lexical_baseline(shared_data, tmp_path):
    import json

    from medunlearn.cli import main

    source = shared_data / "pubmedqa" / "ori_pqal.json"
    if not source.is_file():
        pytest.skip(f"{source} is absent")
    raw = json.loads(source.read_text())
    pool = pubmedqa_pool(source, PubMedQAPoolConfig(label_source="llm"))
    assert len(pool) > 500
    some = pool.iloc[0]
    assert raw[some["article_a"]]["LONG_ANSWER"].startswith(some["claim_a"])  # claims are real conclusions
    shared_terms = set(raw[some["article_a"]]["MESHES"]) & set(raw[some["article_b"]]["MESHES"])
    assert shared_terms  # paired within a MeSH term

    out = tmp_path / "pqa"
    argv = ["build", "--pubmedqa", str(source), "--pubmedqa-label-source", "llm", "--out", str(out)]
    assert main(["biodivergence", *argv]) == 0
    assert main(["biodivergence", "audit", str(out)]) == 0
    build = json.loads((out / "build.json").read_text())
    sizes = build["stats"]["split_sizes"]
    assert sizes["dev"] > 0 and sizes["test"] > 0  # the percolating MeSH graph was cut, not all sent to train
    assert build["stats"]["percolating"] and build["stats"]["bridging_pairs_dropped"] > 0
    assert (
        main(
            [
                "biodivergence",
                "eval",
                "--baseline",
                "lexical",
                "--data",
                str(out),
                "--out",
                str(tmp_path / "eval"),
            ]
        )
        == 0
    )
    scores = json.loads((tmp_path / "eval" / "metrics.json").read_text())["scores"]
    assert scores["num_examples"] == sizes["test"] and 0.0 <= scores["accuracy"] <= 1.0


@pytest.mark.integration
def test_pubmedqa_build_with_rule_labels_loads_with_datasets(shared_data, tmp_path):
    """`build --pubmedqa` (heuristic labels: dev and test empty) writes a folder load_dataset reads."""
    from datasets import load_dataset

    from medunlearn.cli import main

    source = shared_data / "pubmedqa" / "ori_pqal.json"
    if not source.is_file():
        pytest.skip(f"{source} is absent")
    out = tmp_path / "pqa"
    assert main(["biodivergence", "build", "--pubmedqa", str(source), "--out", str(out)]) == 0
    dataset = load_dataset(str(out), "v1.0")
    assert set(dataset) == {"train"} and dataset["train"].num_rows > 500
    assert main(["biodivergence", "audit", str(out)]) == 0
