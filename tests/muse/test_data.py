"""MUSE-format folders: our fictitious generator, the Hub layout read from a local copy, and bad input."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from medunlearn.cli import main
from medunlearn.errors import MedunlearnError, OutputExistsError
from medunlearn.muse.build import ICL_PAIRS, build_muse_configs, build_muse_folder
from medunlearn.muse.data import (
    LAYOUT,
    MuseLayoutError,
    MuseMissingSplitError,
    MuseRowError,
    load_muse_split,
    open_muse_folder,
)


def _digest(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _texts(rows):
    return [row["text"] for row in rows]


def test_same_arguments_write_the_same_bytes_and_another_seed_does_not(tmp_path):
    first = build_muse_folder(tmp_path / "a", articles=6, seed=3)
    second = build_muse_folder(tmp_path / "b", articles=6, seed=3)
    other = build_muse_folder(tmp_path / "c", articles=6, seed=4)
    assert _digest(first) == _digest(second)
    assert _digest(first) != _digest(other)
    assert len(_digest(first)) == 1 + sum(len(splits) for splits in LAYOUT.values())


def test_every_split_loads_back_as_built_with_the_hub_fields(tmp_path):
    folder = build_muse_folder(tmp_path / "muse", articles=5, seed=1)
    configs = build_muse_configs(articles=5, seed=1)
    muse = open_muse_folder(folder)
    for config, splits in LAYOUT.items():
        for split, fields in splits.items():
            rows = load_muse_split(muse, config, split)
            assert rows == configs[config][split]
            assert rows and all(tuple(row) == fields for row in rows)


def test_datasets_reads_the_folder_through_its_readme(tmp_path):
    from medunlearn.data_loading import load_config

    folder = build_muse_folder(tmp_path / "muse", articles=5)
    assert load_config(folder, "knowmem", "retain_qa_icl").to_list() == load_muse_split(
        folder, "knowmem", "retain_qa_icl"
    )


@pytest.mark.parametrize("articles", [5, 8, 10])
def test_split_relations_are_the_hubs(articles):
    configs = build_muse_configs(articles=articles, seed=articles)
    raw = {split: _texts(rows) for split, rows in configs["raw"].items()}
    everything = [text for texts in raw.values() for text in texts]
    assert len(everything) == len(set(everything)) == 4 * articles  # disjoint sets, no repeated article
    sust = [_texts(configs["sust"][fold]) for fold in ("forget_1", "forget_2", "forget_3", "forget_4")]
    assert sust[0] == raw["forget"]
    assert not set().union(*sust[1:]) & set(everything)  # later requests are new documents
    for k, fold in enumerate(("forget_1", "forget_2", "forget_3", "forget_4")):
        assert _texts(configs["scal"][fold]) == [text for texts in sust[: k + 1] for text in texts]
    assert _texts(configs["train"]["forget"]) == _texts(configs["scal"]["forget_4"])
    assert _texts(configs["train"]["retain1"]) == raw["retain1"]
    assert _texts(configs["privleak"]["forget"]) == raw["forget"]
    assert _texts(configs["privleak"]["holdout"]) == raw["holdout"]
    for row, text in zip(configs["verbmem"]["forget"], raw["forget"]):
        assert text.startswith(row["prompt"] + " " + row["gt"])


def test_knowmem_answers_are_in_their_articles_and_icl_gives_none_away():
    configs = build_muse_configs(articles=6, seed=2)
    knowmem = configs["knowmem"]
    for questions, corpus in (("forget_qa", "forget"), ("retain_qa", "retain1")):
        articles = " ".join(_texts(configs["raw"][corpus]))
        assert all(row["answer"].removesuffix(" thousand crowns") in articles for row in knowmem[questions])
        icl = knowmem[f"{questions}_icl"]
        assert len(icl) == ICL_PAIRS
        assert not {row["question"] for row in icl} & {row["question"] for row in knowmem[questions]}
    forget_questions = [row["question"] for row in knowmem["forget_qa"]]
    assert len(set(forget_questions)) == len(forget_questions)  # one answer per question


def test_build_refuses_an_existing_folder_and_leaves_it_unchanged(tmp_path):
    out = tmp_path / "muse"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(OutputExistsError):
        build_muse_folder(out, articles=5)
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    assert main(["muse", "build", "--out", str(out), "--articles", "5"]) == 2
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    assert main(["muse", "build", "--out", str(out), "--articles", "5", "--overwrite"]) == 0
    assert not (out / "mine.txt").exists() and (out / "verbmem" / "forget.jsonl").is_file()


# ---- the Hub's own layout: parquet files named <config>/<split>-00000-of-00001.parquet


def _hub_copy(tmp_path, *, readme: bool = True, rename: dict | None = None):
    """Our rows written the way the Hub stores them (parquet shards, README ``configs:`` globs)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "MUSE-News"
    lines = ["---", "configs:"]
    for config, splits in build_muse_configs(articles=5).items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split, rows in splits.items():
            name = (rename or {}).get((config, split), split)
            (root / config).mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(rows), root / config / f"{name}-00000-of-00001.parquet")
            lines += [f"  - split: {name}", f"    path: {config}/{name}-*"]
    if readme:
        (root / "README.md").write_text("\n".join([*lines, "---", "", "# MUSE-News", ""]))
    return root


