"""Folders damaged or named carelessly: a dataset card in another encoding or data_files shape, a data file
column of another type, a damaged run.json or per_example.parquet, one folder given twice. Each is a named
error (the file, and the line, row or field at fault) with no traceback, and nothing is written: exit 2 for a
file a command cannot read, exit 1 for an audit's verdict on a folder ``datasets`` would read wrongly."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from medunlearn.cli import main
from medunlearn.utils.user_files import card_data_files

NOTES = "data/notes/train-00000-of-00001.parquet"
FORGET_TRAIN = "data/forget_10/train-00000-of-00001.parquet"
FULL_HOLDOUT = "data/full/holdout-00000-of-00001.parquet"


@pytest.fixture()
def copy(amnesia_folder, tmp_path) -> Path:
    folder = tmp_path / "folder"
    shutil.copytree(amnesia_folder, folder)
    return folder


@pytest.fixture()
def model(tmp_path) -> Path:
    """A folder that passes for a model until its weights are loaded (every refusal here comes first)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes: equal before and after, nothing was written."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _error_line(capsys, command: str) -> str:
    """The one error line of a command that failed, after checking there is no traceback."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(("medunlearn", "FAIL"))]
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith((f"medunlearn {command}: error: ", "FAIL ")), err
    return lines[0]


# 1. A dataset card datasets cannot decode.


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
@pytest.mark.parametrize("command", ["audit", "evaluate"])
def test_a_dataset_card_that_is_not_utf8_is_named(copy, model, tmp_path, capsys, encoding, command):
    """Before: the audit passed a README that `datasets.load_dataset` fails on with UnicodeDecodeError (our
    reader honoured its byte-order mark)."""
    readme = copy / "README.md"
    readme.write_bytes(readme.read_text(encoding="utf-8").encode(encoding))
    before, out = _files(copy), tmp_path / "eval"
    argv = ["amnesia", "audit", str(copy)]
    if command == "evaluate":
        argv = [
            "evaluate",
            "--model",
            str(model),
            "--data",
            str(copy),
            "--forget",
            "forget_10",
            "--out",
            str(out),
        ]
    assert main(argv) == 2
    line = _error_line(capsys, argv[0])
    assert line.endswith(
        f"{readme}: is {encoding.upper()} text: datasets reads a dataset card as UTF-8, save it as UTF-8"
    ), line
    assert _files(copy) == before and not out.exists()


# 2. A data file column of a type datasets gives back otherwise.


def _cast(column: str, to):
    return lambda table: table.set_column(
        table.schema.get_field_index(column), column, table[column].cast(to)
    )


def _set(column: str, row: int, value, kind):
    def change(table):
        values = table[column].to_pylist()
        values[row] = value
        return table.set_column(table.schema.get_field_index(column), column, pa.array(values, kind))

    return change


def _keywords_as_text(table):
    text = pa.array([", ".join(words) for words in table["disease_keywords"].to_pylist()])
    return table.set_column(table.schema.get_field_index("disease_keywords"), "disease_keywords", text)


@pytest.mark.parametrize(
    ("relative", "change", "expected"),
    [
        (
            FORGET_TRAIN,
            _cast("patient_id", pa.binary()),
            "field 'patient_id': expected text, the column holds binary",
        ),
        (
            NOTES,
            _keywords_as_text,
            "field 'disease_keywords': expected a list of text, the column holds string",
        ),
        (
            FULL_HOLDOUT,
            _set("qa_type", 1, None, pa.string()),
            "row 2, field 'qa_type': expected text, got None",
        ),
        (
            NOTES,
            _set("disease_keywords", 0, ["cancer", None], pa.list_(pa.string())),
            "row 1, field 'disease_keywords': expected a list of text, got a null item",
        ),
        (NOTES, _set("disease_keywords", 2, None, pa.list_(pa.string())), "row 3, field 'disease_keywords'"),
    ],
)
def test_an_amnesia_column_of_another_type_or_a_null_fails_the_audit(
    copy, capsys, relative, change, expected
):
    """Before: the audit read ids with ``astype(str)`` and passed a patient_id stored as binary, which
    `load_dataset` gives back as ``b'P000006'``."""
    path = copy / relative
    pq.write_table(change(pq.read_table(path).replace_schema_metadata(None)), path)
    before = _files(copy)
    assert main(["amnesia", "audit", str(copy)]) == 1
    assert _error_line(capsys, "amnesia").startswith(f"FAIL {path}, {expected}")
    assert _files(copy) == before


def test_text_stored_as_large_string_still_passes_the_audit(copy):
    """`datasets` gives a large_string column back as text: the type check is no stricter than the loader."""
    path = copy / FORGET_TRAIN
    pq.write_table(_cast("answer", pa.large_string())(pq.read_table(path)), path)
    assert main(["amnesia", "audit", str(copy)]) == 0


@pytest.fixture(scope="module")
def biodivergence_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bd") / "bd"
    assert main(["biodivergence", "build", "--synthetic", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_cast("confidence", pa.string()), "field 'confidence': expected a number, the column holds string"),
        (_cast("pair_id", pa.binary()), "field 'pair_id': expected text, the column holds binary"),
        (
            _set("reconciliation", 1, None, pa.string()),
            "row 2, field 'reconciliation': expected text, got None",
        ),
    ],
)
def test_a_biodivergence_column_of_another_type_or_a_null_fails_the_audit(
    biodivergence_folder, tmp_path, capsys, change, expected
):
    """Before: a confidence stored as text passed (pandas converted it); a null reconciliation read as ""."""
    path, _, printed = _audit_with_changed_split(
        biodivergence_folder,
        tmp_path,
        capsys,
        "dev",
        lambda table: change(table.replace_schema_metadata(None)),
    )
    assert f"{path}, {expected}" in printed


def _audit_with_changed_split(biodivergence_folder, tmp_path, capsys, split, change):
    """A copy of the folder whose ``split`` parquet is ``change``d, audited: it fails (exit 1) without a
    traceback and leaves the folder as it was; returns the file, its table before and what was printed."""
    folder = tmp_path / "bd"
    shutil.copytree(biodivergence_folder, folder)
    path = folder / "v1.0" / f"{split}.parquet"
    old = pq.read_table(path)
    pq.write_table(change(old), path)
    before = _files(folder)
    assert main(["biodivergence", "audit", str(folder)]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert _files(folder) == before
    return path, old, captured.out + captured.err


def _extra_column(table):
    return table.append_column("secret_extra", pa.array(["x"] * table.num_rows))


def _columns(table) -> str:
    return str(table.column_names)


@pytest.mark.parametrize(
    ("split", "change", "expected"),
    [
        ("test", lambda table: table.slice(0, 0), lambda old: f": 0 rows, build.json records {old.num_rows}"),
        (
            "train",
            lambda table: table.slice(0, 10),
            lambda old: f": 10 rows, build.json records {old.num_rows}",
        ),
        (
            "train",
            _extra_column,
            lambda old: (
                f": columns {_columns(_extra_column(old))}, expected {_columns(old)} (extra: "
                "['secret_extra'])"
            ),
        ),
        (
            "dev",
            lambda table: table.drop_columns(["reconciliation"]),
            lambda old: (
                f": columns {_columns(old.drop_columns(['reconciliation']))}, expected {_columns(old)} "
                "(missing: ['reconciliation'])"
            ),
        ),
    ],
    ids=["test emptied", "train cut short", "a column added", "a column removed"],
)
def test_a_biodivergence_split_cut_or_with_other_columns_fails_the_audit(
    biodivergence_folder, tmp_path, capsys, split, change, expected
):
    """Before: a test split emptied after the build (build.json records its rows), a train split cut to 10
    rows or an extra column passed the audit: every row left still followed the schema."""
    path, old, printed = _audit_with_changed_split(biodivergence_folder, tmp_path, capsys, split, change)
    assert f"{path}{expected(old)}" in printed


def test_an_amnesia_column_the_layout_does_not_name_fails_the_audit_alike(copy, capsys):
    """The same check (`column_names_problem`) as the BioDivergence audit's."""
    path = copy / FORGET_TRAIN
    old = pq.read_table(path)
    pq.write_table(_extra_column(old), path)
    assert main(["amnesia", "audit", str(copy)]) == 1
    expected = f"columns {_columns(_extra_column(old))}, expected {_columns(old)} (extra: ['secret_extra'])"
    assert _error_line(capsys, "amnesia") == f"FAIL {path}: {expected}"


