"""A data folder a command reads, damaged the way a careless edit damages it: each is one named error (the
file, and the row or field at fault), exit 2, before a model is loaded."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from medunlearn.cli import main
from medunlearn.errors import FileContentError
from medunlearn.utils import user_files

FORGET_TRAIN = "data/forget_10/train-00000-of-00001.parquet"


@pytest.fixture()
def model(tmp_path) -> Path:
    """A folder that passes for a model until its weights are loaded (every refusal here comes first)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    return folder


def _evaluate(model: Path, data: Path, out: Path) -> list[str]:
    return [
        "evaluate",
        "--model",
        str(model),
        "--data",
        str(data),
        "--forget",
        "forget_10",
        "--out",
        str(out),
    ]


def _one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("medunlearn")]
    assert (
        "Traceback" not in err and len(lines) == 1 and lines[0].startswith(f"medunlearn {command}: error:")
    ), err
    return lines[0]


def test_a_parquet_column_name_given_twice_is_named(tmp_path):
    """Before: `read_parquet` returned the table (pandas and datasets keep one of the two columns, pyarrow
    cannot select either)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([1]), pa.array(["a"])], names=["x", "x"]), path)
    for read in (user_files.read_parquet, user_files.parquet_schema):
        with pytest.raises(
            FileContentError, match=r"train.parquet, field 'x': the column name appears twice"
        ):
            read(path)


def test_a_data_file_with_a_column_name_given_twice_is_one_named_error(
    amnesia_folder, tmp_path, capsys, model
):
    """Before: `evaluate` was a KeyError traceback ('Column answer does not exist in schema') and the
    audit a failed invariant (exit 1) listing both column lists; the BioDivergence audit printed the whole
    schema (21 lines)."""
    import pyarrow.parquet as pq

    data = tmp_path / "amnesia"
    shutil.copytree(amnesia_folder, data)
    table = pq.read_table(data / FORGET_TRAIN)
    pq.write_table(table.append_column("answer", table.column("question")), data / FORGET_TRAIN)
    message = r"forget_10/train-00000-of-00001.parquet, field 'answer': the column name appears twice"
    assert main(_evaluate(model, data, tmp_path / "eval")) == 2
    assert re.search(message, _one_error_line(capsys, "evaluate"))
    assert not (tmp_path / "eval").exists()
    assert main(["amnesia", "audit", str(data)]) == 2
    assert re.search(message, _one_error_line(capsys, "amnesia"))


def test_a_data_file_that_is_a_symbolic_link_loop_is_named(amnesia_folder, tmp_path, capsys, model):
    """Before: a RuntimeError traceback ("Symlink loop from ...") from the card's path check, in the audit and
    in `evaluate`."""
    data = tmp_path / "amnesia"
    shutil.copytree(amnesia_folder, data)
    (data / FORGET_TRAIN).unlink()
    (data / FORGET_TRAIN).symlink_to((data / FORGET_TRAIN).name)
    message = (
        rf"{re.escape(str(data / FORGET_TRAIN))}: is a symbolic link that loops back on itself "
        rf"\({re.escape(str(data / 'README.md'))}, line \d+\)"
    )
    assert main(["amnesia", "audit", str(data)]) == 2
    assert re.search(message, _one_error_line(capsys, "amnesia"))
    assert main(_evaluate(model, data, tmp_path / "eval")) == 2
    assert re.search(message, _one_error_line(capsys, "evaluate"))


def test_a_file_given_as_a_link_to_nothing_is_named_as_a_link(tmp_path):
    """Before: "no such file", though the file is there, as a link that loops or whose target is gone."""
    loop, dangling = tmp_path / "loop.jsonl", tmp_path / "dangling.jsonl"
    loop.symlink_to(loop.name)
    dangling.symlink_to(tmp_path / "gone.jsonl")
    for path in (loop, dangling):
        with pytest.raises(FileContentError, match=rf"{path.name}: is a symbolic link that leads to no file"):
            user_files.read_text(path)


NOTE = (
    "A 61-year-old man had crushing chest pain. Troponin was raised. Angiography showed an occluded artery."
)


def test_a_csv_header_that_names_a_column_twice_is_named(tmp_path, capsys):
    """Before: accepted, each row keeping the later column's value (an empty one was refused as "empty
    value" of the first, a non-empty one was used without a word)."""
    notes, qa = tmp_path / "notes.csv", tmp_path / "qa.jsonl"
    notes.write_text(
        "patient_uid,title,patient,age,gender,patient\n"
        f'1-1,Myocardial infarction,"{NOTE}","[[61.0, \'year\']]",M,"Another note."\n'
    )
    qa.write_text('{"patient_id": "1-1", "qa_type": "factual", "question": "Q?", "answer": "A."}\n')
    argv = ["amnesia", "build", "--source", "pmc-patients", "--notes", str(notes), "--qa", str(qa)]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert (
        f"{notes}, line 1, field 'patient': the header names this column twice (columns 3 and 6)"
        in _one_error_line(capsys, "amnesia")
    )
    abstracts = tmp_path / "abstracts.csv"
    abstracts.write_text("pmid,title,abstract,title\n1,Vitamin D,Background: we studied it.,Other\n")
    assert (
        main(["biodivergence", "mine", "--abstracts", str(abstracts), "--out", str(tmp_path / "pool")]) == 2
    )
    assert f"{abstracts}, line 1, field 'title': the header names this column twice (columns 2 and 4)" in (
        _one_error_line(capsys, "biodivergence")
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / "pool").exists()