@pytest.mark.parametrize("readme", [True, False], ids=["readme-configs", "files-only"])
def test_a_hub_layout_copy_loads(tmp_path, readme):
    root = _hub_copy(tmp_path, readme=readme)
    expected = build_muse_configs(articles=5)
    assert load_muse_split(root, "verbmem", "forget") == expected["verbmem"]["forget"]
    assert load_muse_split(root, "scal", "forget_3") == expected["scal"]["forget_3"]


def test_muse_books_without_scal_and_sust_loads(tmp_path):
    root = _hub_copy(tmp_path, readme=False)
    shutil.rmtree(root / "scal")
    shutil.rmtree(root / "sust")
    assert len(load_muse_split(root, "knowmem", "forget_qa")) == 20


# ---- bad input: each a named error naming folder / file / row / field


def test_an_older_revision_layout_is_refused_by_name(tmp_path):
    old = {("knowmem", "retain_qa"): "retain2_qa", ("knowmem", "retain_qa_icl"): "retain2_qa_icl"}
    root = _hub_copy(tmp_path, rename=old)
    with pytest.raises(MuseLayoutError, match=r"retain2_qa, retain2_qa_icl.*older Hub revision") as error:
        open_muse_folder(root)
    assert str(root) in str(error.value)


def test_an_unknown_layout_is_refused_by_name(tmp_path):
    root = _hub_copy(tmp_path, rename={("knowmem", "retain_qa"): "retain_questions"})
    with pytest.raises(MuseLayoutError, match=r"unknown layout.*retain_questions"):
        open_muse_folder(root)


def test_a_missing_split_is_named(tmp_path):
    folder = build_muse_folder(tmp_path / "muse", articles=5)
    readme = (folder / "README.md").read_text()
    (folder / "README.md").write_text(readme.replace("  - split: holdout\n    path: raw/holdout.jsonl\n", ""))
    (folder / "raw" / "holdout.jsonl").unlink()
    with pytest.raises(MuseMissingSplitError, match=r"config 'raw' lacks split 'holdout'"):
        open_muse_folder(folder)


def test_a_declared_split_without_its_file_is_named(tmp_path):
    folder = build_muse_folder(tmp_path / "muse", articles=5)
    (folder / "privleak" / "holdout.jsonl").unlink()
    with pytest.raises(MuseMissingSplitError, match=r"privleak/holdout is declared but has no data file"):
        open_muse_folder(folder)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda row: row.pop("gt"), r"field 'gt' is missing"),
        (lambda row: row.update(gt=None), r"field 'gt' is missing"),
        (lambda row: row.update(gt=7), r"field 'gt' must be a string, got int"),
        (lambda row: row.update(gt="  "), r"field 'gt' is empty"),
    ],
    ids=["absent", "null", "number", "blank"],
)
def test_a_verbmem_row_without_gt_names_file_row_and_field(tmp_path, change, message):
    folder = build_muse_folder(tmp_path / "muse", articles=5)
    path = folder / "verbmem" / "forget.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    change(rows[2])
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(MuseRowError, match=rf"verbmem/forget.jsonl \(verbmem/forget\) row 3: {message}"):
        load_muse_split(folder, "verbmem", "forget")


def test_cli_check_exits_2_with_the_named_error(tmp_path, capsys):
    folder = build_muse_folder(tmp_path / "muse", articles=5)
    assert main(["muse", "check", "--data", str(folder)]) == 0
    assert "knowmem   forget_qa 20, forget_qa_icl 10" in capsys.readouterr().out
    path = folder / "verbmem" / "forget.jsonl"
    path.write_text(path.read_text().replace('"gt"', '"ground_truth"', 1))
    assert main(["muse", "check", "--data", str(folder)]) == 2
    assert (
        "medunlearn muse: error: " in (err := capsys.readouterr().err)
        and "row 1: field 'gt' is missing" in err
    )
    assert issubclass(MuseRowError, MedunlearnError) and issubclass(MuseRowError, ValueError)