def test_an_amnesia_split_unlike_its_build_record_fails_the_audit_alike(copy, capsys):
    """Before: the AMNESIA audit never read the row counts amnesia_build.json records, so a split cut after
    the build in a way every other invariant allows passed; the same check (`row_count_problem`) as the
    BioDivergence audit's. Here the record, not the split, is changed: the same disagreement."""
    path, record = copy / FORGET_TRAIN, copy / "amnesia_build.json"
    manifest = json.loads(record.read_text())
    rows = pq.read_metadata(path).num_rows
    manifest["sizes"]["forget_10"]["train"]["rows"] = rows + 5
    record.write_text(json.dumps(manifest))
    assert main(["amnesia", "audit", str(copy)]) == 1
    assert (
        _error_line(capsys, "amnesia") == f"FAIL {path}: {rows} rows, amnesia_build.json records {rows + 5}"
    )


# 3. A card's data_files in every shape datasets reads, and no other.

NOTES_BLOCK = f"- config_name: notes\n  data_files:\n  - split: train\n    path: {NOTES}\n"


@pytest.mark.parametrize(
    "block",
    [
        f"- config_name: notes\n  data_files: {NOTES}\n",
        f"- config_name: notes\n  data_files:\n  - {NOTES}\n",
        f"- config_name: notes\n  data_files:\n  - split: train\n    path:\n    - {NOTES}\n",
    ],
    ids=["a path", "a list of paths", "a split with a list of paths"],
)
def test_every_data_files_shape_datasets_reads_is_read(copy, capsys, block):
    """Before: `amnesia publish` failed with ``TypeError: string indices must be integers`` on a path."""
    readme = copy / "README.md"
    readme.write_text(readme.read_text().replace(NOTES_BLOCK, block), encoding="utf-8")
    assert card_data_files(copy)["notes"] == {"train": [NOTES]}
    assert main(["amnesia", "publish", str(copy), "--repo", "me/amnesia", "--dry-run"]) == 0
    assert NOTES in capsys.readouterr().out