def _with_null(data: Path, relative: str, field: str, row: int, value: str | None = None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(data / relative)
    values = table[field].to_pylist()
    values[row - 1] = value
    pq.write_table(
        table.set_column(table.schema.get_field_index(field), field, pa.array(values)), data / relative
    )


@pytest.mark.parametrize(
    ("relative", "field", "argv"),
    [
        ("data/notes/train-00000-of-00001.parquet", "note", ["finetune"]),
        (
            "data/notes/train-00000-of-00001.parquet",
            "note",
            ["unlearn", "--method", "grad_diff", "--forget", "forget_10", "--forget-on", "notes"],
        ),
        (FORGET_TRAIN, "answer", ["unlearn", "--method", "grad_diff", "--forget", "forget_10"]),
        ("data/full/train-00000-of-00001.parquet", "question", ["finetune"]),
    ],
)
def test_a_null_text_a_command_would_train_on_is_named(
    amnesia_folder, tmp_path, capsys, model, relative, field, argv
):
    """Before: a null note or answer was trained as the text "None" (the document "<title>\\nNone")."""
    data = tmp_path / "amnesia"
    shutil.copytree(amnesia_folder, data)
    _with_null(data, relative, field, row=3)
    out = tmp_path / "out"
    assert main([*argv, "--model", str(model), "--data", str(data), "--out", str(out)]) == 2
    line = _one_error_line(capsys, argv[0])
    assert line.endswith(f"{data / relative}, row 3, field '{field}': expected text, got None"), line
    assert not out.exists()


def test_a_nul_character_in_a_built_split_is_named_as_in_a_source_file(
    amnesia_folder, tmp_path, capsys, model
):
    """Before: a NUL inside a built split's answer (refused in AMNESIA's source files) was trained on."""
    data = tmp_path / "amnesia"
    shutil.copytree(amnesia_folder, data)
    _with_null(data, FORGET_TRAIN, "answer", row=2, value="An answer\x00 cut")
    out = tmp_path / "out"
    argv = ["unlearn", "--method", "grad_diff", "--forget", "forget_10"]
    assert main([*argv, "--model", str(model), "--data", str(data), "--out", str(out)]) == 2
    line = _one_error_line(capsys, "unlearn")
    assert line.endswith(
        f"{data / FORGET_TRAIN}, row 2, field 'answer': holds a NUL character (\\u0000) at character 10: "
        "no text holds one"
    ), line
    assert not out.exists()


@pytest.mark.parametrize(
    ("relative", "field"),
    [("data/notes/train-00000-of-00001.parquet", "note"), (FORGET_TRAIN, "answer")],
)
def test_the_audit_names_a_null_text(amnesia_folder, tmp_path, capsys, relative, field):
    """Before: `amnesia audit` read only the id and disease columns and passed a folder with a null note."""
    data = tmp_path / "amnesia"
    shutil.copytree(amnesia_folder, data)
    assert main(["amnesia", "audit", str(data)]) == 0
    capsys.readouterr()
    _with_null(data, relative, field, row=2)
    assert main(["amnesia", "audit", str(data)]) == 1
    assert f"{data / relative}, row 2, field '{field}': expected text, got None" in capsys.readouterr().err
