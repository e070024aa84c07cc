"""Careless-user inputs of the issue-22 review, through the commands: a count past its bound, an audit of
something that is no dataset folder, a file where a folder belongs, a data column of the wrong type. Each is
exit 2 (an audit that reads the folder and finds a violation: 1) with a message naming the option, or the
file, row and field, never a traceback or a numpy repr, and no output folder written."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_checks import refused_when_parsed

from medunlearn.cli import main
from medunlearn.errors import InputError
from medunlearn.utils.numbers import MAX_COUNT, checked_numbers, non_negative_int, positive_int

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
def test_a_count_past_its_bound_isrefused_when_parsed(tmp_path, capsys, argv, message):
    refused_when_parsed(tmp_path, capsys, argv, message)


def test_the_shared_whole_number_check_names_a_number_past_a_float():
    """math.isfinite() of a 401-digit int overflowed converting it to a float (a traceback)."""
    with pytest.raises(argparse.ArgumentTypeError, match="must be at most 1,000,000,000, got"):
        positive_int("1" + "0" * 400)


@pytest.mark.parametrize("check", [positive_int, non_negative_int])
def test_a_count_without_a_bound_of_its_own_has_the_general_one(check):
    """Before: 2**63 - 1 was accepted (the largest integer numpy holds) and reached an allocation or loop."""
    assert check(str(MAX_COUNT)) == MAX_COUNT
    with pytest.raises(
        argparse.ArgumentTypeError, match=r"must be at most 1,000,000,000, got '9223372036854775807'"
    ):
        check(str(2**63 - 1))


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


# -- issue 22 leftovers: numbers past their bound, Ctrl-C, unwritable and misplaced output folders


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["biodivergence", "build", "--synthetic", "--pairs", HUGE],
            "--pairs: must be at most 200,000, got",
        ),
        (
            ["biodivergence", "compare", "--data", "d", "--resamples", HUGE],
            "--resamples: must be at most 10,000, got",
        ),
        (["report", "e", "--resamples", "100000000"], "--resamples: must be at most 10,000, got"),
        (["evaluate", "--max-new-tokens", HUGE], "--max-new-tokens: must be at most 32,768, got"),
        (
            ["biodivergence", "eval", "--data", "d", "--max-new-tokens", HUGE],
            "--max-new-tokens: must be at most 32,768",
        ),
        (
            ["evaluate", "--batch-size", HUGE],
            "--batch-size: must be at most 65,536 or 'auto', got",
        ),
        (["unlearn", "--lora-r", HUGE], "--lora-r: must be at most 16,384, got"),
        (["finetune", "--qa-epochs", "1e300"], "--qa-epochs: must be at most 10,000, got"),
        (
            ["attack", "--relearn-steps", f"5,{HUGE}"],
            "--relearn-steps: comma-separated step counts: must be at most 10,000,000",
        ),
        (
            ["report", "e", "--resamples", "1" + "0" * 400],
            "--resamples: must be at most 10,000, got",
        ),
        (["biodivergence", "eval", "--data", "d", "--limit", HUGE], "--limit: must be at most 1,000,000,000"),
        (["amnesia", "build", "--sample", str(2**63 - 1)], "--sample: must be at most 1,000,000,000"),
        (
            ["biodivergence", "mine", "--abstracts", "a", "--neighbours", str(2**63 - 1)],
            "--neighbours: must be at",
        ),
        (
            ["evaluate", "--max-retain-patients", str(2**63 - 1)],
            "--max-retain-patients: must be at most 1,000,",
        ),
    ],
)
def test_a_count_that_sizes_a_run_is_bounded_when_parsed(tmp_path, capsys, argv, message):
    """Each of these was a numpy or torch traceback, an out-of-memory error or a run without end."""
    refused_when_parsed(tmp_path, capsys, argv, message)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        # The data loader's islice() refused a batch past sys.maxsize, with a traceback.
        (
            ["--per_device_train_batch_size", HUGE],
            "--per_device_train_batch_size must be at most 65,536, got",
        ),
        (
            ["--max_steps", HUGE],
            "--max_steps must be at most 10,000,000, got",
        ),
        # TRL's parser printed its usage under the name `__main__.py`, without the command's prefix.
        (["--learning_rate", "abc"], "argument --learning_rate/--learning-rate: invalid float value: 'abc'"),
    ],
)
def test_a_trainer_override_is_refused_as_the_commands_own_error(tmp_path, capsys, override, message):
    out = tmp_path / "unlearned"
    argv = ["unlearn", "--method", "grad_diff", "--model", "tiny-llama", "--data", str(tmp_path / "data")]
    assert main([*argv, "--forget", "forget_10", "--out", str(out), *override]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"medunlearn unlearn: error: {message}"), err
    assert "(from the command line)" in err and "usage:" not in err and not out.exists()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            ["--num_train_epochs", "1"],
            "--notes-epochs (stage 1, the notes) and --qa-epochs (stage 2, the QA)",
        ),
        (["--num-train-epochs=2"], "--notes-epochs (stage 1, the notes) and --qa-epochs (stage 2, the QA)"),
        (["--num_train_ep", "1"], "--notes-epochs"),  # an abbreviation argparse takes
        (["--output_dir", "elsewhere"], "the model goes to --out"),
    ],
)
def test_finetune_refuses_a_setting_each_stage_sets_itself(
    amnesia_folder, tmp_path, capsys, override, message
):
    """Before: --num_train_epochs 1 was accepted and ignored (3.0 QA epochs trained), the card said 1.0."""
    out = tmp_path / "finetuned"
    argv = ["finetune", "--model", "tiny-llama", "--data", str(amnesia_folder), "--out", str(out)]
    assert main([*argv, "--notes-epochs", "0", *override]) == 2
    err = capsys.readouterr().err
    name = "--output_dir" if "output" in override[0] else "--num_train_epochs"
    assert err.startswith(f"medunlearn finetune: error: {name} is not an option of finetune: "), err
    assert message in err and "Traceback" not in err and not out.exists()


def test_ctrl_c_is_one_line_exit_130_and_leaves_the_previous_folder_whole(
    amnesia_folder, tmp_path, capsys, monkeypatch
):
    """A KeyboardInterrupt was a traceback; the staged folder is removed on the way up."""
    from medunlearn.amnesia import hub

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    out = _copy(amnesia_folder, tmp_path)
    before = sorted(path.relative_to(out) for path in out.rglob("*"))
    monkeypatch.setattr(hub, "render_card", interrupted)  # called once every parquet file is staged
    argv = ["amnesia", "build", "--out", str(out), "--patients", "20", "--overwrite"]
    assert main(argv) == 130
    assert capsys.readouterr().err.splitlines()[-1:] == ["medunlearn amnesia: interrupted"]
    assert sorted(path.relative_to(out) for path in out.rglob("*")) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["copy"]  # no staging folder beside it


@pytest.fixture()
def unwritable(tmp_path) -> Path:
    """A folder in which no file can be created: read-only for a user, immutable (chattr +i) for root."""
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    immutable = False
    try:
        (folder / "probe").touch()  # root ignores permissions
    except PermissionError:
        pass
    else:
        (folder / "probe").unlink()
        immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
        if not immutable:
            folder.chmod(0o755)
            pytest.skip("no way to make a folder unwritable here (root without chattr)")
    yield folder
    if immutable:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    folder.chmod(0o755)


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "e"],
        ["evaluate", "--model", "tiny-llama", "--data", "d", "--forget", "forget_10"],
        ["tofu", "evaluate", "--model", "tiny-llama", "--data", "d"],
        ["biodivergence", "eval", "--data", "d", "--baseline", "lexical"],
        ["biodivergence", "compare", "--data", "d"],
        ["attack", "--model", "tiny-llama", "--before", "tiny-llama", "--data", "d", "--forget", "forget_10"],
    ],
)
def test_an_unwritable_out_is_named_before_any_work(unwritable, capsys, argv):
    """Each of these wrote as it went and met a PermissionError traceback (after the models ran)."""
    out = unwritable / "out"
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"error: cannot write --out {out}: " in err and "Traceback" not in err, err


def test_overwriting_an_immutable_folder_is_named_and_leaves_nothing_beside_it(unwritable, tmp_path):
    """The swap's first rename failed: a .old-* folder stayed beside it, with a traceback."""
    from medunlearn.utils.files import output_folder

    if os.access(unwritable.parent, os.W_OK) is False:
        pytest.skip("the parent must stay writable")
    with pytest.raises(InputError, match=f"cannot replace {unwritable}: "):
        with output_folder(unwritable, overwrite=True) as staging:
            (staging / "new.txt").write_text("new")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["locked"]