@pytest.mark.parametrize(
    ("data_files", "field", "problem"),
    [
        (
            f"\n    train: {NOTES}\n",
            "data_files",
            "must be a path, a list of paths or a list of {split, path}",
        ),
        (
            "\n  - split: train\n",
            "data_files[0]",
            "must be a mapping with the keys split and path, not the keys split",
        ),
        (
            f"\n  - split: train\n    path: {NOTES}\n  - split: train\n    path: {NOTES}\n",
            "data_files[1].split",
            "split 'train' is given twice",
        ),
        (
            "\n  - split: train\n    path: 3\n",
            "data_files[0].path",
            "must be a path or a list of paths, not 3",
        ),
        (" []\n", "data_files", "must be a path, a list of paths or a list of {split, path} mappings"),
        (
            f"\n  - split: train/x\n    path: {NOTES}\n",
            "data_files[0].split",
            "'train/x' is not a split name",
        ),
    ],
    ids=["a mapping", "no path", "a split twice", "a number", "an empty list", "a bad split name"],
)
def test_a_data_files_shape_datasets_refuses_is_named(copy, capsys, data_files, field, problem):
    """`datasets` refuses these cards with a ValueError when it reads them: named here with the line."""
    readme = copy / "README.md"
    text = readme.read_text().replace(NOTES_BLOCK, f"- config_name: notes\n  data_files:{data_files}")
    readme.write_text(text, encoding="utf-8")
    line = text[: text.index("config_name: notes")].count("\n") + 1
    assert main(["amnesia", "publish", str(copy), "--repo", "me/amnesia", "--dry-run"]) == 2
    error = _error_line(capsys, "amnesia")
    assert f"{readme}, line {line}, field 'configs[0].{field}': {problem}" in error, error


def test_a_tofu_folder_given_to_publish_is_named(tmp_path, capsys):
    """Before: its ``data_files: forget01.json`` (a path) gave a TypeError traceback."""
    folder = tmp_path / "tofu"
    folder.mkdir()
    (folder / "forget01.json").write_text('{"question": "Q?", "answer": "A."}\n')
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: forget01\n  data_files: forget01.json\n---\n"
    )
    assert main(["amnesia", "publish", str(folder), "--repo", "me/amnesia", "--dry-run"]) == 2
    assert "amnesia_build.json' is not a file in" in _error_line(capsys, "amnesia")


# 4. A damaged run.json or examples.parquet under --rescore.

RUN_JSON = '{\n  "name": "model",\n  "outputs": {}\n}\n'


