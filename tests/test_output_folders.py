"""The one way a command writes its output folder (medunlearn.utils.files.output_folder): refused over an
input or an existing folder, staged beside the target, and the staging of killed runs removed by the next
run. Table-driven over the ways an --out can be wrong; `amnesia build` end to end."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from medunlearn.cli import main
from medunlearn.errors import InputError, OutputExistsError
from medunlearn.utils import files
from medunlearn.utils.files import check_output_folder, output_folder, remove_stale_staging, staged_folder


def checksums(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path -> SHA-256), for "unchanged" asserts."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def stale_staging(out: Path, kind: str = "partial", pid: int | None = None, host: str | None = None) -> Path:
    """A staging folder beside ``out`` as a killed run leaves it (named after its process and machine)."""
    pid = dead_pid() if pid is None else pid
    host = files._host_tag() if host is None else host
    path = out.parent / f".{out.name}.{kind}-{pid}-{host}-abc123"
    path.mkdir(parents=True)
    (path / "half-written.parquet").write_bytes(b"PAR1")
    return path


@pytest.fixture()
def model_dir(tmp_path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "config.json").write_text("{}")
    return folder


# (how the --out is given relative to the input folder, the message part)
INPUT_CASES = [
    (lambda model: model, "is the --model folder"),
    (lambda model: model / "unlearned", "lies inside --model"),
    (lambda model: model / "deep" / "er", "lies inside --model"),
    (lambda model: model.parent, "contains --model"),
    (lambda model: model / ".." / "model", "is the --model folder"),
]


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("out_of, message", INPUT_CASES)
def test_an_output_over_an_input_is_refused_even_with_overwrite(model_dir, out_of, message, overwrite):
    before = checksums(model_dir)
    with pytest.raises(InputError, match=message):
        with output_folder(out_of(model_dir), overwrite=overwrite, inputs={"--model": str(model_dir)}):
            raise AssertionError("nothing may be staged")
    assert checksums(model_dir) == before
    assert sorted(p.name for p in model_dir.parent.iterdir()) == ["model"]  # no staging left


def test_a_symlink_to_the_input_is_the_input(model_dir, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(model_dir)
    with pytest.raises(InputError, match="is the --model folder"):
        check_output_folder(link, overwrite=True, inputs={"--model": str(model_dir)})


def test_hub_ids_and_absent_inputs_are_not_paths(tmp_path):
    out = tmp_path / "out"
    assert check_output_folder(out, inputs={"--model": "org/name", "--data": None}) == out


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda tmp: tmp / "a-file", "is a file, not a folder"),
        (lambda tmp: tmp / "a-file" / "out", "lies below .*a-file, which is a file"),
        (lambda tmp: Path.cwd(), "is the current folder"),
        (lambda tmp: Path.cwd().parent, "is the current folder or holds it"),
        (lambda tmp: Path("."), "is the current folder"),
    ],
)
def test_impossible_places_are_refused(tmp_path, make, message):
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(InputError, match=message):
        check_output_folder(make(tmp_path), overwrite=True)


def test_an_existing_folder_needs_overwrite_but_an_empty_one_does_not(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "README.md").write_text("old card")
    with pytest.raises(OutputExistsError, match="--overwrite"):
        check_output_folder(full)
    assert check_output_folder(full, overwrite=True) == full
    (tmp_path / "empty").mkdir()
    with output_folder(tmp_path / "empty") as staging:
        (staging / "new.txt").write_text("new")
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == ["new.txt"]


def test_a_replaced_folder_holds_only_the_new_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "unlearning_config.json").write_text("{}")
    with output_folder(out, overwrite=True) as staging:
        (staging / "model.safetensors").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_folder_that_appeared_during_the_run_is_kept_without_overwrite(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(OutputExistsError):
        with output_folder(out) as staging:
            (staging / "new.txt").write_text("new")
            out.mkdir()
            (out / "theirs.txt").write_text("theirs")
    assert sorted(p.name for p in out.iterdir()) == ["theirs.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_the_staging_of_dead_processes_is_removed_by_the_next_run(tmp_path):
    out = tmp_path / "out"
    dead = stale_staging(out)
    alive = stale_staging(out, pid=os.getpid())  # a run still going (here: this process)
    other_machine = stale_staging(out, pid=dead_pid(), host="0000ffff")
    other_target = stale_staging(tmp_path / "out-2")
    with staged_folder(out) as staging:
        (staging / "new.txt").write_text("new")
    assert not dead.exists()
    assert alive.exists() and other_machine.exists() and other_target.exists()
    assert (out / "new.txt").read_text() == "new"


def test_a_kill_between_the_two_renames_puts_the_old_folder_back(tmp_path):
    out = tmp_path / "out"
    old = stale_staging(out, kind="old")
    (old / "out").mkdir()
    (old / "out" / "README.md").write_text("the previous output")
    assert remove_stale_staging(out) == [old]
    assert (out / "README.md").read_text() == "the previous output" and not old.exists()


def test_the_staging_name_names_its_target_process_and_machine():
    pid = dead_pid()
    name = f".model.partial-{pid}-{files._host_tag()}-xyz"
    assert files.staging_owner("runs/model", f"runs/{name}") == ("partial", pid)
    assert files.staging_owner("runs/model-2", f"runs/{name}") is None


# ----- amnesia build, the first user of the helper -------------------------------------------------------


def test_amnesia_build_removes_the_staging_a_killed_build_left(tmp_path, capsys):
    out = tmp_path / "amnesia"
    dead = stale_staging(out)
    assert main(["amnesia", "build", "--out", str(out), "--patients", "20", "--seed", "0"]) == 0
    assert not dead.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["amnesia"]


# (a rerun that fails, given its --out; what its error names): after a killed run, a rerun that fails before
# it writes anything still removes the killed run's staging folder (it used to stay until a rerun succeeded).
FAILING_RERUNS = [
    (
        lambda tmp, out: (
            ["amnesia", "build", "--source", "pmc-patients", "--notes", str(tmp / "notes.csv")]
            + ["--qa", str(tmp / "notes.csv"), "--out", str(out)]
        ),
        "notes.csv",
    ),
    (lambda tmp, out: ["amnesia", "build", "--out", str(out), "--patients", "20"], "--overwrite"),
    (
        lambda tmp, out: ["biodivergence", "build", "--pool", str(tmp / "notes.csv"), "--out", str(out)],
        "notes.csv",
    ),
    (
        lambda tmp, out: (
            ["evaluate", "--model", str(tmp / "absent-model"), "--data", str(tmp / "absent")]
            + ["--forget", "forget_10", "--out", str(out)]
        ),
        "absent",
    ),
]


@pytest.mark.parametrize(("argv_for", "named"), FAILING_RERUNS)
def test_a_failing_rerun_still_removes_the_staging_a_killed_run_left(tmp_path, capsys, argv_for, named):
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n")
    out = tmp_path / "out"
    if named == "--overwrite":  # refused: the output exists and --overwrite was not given
        out.mkdir()
        (out / "README.md").write_text("the previous output")
    dead, alive = stale_staging(out), stale_staging(out, pid=os.getpid())
    assert main(argv_for(tmp_path, out)) == 2
    assert named in capsys.readouterr().err
    assert not dead.exists() and alive.exists()  # a run still going (this process) keeps its staging
    assert not out.exists() or (out / "README.md").read_text() == "the previous output"


@pytest.mark.parametrize("out_of", [lambda notes: notes.parent, lambda notes: notes.parent.parent])
def test_amnesia_build_never_replaces_the_folder_of_its_notes(tmp_path, capsys, out_of):
    notes = tmp_path / "inputs" / "notes.csv"
    notes.parent.mkdir()
    notes.write_text("patient_id,title,note,disease\n")
    before = checksums(tmp_path)
    argv = ["amnesia", "build", "--source", "pmc-patients", "--notes", str(notes), "--qa", str(notes)]
    assert main([*argv, "--out", str(out_of(notes)), "--overwrite"]) == 2
    assert "--notes" in capsys.readouterr().err
    assert checksums(tmp_path) == before


def test_amnesia_build_into_the_current_folder_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep.txt").write_text("the user's file")
    assert main(["amnesia", "build", "--out", ".", "--overwrite", "--patients", "20"]) == 2
    assert "current folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_a_failed_progressive_command_removes_the_empty_folder_it_made_and_keeps_outputs(tmp_path, capsys):
    from medunlearn.utils.files import no_empty_output_on_failure

    empty, partial, existing = tmp_path / "empty", tmp_path / "partial", tmp_path / "existing"
    existing.mkdir()
    for folder, write in ((empty, False), (partial, True), (existing, False)):
        with pytest.raises(InputError), no_empty_output_on_failure(folder):
            (folder / "shards").mkdir(parents=True)
            if write:
                (folder / "shards" / "batch-0.parquet").write_bytes(b"PAR1")
            raise InputError("bad row")
    assert not empty.exists()
    assert (partial / "shards" / "batch-0.parquet").is_file()
    assert (existing / "shards").is_dir()  # a folder that was there before is never removed
    assert capsys.readouterr().err.count("the outputs computed so far are kept in") == 1


def test_evaluate_with_a_bad_forget_config_leaves_no_out(tmp_path, capsys):
    data = tmp_path / "amnesia"
    assert main(["amnesia", "build", "--out", str(data), "--patients", "20", "--seed", "0"]) == 0
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    out = tmp_path / "eval"
    argv = [
        "evaluate",
        "--model",
        str(model),
        "--data",
        str(data),
        "--forget",
        "forget_99",
        "--out",
        str(out),
    ]
    assert main(argv) == 2
    assert "forget_99" in capsys.readouterr().err
    assert not out.exists()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """An AMNESIA folder, a (fake) model folder, an evaluation folder and a pool file: what commands read."""
    root = tmp_path_factory.mktemp("inputs")
    assert main(["amnesia", "build", "--out", str(root / "amnesia"), "--patients", "20", "--seed", "0"]) == 0
    model = root / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    (model / "model.safetensors").write_bytes(b"weights")
    evaluation = root / "eval"
    evaluation.mkdir()
    (evaluation / "summary.json").write_text("{}")
    (root / "pool.jsonl").write_text("{}\n")
    (root / "recipes").mkdir()
    (root / "recipes" / "grad_diff.yaml").write_text("method: grad_diff\nmax_steps: 1\n")
    return {
        "data": root / "amnesia",
        "model": model,
        "eval": evaluation,
        "pool": root / "pool.jsonl",
        "recipe": root / "recipes" / "grad_diff.yaml",
    }


# (the command's arguments given the inputs and an --out, which input the --out hits)
WRITES_INTO_INPUT = [
    (
        lambda i, out: (
            ["evaluate", "--model", str(i["model"]), "--data", str(i["data"]), "--forget", "forget_10"]
            + ["--out", str(out(i["data"]))]
        ),
        "data",
    ),
    (
        lambda i, out: (
            ["evaluate", "--model", str(i["model"]), "--data", str(i["data"]), "--forget", "forget_10"]
            + ["--out", str(out(i["model"]))]
        ),
        "model",
    ),
    # --out is EVAL_DIR in both variants: a report/ folder inside an evaluation folder is allowed
    (lambda i, out: ["report", str(i["eval"]), "--out", str(i["eval"])], "eval"),
    (
        lambda i, out: (
            ["attack", "--model", str(i["model"]), "--before", str(i["model"]), "--data", str(i["data"])]
            + ["--forget", "forget_10", "--out", str(out(i["data"])), "--overwrite"]
        ),
        "data",
    ),
    (
        lambda i, out: (
            # --out the folder that holds --pool, whichever variant: replacing it would delete the pool
            ["biodivergence", "build", "--pool", str(i["pool"]), "--out", str(i["pool"].parent)]
            + ["--overwrite"]
        ),
        "pool",
    ),
]


# Found by trying careless commands (issue 22): each wrote into an input before.
WRITES_INTO_INPUT += [
    (  # the shared before-model outputs inside the before model's folder
        lambda i, out: (
            ["evaluate", "--model", str(i["model"]), "--before", str(i["model"]), "--data", str(i["data"])]
            + ["--forget", "forget_10", "--out", str(i["eval"].parent / "e"), "--before-outputs"]
            + [str(out(i["model"]))]
        ),
        "model",
    ),
    (
        lambda i, out: (
            ["evaluate", "--model", str(i["model"]), "--retain-model", str(i["model"]), "--data"]
            + [str(i["data"]), "--forget", "forget_10", "--out", str(i["eval"].parent / "e")]
            + ["--retain-outputs", str(out(i["data"]))]
        ),
        "data",
    ),
    (  # metrics.json and predictions.jsonl written into the dataset folder scored
        lambda i, out: (
            ["biodivergence", "eval", "--baseline", "majority", "--data", str(i["data"])]
            + ["--out", str(out(i["data"]))]
        ),
        "data",
    ),
    (  # --overwrite of the folder holding the recipe deleted the recipe
        lambda i, out: (
            ["unlearn", "--config", str(i["recipe"]), "--model", str(i["model"]), "--data"]
            + [str(i["data"]), "--forget", "forget_10", "--out", str(i["recipe"].parent), "--overwrite"]
        ),
        "recipe",
    ),
]


@pytest.mark.parametrize(("argv_for", "hit"), WRITES_INTO_INPUT)
@pytest.mark.parametrize("where", ["same", "inside"])
def test_no_command_writes_into_or_replaces_its_input(inputs, capsys, argv_for, hit, where):
    before = checksums(inputs[hit].parent)
    out = (lambda path: path) if where == "same" else (lambda path: path / "out")
    assert main(argv_for(inputs, out)) == 2
    assert "a command never writes into its input" in capsys.readouterr().err
    assert checksums(inputs[hit].parent) == before


# (the command given the inputs and the file it names as an extra output): a cache or saved pool named like an
# input file would be written over it (the abstracts file became an SQLite cache).
WRITES_OVER_AN_INPUT_FILE = [
    lambda i: (
        ["biodivergence", "mine", "--abstracts", str(i["pool"]), "--out", str(i["pool"].parent / "m")]
        + ["--llm-cache", str(i["pool"])]
    ),
    lambda i: (
        ["biodivergence", "build", "--pool", str(i["pool"]), "--out", str(i["pool"].parent / "b")]
        + ["--save-pool", str(i["pool"])]
    ),
    lambda i: (
        ["biodivergence", "build", "--pool", str(i["pool"]), "--out", str(i["pool"].parent / "b")]
        + ["--llm-cache", str(i["pool"])]
    ),
    lambda i: (
        ["amnesia", "build", "--source", "pmc-patients", "--notes", str(i["pool"]), "--generate"]
        + ["transformers:smollm2-135m", "--llm-cache", str(i["pool"]), "--out", str(i["pool"].parent / "a")]
    ),
]


@pytest.mark.parametrize("argv_for", WRITES_OVER_AN_INPUT_FILE)
def test_no_command_writes_a_cache_or_copy_over_an_input_file(inputs, capsys, argv_for):
    before = checksums(inputs["pool"].parent)
    assert main(argv_for(inputs)) == 2
    assert "a command never writes over its input" in capsys.readouterr().err
    assert checksums(inputs["pool"].parent) == before


# Every builder refuses an existing, non-empty --out without --overwrite, and with it replaces it whole (tofu
# build wrote its files into the existing folder, beside what was there).
BUILDERS = [
    ["tofu", "build", "--authors", "5", "--qa-per-author", "1", "--perturbed", "1"],
    ["muse", "build", "--articles", "5"],
    ["amnesia", "build", "--patients", "20"],
]


@pytest.mark.parametrize("argv", BUILDERS, ids=lambda argv: argv[0])
def test_a_builder_replaces_an_existing_folder_only_with_overwrite_and_whole(tmp_path, capsys, argv):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("the user's file")
    assert main([*argv, "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert checksums(out) == {"keep.txt": hashlib.sha256(b"the user's file").hexdigest()}
    assert main([*argv, "--out", str(out), "--overwrite"]) == 0
    assert "keep.txt" not in checksums(out) and (out / "README.md").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_the_demo_never_fills_the_current_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--quick", "--out", "."]) == 2
    assert "current folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
