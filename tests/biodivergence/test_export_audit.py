import hashlib
import json
import re
import shutil

import pandas as pd
import pytest
import yaml

from medunlearn.biodivergence.audit import FolderFormatError, audit_folder, read_hub_folder
from medunlearn.biodivergence.export import write_hub_folder
from medunlearn.biodivergence.splits import build_splits


def _digests(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_building_twice_gives_identical_files(tmp_path, small_pool):
    params = {"seed": 0, "min_confidence": 0.45, "source": "test"}
    folders = []
    for name in ("one", "two"):
        configs, stats = build_splits(
            small_pool.sample(frac=1.0, random_state=len(name))
        )  # row order must not matter
        folders.append(write_hub_folder(configs, stats, tmp_path / name, params))
    first, second = (_digests(folder) for folder in folders)
    assert first == second
    assert len(first) == 8  # README, build.json, 2 configs x 3 splits


def test_readme_configs_and_card(built_folder):
    text = (built_folder / "README.md").read_text()
    header = yaml.safe_load(text.split("---")[1])
    names = [entry["config_name"] for entry in header["configs"]]
    assert names == ["v1.0", "v1.0-pairlevel"] and header["configs"][0]["default"] is True
    build = json.loads((built_folder / "build.json").read_text())
    assert f"bridging pairs dropped: {build['stats']['bridging_pairs_dropped']}" in text
    assert "| v1.0 | dev |" in text and "no article in two splits" in text
    assert not re.search(
        r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}:\d{2}", text
    )  # no dates or times: rebuilds are identical
    assert "| oncology |" in text  # per-domain split table


def test_load_dataset_reads_the_folder_offline(built_folder):
    from datasets import load_dataset

    dataset = load_dataset(str(built_folder), "v1.0")
    assert set(dataset) == {"train", "dev", "test"}
    assert dataset["dev"].features["axes"].feature.dtype == "string"
    on_disk = read_hub_folder(built_folder)["v1.0"]
    assert dataset["test"]["pair_id"] == on_disk["test"]["pair_id"].tolist()
    default = load_dataset(str(built_folder))  # v1.0 is the default config
    assert default["train"].num_rows == dataset["train"].num_rows


def test_a_pool_without_llm_labels_builds_a_folder_that_loads(tmp_path, small_pool):
    """Dev and test are empty (heuristic labels go to train only): they are not written and not listed, the
    card and build.json say so, load_dataset works, and the audit and the reader see them as empty."""
    from datasets import load_dataset

    from medunlearn.biodivergence.build import PoolSource, build_biodivergence
    from medunlearn.biodivergence.pools import write_pool

    pool_file = write_pool(small_pool.assign(label_source="heuristic"), tmp_path / "pool.jsonl")
    folder, stats = build_biodivergence(tmp_path / "bd", PoolSource(pool=pool_file))
    assert stats.split_sizes["dev"] == stats.split_sizes["test"] == 0 and stats.split_sizes["train"] > 0
    assert sorted(p.name for p in (folder / "v1.0").iterdir()) == ["train.parquet"]
    dataset = load_dataset(str(folder), "v1.0")
    assert set(dataset) == {"train"} and dataset["train"].num_rows == stats.split_sizes["train"]
    assert set(load_dataset(str(folder), "v1.0-pairlevel")) == {"train"}
    build = json.loads((folder / "build.json").read_text())
    assert build["empty_splits"] == {"v1.0": ["dev", "test"], "v1.0-pairlevel": ["dev", "test"]}
    assert "**Empty splits, not written**" in (folder / "README.md").read_text()
    on_disk = read_hub_folder(folder)["v1.0"]
    assert on_disk["dev"].empty and list(on_disk["dev"].columns) == list(on_disk["train"].columns)
    assert audit_folder(folder).ok
    # nothing of the staging folder is left beside the output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bd", "pool.jsonl"]


def test_audit_passes_and_reports_pairlevel_leakage(built_folder):
    report = audit_folder(built_folder)
    assert report.ok, report.first_violation
    leak = report.pairlevel_leakage
    assert leak["eval_pairs"] > 0 and leak["eval_pairs_sharing_article_with_train"] > 0
    assert set(report.label_sources["dev"]) == {"llm"}


def _tamper(built_folder, tmp_path, edit):
    folder = tmp_path / "tampered"
    shutil.copytree(built_folder, folder)
    path = folder / "v1.0" / "test.parquet"
    frame = pd.read_parquet(path)
    frame = edit(frame, pd.read_parquet(folder / "v1.0" / "train.parquet"))
    frame.to_parquet(path)
    return folder