@pytest.mark.parametrize("benchmark", ["amnesia", "tofu", "muse"])
@pytest.mark.parametrize(
    ("file", "text", "expected"),
    [
        ("run.json", RUN_JSON.replace("{", "[", 1), r"run.json, line 2: invalid JSON at column 9"),
        ("run.json", "[]", r"run.json: the file must be an object, not a list"),
        ("run.json", "", r"run.json, line 1: invalid JSON at column 1"),
        ("examples.parquet", "PAR1 cut", r"examples.parquet: is not a readable parquet file"),
    ],
    ids=["corrupt", "a list", "empty", "examples.parquet truncated"],
)
def test_rescore_names_a_damaged_file(tmp_path, capsys, benchmark, file, text, expected):
    """Before: JSONDecodeError / ArrowInvalid tracebacks (TOFU: a KeyError on the missing conventions)."""
    folder = tmp_path / "eval"
    folder.mkdir()
    (folder / "run.json").write_text(RUN_JSON)
    pq.write_table(pa.table({"example_id": ["a"]}), folder / "examples.parquet")
    (folder / file).write_text(text)
    before = _files(folder)
    assert main(["evaluate", "--benchmark", benchmark, "--out", str(folder), "--rescore"]) == 2
    line = _error_line(capsys, "evaluate")
    assert re.search(re.escape(str(folder)) + "/" + expected, line), line
    assert _files(folder) == before


@pytest.mark.parametrize("benchmark", ["tofu", "muse"])
@pytest.mark.parametrize(
    ("conventions", "expected"),
    [
        (None, "field 'conventions': is missing"),
        ("[1]", "field 'conventions': must be an object, not a list"),
        (
            '{"min_k_count": "round"}',
            "field 'conventions': not the conventions of a run (min_k_count must be",
        ),
        (
            '{"stop_strings": 5, "knowmem_stop_strings": 5}',
            "field 'conventions': not the conventions of a run",
        ),
    ],
    ids=["missing", "a list", "a value refused", "a field of the wrong type"],
)
def test_rescore_names_bad_conventions_in_run_json(tmp_path, capsys, benchmark, conventions, expected):
    """Before: TOFU's rescoring was a KeyError or TypeError traceback, MUSE's a KeyError or an error naming
    no file."""
    folder = tmp_path / "eval"
    folder.mkdir()
    record = (
        RUN_JSON if conventions is None else RUN_JSON.replace("{", '{"conventions": ' + conventions + ",", 1)
    )
    (folder / "run.json").write_text(record)
    pq.write_table(pa.table({"example_id": ["a"]}), folder / "examples.parquet")
    before = _files(folder)
    assert main(["evaluate", "--benchmark", benchmark, "--out", str(folder), "--rescore"]) == 2
    line = _error_line(capsys, "evaluate")
    assert f"error: {folder / 'run.json'}, {expected}" in line, line
    assert _files(folder) == before


# 5. and 6. A report of a damaged per_example.parquet, or of one folder given twice.


@pytest.fixture()
def eval_folder(tmp_path) -> Path:
    folder = tmp_path / "eval"
    folder.mkdir()
    cell = {"n": 2, "rouge_l_f1": 0.5, "prob": 0.25, "answer_forgetting": 0.5, "model_utility": 0.4}
    summary = {
        "name": "m",
        "populations": {"forget_seen": {"all": cell}, "retain_same_disease": {"all": cell}},
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def _truncated(path: Path) -> None:
    table = pa.table(
        {"population": ["forget_seen"], "patient_id": ["p"], "qa_type": ["factual"], "similarity": [0.5]}
    )
    pq.write_table(table, path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda path: path.write_bytes(b""), ": is not a readable parquet file (truncated or corrupt?)"),
        (_truncated, ": is not a readable parquet file (truncated or corrupt?)"),
        (
            lambda path: pq.write_table(pa.table({"population": ["forget_seen"]}), path),
            ", field 'patient_id': the column is missing",
        ),
    ],
    ids=["empty", "truncated", "a column missing"],
)
def test_report_names_a_damaged_per_example_file(eval_folder, tmp_path, capsys, damage, expected):
    """Before: pyarrow's ArrowInvalid traceback."""
    path = eval_folder / "per_example.parquet"
    damage(path)
    before, out = _files(eval_folder), tmp_path / "report"
    assert main(["report", str(eval_folder), "--out", str(out), "--resamples", "10"]) == 2
    assert _error_line(capsys, "report").startswith(f"medunlearn report: error: {path}{expected}")
    assert _files(eval_folder) == before and not out.exists()


