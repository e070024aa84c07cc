"""Careless-user inputs of the issue-22 review, through the commands: a count past its bound, an audit of
something that is no dataset folder, a file where a folder belongs, a data column of the wrong type. Each is
exit 2 (an audit that reads the folder and finds a violation: 1) with a message naming the option, or the
file, row and field, never a traceback or a numpy repr, and no output folder written."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from medunlearn.cli import main
from medunlearn.errors import InputError
from medunlearn.utils.numbers import checked_numbers, positive_int

HUGE = "99999999999999999999"  # past int64: numpy overflowed on it


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["amnesia", "build", "--patients", HUGE], "--patients: must be a whole number from 1 to 100,000"),
        (["amnesia", "build", "--patients", "1000000000"], "--patients: must be a whole number from 1 to"),
        (["amnesia", "build", "--patients", "1" + "0" * 400], "--patients: must be a whole number from 1"),
        (["amnesia", "build", "--seed", HUGE], "--seed: must be a whole number from 0 to 4,294,967,295"),
        (["biodivergence", "mine", "--abstracts", "a.csv", "--seed", HUGE], "--seed: must be a whole number"),
        (["tofu", "build", "--authors", "99"], "--authors: must be a whole number from 2 to 98"),
        (["tofu", "build", "--qa-per-author", "6"], "--qa-per-author: must be a whole number from 1 to 5"),
        (["tofu", "build", "--perturbed", "6"], "--perturbed: must be a whole number from 1 to 5"),
        (["muse", "build", "--articles", "11"], "--articles: must be a whole number from 5 to 10"),
    ],
)
def test_a_count_past_its_bound_is_refused_when_parsed(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"error: argument {message}" in err, err
    assert "Traceback" not in err and not out.exists()


def test_the_shared_whole_number_check_takes_a_number_past_a_float():
    """math.isfinite() of a 401-digit int overflowed converting it to a float (a traceback)."""
    assert positive_int("1" + "0" * 400) == 10**400


def test_a_study_files_cohort_is_bounded_like_the_option():
    from medunlearn.study.config import BUILD_NUMBERS

    with pytest.raises(
        InputError, match=r"key 'data.build.patients': must be a whole number from 1 to 100,000"
    ):
        checked_numbers(
            {"patients": 10**20}, BUILD_NUMBERS, lambda field: f"s.yaml: key 'data.build.{field}'"
        )


def test_a_verbmem_prompt_longer_than_the_articles_is_named():
    """An empty verbmem continuation scored every model as a perfect copy, without a word."""
    from medunlearn.muse.build import build_muse_configs

    with pytest.raises(InputError, match=r"prompt_words \(--prompt-words\) must leave a continuation: 1000"):
        build_muse_configs(articles=5, prompt_words=1000)


# -- medunlearn amnesia audit: 2 for what is no AMNESIA folder, 1 for a violation found in one ---------------


@pytest.fixture(scope="module")
def amnesia_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("careless") / "amnesia"
    assert main(["amnesia", "build", "--out", str(out), "--patients", "20", "--seed", "0"]) == 0
    return out


def _copy(folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    return copy


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda copy: copy / "README.md", r"AMNESIA folder \S+README.md: is a file, not a folder"),
        (lambda copy: copy / "absent", r"AMNESIA folder \S+absent does not exist"),
        (lambda copy: copy / "data", r"data: no README.md \(not a Hub dataset folder"),
        (
            lambda copy: (copy / "data/full/train-00000-of-00001.parquet").unlink() or copy,
            r"full/train-00000-of-00001.parquet: listed in README.md for full/train but missing",
        ),
    ],
)
def test_an_audit_of_no_amnesia_folder_is_a_usage_error(amnesia_folder, tmp_path, capsys, make, message):
    target = make(_copy(amnesia_folder, tmp_path))
    assert main(["amnesia", "audit", str(target)]) == 2
    err = capsys.readouterr().err
    assert "medunlearn amnesia: error: " in err and "FAIL" not in err, err
    assert re.search(message, err), err


def _rewrite_column(path: Path, column: str, values) -> None:
    table = pq.read_table(path)
    table = table.set_column(table.schema.get_field_index(column), column, values)
    pq.write_table(table, path)


def test_an_audit_violation_is_exit_1_naming_file_row_and_field_in_plain_values(
    amnesia_folder, tmp_path, capsys
):
    copy = _copy(amnesia_folder, tmp_path)
    path = copy / "data/forget_5/train-00000-of-00001.parquet"
    ids = pq.read_table(path)["patient_id"].to_pylist()
    _rewrite_column(path, "patient_id", pa.array([ids[0], "0", *ids[2:]]))
    assert main(["amnesia", "audit", str(copy)]) == 1
    err = capsys.readouterr().err
    assert f"FAIL {path}, row 2, field 'patient_id': qa '" in err, err
    assert f"has '0' but full/train says '{ids[1]}'" in err and "np." not in err, err


def test_the_audit_help_documents_its_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["amnesia", "audit", "--help"])
    printed = capsys.readouterr().out
    assert "exit status:" in printed and "1  the folder was read and an invariant does not hold" in printed
    assert "2  usage error: the folder is missing or a file" in printed


# -- a file where a folder belongs, and the reverse ----------------------------------------------------------


@pytest.fixture()
def model_folder(tiny_model, tiny_tokenizer, tmp_path) -> Path:
    folder = tmp_path / "model"
    tiny_model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def test_a_file_given_for_a_folder_is_named_as_a_file(tmp_path, capsys, model_folder):
    file = tmp_path / "qa.jsonl"
    file.write_text("{}\n")
    assert main(["muse", "check", "--data", str(file)]) == 2
    assert f"MUSE folder {file}: is a file, not a folder" in capsys.readouterr().err
    assert main(["study", str(tmp_path), "--validate"]) == 2
    assert f"study file {tmp_path}: is a folder, not a file" in capsys.readouterr().err
    out = tmp_path / "eval"
    argv = ["evaluate", "--model", str(model_folder), "--data", str(file), "--forget", "forget_10"]
    assert main([*argv, "--out", str(out)]) == 2
    assert f"AMNESIA folder {file}: is a file, not a folder" in capsys.readouterr().err
    assert not out.exists()


# -- medunlearn evaluate on a data column of the wrong type --------------------------------------------------


@pytest.mark.parametrize(
    ("splits", "column", "values", "message"),
    [
        # One split's answers are numbers, the other's text: datasets stopped with "Failed to parse string".
        (("train",), "answer", lambda n: pa.array([1.5] * n), "row 1, field 'answer': holds numbers where "),
        # Every split's questions are numbers: datasets read them without a word, into the prompts.
        (
            ("train", "holdout"),
            "question",
            lambda n: pa.array(range(n)),
            "row 1, field 'question': expected text",
        ),
    ],
)
def test_evaluate_names_the_file_row_and_field_of_a_wrongly_typed_column(
    amnesia_folder, tmp_path, capsys, model_folder, splits, column, values, message
):
    copy = _copy(amnesia_folder, tmp_path)
    for split in splits:
        path = copy / f"data/forget_10/{split}-00000-of-00001.parquet"
        _rewrite_column(path, column, values(pq.read_metadata(path).num_rows))
    out = tmp_path / "eval"
    argv = ["evaluate", "--model", str(model_folder), "--data", str(copy), "--forget", "forget_10"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{copy / 'data/forget_10/train-00000-of-00001.parquet'}, {message}" in err, err
    assert "Traceback" not in err and not out.exists()


# -- biodivergence mine / build: a failure after stage files were written says which were kept, and where ---

UNREACHABLE = "openai:m@http://127.0.0.1:9/v1"  # nothing listens on the discard port


def _stages_then_unreachable(out: Path) -> None:
    """What a mining run does before its labels stage meets a server that is down."""
    from medunlearn.llm.openai_backend import OpenAIServerBackend

    out.mkdir(parents=True, exist_ok=True)
    for name in ("abstracts.jsonl", "claims.jsonl"):
        (out / name).write_text("{}\n")
    OpenAIServerBackend.from_spec(UNREACHABLE).check_ready()


def test_a_failed_mine_names_the_stage_files_it_kept(tmp_path, capsys, monkeypatch):
    from medunlearn.biodivergence import mining

    monkeypatch.setattr(
        mining, "mine_pool", lambda paths, out, *args, **kwargs: _stages_then_unreachable(out)
    )
    (tmp_path / "abstracts.csv").write_text("pmid,title,abstract\n1,T,A.\n")
    out = tmp_path / "mined"
    argv = ["biodivergence", "mine", "--abstracts", str(tmp_path / "abstracts.csv"), "--out", str(out)]
    assert main([*argv, "--labeller", UNREACHABLE]) == 2
    err = capsys.readouterr().err
    assert f"the outputs computed so far are kept in {out} (abstracts.jsonl, claims.jsonl)" in err, err
    assert "cannot reach the LLM server at http://127.0.0.1:9/v1" in err and "written" not in err, err


def test_a_failed_build_from_abstracts_names_the_mining_folder_it_kept(tmp_path, capsys, monkeypatch):
    from medunlearn.biodivergence import build

    def failing_build(out, source, **kwargs):
        _stages_then_unreachable(build.mine_dir_for(out, source))

    monkeypatch.setattr(build, "build_biodivergence", failing_build)
    (tmp_path / "abstracts.csv").write_text("pmid,title,abstract\n1,T,A.\n")
    out = tmp_path / "bd"
    argv = ["biodivergence", "build", "--abstracts", str(tmp_path / "abstracts.csv"), "--out", str(out)]
    assert main([*argv, "--labeller", UNREACHABLE]) == 2
    err = capsys.readouterr().err
    assert f"kept in {tmp_path / 'bd-mining'} (abstracts.jsonl, claims.jsonl)" in err, err
    assert "written" not in err and not out.exists(), err