def _fake_evaluation(tmp_path: Path) -> Path:
    folder = tmp_path / "eval"
    (folder / "outputs" / "model").mkdir(parents=True)
    (folder / "outputs" / "model" / "generation-00000.parquet").write_bytes(b"PAR1")
    (folder / "summary.json").write_text("{}")
    return folder


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("", "--out is empty: name the folder to write"),
        ("file.txt", "--out file.txt is a file, not a folder"),
        ("file.txt/sub", "--out file.txt/sub lies below "),
        ("eval/outputs", "--out eval/outputs is eval/outputs, which holds model/ (an evaluation's files"),
        ("eval/outputs/new", "--out eval/outputs/new lies inside eval/outputs, which holds model/"),
        ("eval/outputs/model", "--out eval/outputs/model lies inside eval/outputs, which holds model/"),
    ],
)
def test_a_report_out_that_is_a_file_or_among_an_evaluations_outputs_is_named(
    tmp_path, capsys, monkeypatch, out, message
):
    """A file was a FileExistsError traceback; "" wrote into the current folder; a report landed among the
    outputs an evaluation resumes from."""
    monkeypatch.chdir(tmp_path)
    _fake_evaluation(tmp_path)
    (tmp_path / "file.txt").write_text("x")
    before = sorted(tmp_path.rglob("*"))
    assert main(["report", "eval", "--out", out]) == 2
    err = capsys.readouterr().err
    assert f"medunlearn report: error: {message}" in err and "Traceback" not in err, err
    assert sorted(tmp_path.rglob("*")) == before