@pytest.mark.parametrize(
    "second",
    [lambda folder: folder, lambda folder: folder.parent / ".." / folder.parent.name / folder.name, "link"],
    ids=["the same path", "another path to it", "a link to it"],
)
def test_report_refuses_a_folder_given_twice(eval_folder, tmp_path, capsys, second):
    """Before: every row of the folder was in the report twice."""
    if second == "link":
        other = tmp_path / "link"
        os.symlink(eval_folder, other)
    else:
        other = second(eval_folder)
    out = tmp_path / "report"
    assert main(["report", str(eval_folder), str(other), "--out", str(out), "--resamples", "10"]) == 2
    line = _error_line(capsys, "report")
    assert line.startswith(f"medunlearn report: error: EVALDIR {other} is given twice"), line
    assert not out.exists()


# 7. An existing, non-empty --out that is no output of the command: a user's folder, a model, an AMNESIA
# folder.
# `report` wrote its report.json over the user's and its PNGs into a model folder; `evaluate` mixed its files
# in beside a user's. Refused without --overwrite, the folder byte-identical.


def _users_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.txt").write_text("my thesis")
    (folder / "report.json").write_text('{"mine": 1}')
    return folder


NOT_OUTPUTS = {
    "a user's folder": _users_folder,
    "a model folder": lambda tmp_path: tmp_path / "model",  # the `model` fixture's folder
    "an AMNESIA folder": lambda tmp_path: tmp_path / "folder",  # the `copy` fixture's folder
}


@pytest.mark.parametrize("kind", list(NOT_OUTPUTS))
def test_report_refuses_an_existing_folder_without_overwrite(
    eval_folder, model, copy, tmp_path, capsys, kind
):
    out = NOT_OUTPUTS[kind](tmp_path)
    before = _files(out)
    assert main(["report", str(eval_folder), "--out", str(out), "--resamples", "10"]) == 2
    line = _error_line(capsys, "report")
    assert line.startswith(f"medunlearn report: error: --out {out} already exists and holds "), line
    assert "pass --overwrite" in line
    assert _files(out) == before and [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []


def test_report_overwrite_replaces_the_folder_whole(eval_folder, tmp_path, capsys):
    out = _users_folder(tmp_path)
    assert main(["report", str(eval_folder), "--out", str(out), "--resamples", "10", "--overwrite"]) == 0
    assert "thesis.txt" not in _files(out) and json.loads((out / "report.json").read_text())["rows"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["eval", "mine"])  # nothing staged is left


def test_a_failed_report_leaves_the_replaced_folder_as_it_was(eval_folder, tmp_path, capsys):
    out = _users_folder(tmp_path)
    before = _files(out)
    (eval_folder / "per_example.parquet").write_bytes(b"")  # read after --out is checked
    argv = ["report", str(eval_folder), "--out", str(out), "--resamples", "10", "--overwrite"]
    assert main(argv) == 2
    assert "per_example.parquet: is not a readable parquet file" in _error_line(capsys, "report")
    assert _files(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["eval", "mine"]


@pytest.mark.parametrize("kind", list(NOT_OUTPUTS))
@pytest.mark.parametrize("command", ["evaluate", "tofu evaluate"])
def test_evaluate_refuses_a_non_empty_folder_that_is_no_evaluation(
    model, copy, tmp_path, capsys, kind, command
):
    """An evaluation resumes in its --out: only a folder holding its run.json, or the outputs/ of a killed
    run (tests/test_kill_and_resume.py), is continued without --overwrite."""
    out = NOT_OUTPUTS[kind](tmp_path)
    if out in (model, copy):  # --out is --model or --data: refused as an input whatever it holds; a copy
        out = shutil.copytree(out, tmp_path / "another")
    before = _files(out)
    forget = "forget_10" if command == "evaluate" else "forget10"
    argv = [*command.split(), "--model", str(model), "--data", str(copy), "--forget", forget]
    assert main([*argv, "--out", str(out)]) == 2
    line = _error_line(capsys, command.split()[0])
    assert f"error: --out {out} holds no evaluation (no run.json, no outputs/) but " in line, line
    assert "pass --overwrite" in line and _files(out) == before