@pytest.mark.parametrize(
    ("edit", "check"),
    [
        (
            lambda test, train: test.assign(
                article_a=[train["article_a"].iloc[0]] + test["article_a"].tolist()[1:]
            ),
            "no article in two splits",
        ),
        (
            lambda test, train: test.assign(
                claim_b=[train["claim_a"].iloc[0].upper()] + test["claim_b"].tolist()[1:]
            ),
            "no claim in two splits",
        ),
        (
            lambda test, train: test.assign(label_source=["heuristic"] + test["label_source"].tolist()[1:]),
            "test: only LLM labels",
        ),
        (
            lambda test, train: test.assign(confidence=[0.2] + test["confidence"].tolist()[1:]),
            "confidence >= 0.45",
        ),
        (
            lambda test, train: test.assign(conflict_type=["maybe"] + test["conflict_type"].tolist()[1:]),
            "pair schema and label ontology",
        ),
        (lambda test, train: test.drop(columns=["claim_b"]), "test: every row follows the pair schema"),
        (
            lambda test, train: test.assign(
                confidence=["high"] + test["confidence"].astype(str).tolist()[1:]
            ),
            "test: every row follows the pair schema",
        ),
    ],
)
def test_audit_names_the_first_violation(built_folder, tmp_path, edit, check):
    report = audit_folder(_tamper(built_folder, tmp_path, edit))
    assert not report.ok and check in report.first_violation.name


def test_audit_rejects_a_folder_without_configs(tmp_path):
    with pytest.raises(FolderFormatError, match="no README.md"):
        audit_folder(tmp_path)
    (tmp_path / "README.md").write_text(
        "---\nconfigs:\n- config_name: v1.0\n  data_files:\n"
        "  - split: train\n    path: v1.0/train.parquet\n---\n"
    )
    with pytest.raises(FolderFormatError, match="train.parquet, which does not exist"):
        audit_folder(tmp_path)


@pytest.fixture(scope="module")
def heuristic_eval_folder(tmp_path_factory, small_pool):
    """A heuristic-only pool built with eval_labels="heuristic" (the opt-in for builds without an LLM)."""
    from medunlearn.biodivergence.build import PoolSource, build_biodivergence
    from medunlearn.biodivergence.pools import write_pool

    tmp = tmp_path_factory.mktemp("heuristic_eval")
    pool_file = write_pool(small_pool.assign(label_source="heuristic"), tmp / "pool.jsonl")
    folder, stats = build_biodivergence(tmp / "bd", PoolSource(pool=pool_file), eval_labels="heuristic")
    return folder, stats


def test_heuristic_eval_labels_are_in_every_row_the_card_and_the_audit(heuristic_eval_folder):
    folder, stats = heuristic_eval_folder
    configs = read_hub_folder(folder)
    for split in ("dev", "test"):
        frame = configs["v1.0"][split]
        assert len(frame) == stats.split_sizes[split] > 0
        assert (frame["label_source"] == "heuristic").all()
    build = json.loads((folder / "build.json").read_text())
    assert build["parameters"]["eval_labels"] == "heuristic"
    card = (folder / "README.md").read_text()
    header = yaml.safe_load(card.split("---", 2)[1])
    assert "heuristic-eval-labels" in header["tags"]
    body = card.split("---", 2)[2]
    # prominent: the warning comes before the split table, with the counts of heuristic dev/test labels
    warning = body.index("**Dev and test hold heuristic labels**")
    assert warning < body.index("## Configurations and splits")
    assert f"dev {stats.split_sizes['dev']} of {stats.split_sizes['dev']}" in body[warning:]
    report = audit_folder(folder)
    assert report.ok, report.first_violation
    names = [check.name for check in report.checks]
    assert "v1.0 dev: label sources llm or heuristic (eval_labels=heuristic)" in names
    assert any(line.startswith("WARN v1.0 dev/test hold") and "heuristic" in line for line in report.lines())


def test_the_audit_fails_heuristic_dev_labels_of_a_folder_that_did_not_ask_for_them(
    heuristic_eval_folder, tmp_path
):
    folder = tmp_path / "relabelled"
    shutil.copytree(heuristic_eval_folder[0], folder)
    build = json.loads((folder / "build.json").read_text())
    build["parameters"]["eval_labels"] = "llm"
    (folder / "build.json").write_text(json.dumps(build))
    report = audit_folder(folder)
    assert not report.ok and report.first_violation.name == "v1.0 dev: only LLM labels"


def test_the_audit_of_a_split_with_a_column_name_given_twice_is_one_named_error(
    built_folder, tmp_path, capsys
):
    """Before: exit 2 with pyarrow's "Multiple matches for FieldRef.Name(claim_a)" and the whole schema (21
    lines)."""
    import pyarrow.parquet as pq

    from medunlearn.cli import main

    folder = tmp_path / "folder"
    shutil.copytree(built_folder, folder)
    train = folder / "v1.0" / "train.parquet"
    table = pq.read_table(train)
    pq.write_table(table.append_column("claim_a", table.column("claim_b")), train)
    assert main(["biodivergence", "audit", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"medunlearn biodivergence: error: {train}, field 'claim_a': the column name appears twice: "
        "every column needs its own name"
    ], err