def test_a_report_may_go_into_a_new_folder_or_a_report_folder_of_an_evaluation(tmp_path):
    from medunlearn.cli.report import _check_out
    from medunlearn.errors import OutputExistsError

    evaluation = _fake_evaluation(tmp_path)
    (evaluation / "report").mkdir()
    (evaluation / "report" / "report.json").write_text("{}")
    for out in (evaluation / "figures", tmp_path / "elsewhere"):
        _check_out(str(out), [str(evaluation)])  # no error
    # an earlier report is replaced only when asked: the report replaces its folder whole
    _check_out(str(evaluation / "report"), [str(evaluation)], overwrite=True)
    with pytest.raises(OutputExistsError, match="pass --overwrite"):
        _check_out(str(evaluation / "report"), [str(evaluation)])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--synthetic", "--save-pool", "{out}/pool.jsonl"],
            "--save-pool {out}/pool.jsonl lies inside --out",
        ),
        (
            ["--abstracts", "a.csv", "--mine-dir", "{out}"],
            "--mine-dir {out} is --out {out}: give each its own",
        ),
        (
            ["--abstracts", "a.csv", "--mine-dir", "{out}/m"],
            "--mine-dir {out}/m lies inside --out {out}, which",
        ),
    ],
)
def test_what_a_build_writes_beside_its_folder_may_not_lie_inside_it(tmp_path, capsys, flags, message):
    """The staged folder replaced --out whole: a saved pool inside it was lost without a word, and a mining
    folder equal to --out ended in a FileNotFoundError traceback (timings.json)."""
    out = tmp_path / "bd"
    argv = ["biodivergence", "build", "--out", str(out), *(flag.format(out=out) for flag in flags)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"medunlearn biodivergence: error: {message.format(out=out)}" in err, err
    assert not out.exists()


def test_a_recipe_given_as_a_folder_is_named_as_a_folder(tmp_path, capsys):
    assert main(["unlearn", "--config", str(tmp_path)]) == 2
    assert f"medunlearn unlearn: error: recipe {tmp_path} is a folder, not a file" in capsys.readouterr().err


def test_a_retain_set_equal_to_the_forget_set_is_refused(tmp_path, capsys):
    from medunlearn.unlearn.errors import UnlearningInputError
    from medunlearn.unlearn.run import UnlearningDataArguments

    with pytest.raises(
        UnlearningInputError, match="--retain forget_10 is the --forget config: give another one"
    ):
        UnlearningDataArguments(str(tmp_path), "forget_10", "forget_10")
    shared = tmp_path / "shared"
    argv = ["evaluate", "--model", "tiny-llama", "--data", "d", "--forget", "forget_10", "--out", "e"]
    assert main([*argv, "--before-outputs", str(shared), "--retain-outputs", str(shared)]) == 2
    err = capsys.readouterr().err
    assert f"error: --retain-outputs {shared} is --before-outputs {shared}: " in err, err
    assert not shared.exists()


def test_a_study_inside_its_data_folder_is_refused_before_it_writes(tmp_path, capsys):
    """study.json, study.log and finetune/ were written into the data folder before a stage refused."""
    data = tmp_path / "amnesia"
    data.mkdir()
    (data / "README.md").write_text("an AMNESIA folder")
    study = tmp_path / "s.yaml"
    study.write_text(
        "name: t\nmodel: tiny-llama\ndata: {path: amnesia}\nmethods: {grad_diff: {max_steps: 1}}\n"
        "forget: [forget_10]\nseeds: [0]\n"
    )
    assert main(["study", str(study), "--out", str(data / "run")]) == 2
    err = capsys.readouterr().err
    assert f"error: --out {data / 'run'} lies inside {study}'s data.path {data}: " in err, err
    assert sorted(path.name for path in data.iterdir()) == ["README.md"]


# -- medunlearn amnesia audit: 2 for what is no AMNESIA folder, 1 for a violation found in one ---------------


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


def test_max_new_tokens_past_the_models_context_is_refused_where_generation_starts(
    tiny_model, tiny_tokenizer
):
    """Before: 5,000 new tokens for a model of 1,024 positions was accepted (noise, or an attention
    traceback, after the run had started)."""
    from medunlearn.evaluation.engines import make_engine
    from medunlearn.evaluation.runner import RunnerConfig
    from medunlearn.generation import generate_texts

    message = r"--max-new-tokens 5,000 is more than the 1,024 tokens of .*context"
    with pytest.raises(InputError, match=message):
        make_engine(RunnerConfig(max_new_tokens=5000), tiny_model)
    with pytest.raises(InputError, match=message):
        generate_texts(tiny_model, tiny_tokenizer, ["Which drug?"], max_new_tokens=5000)
    assert make_engine(RunnerConfig(max_new_tokens=1024), tiny_model) is not None
