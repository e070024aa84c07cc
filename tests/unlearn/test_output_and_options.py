"""``finetune`` and ``unlearn`` write their folder the one way (medunlearn.utils.files.output_folder): never
into their input, never over an existing folder without --overwrite, a replaced folder holds only the new
model; and every numeric option is checked when it is parsed (table-driven, exit 2 naming the option)."""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from medunlearn.cli import main
from medunlearn.utils import files

TINY = ["--tiny-vocab-size", "600", "--disable_tqdm", "true"]


def checksums(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def exit_code(argv: list[str]) -> int:
    """``medunlearn ARGV``'s exit status, whether argparse (SystemExit) or ``main`` says it."""
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code


@pytest.fixture(scope="module")
def amnesia_dir(tmp_path_factory):
    from medunlearn.amnesia import build_amnesia_folder

    return build_amnesia_folder(tmp_path_factory.mktemp("amnesia") / "data", patients=20, seed=0)


@pytest.fixture(scope="module")
def finetuned_dir(amnesia_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("ft") / "model"
    argv = ["finetune", "--model", "tiny-llama", "--data", str(amnesia_dir), "--out", str(out)]
    assert main([*argv, "--notes-epochs", "0", "--qa-epochs", "1", *TINY]) == 0
    return out


def unlearn_argv(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "unlearn",
        "--method",
        "grad_diff",
        "--model",
        str(model),
        "--data",
        str(data),
        "--forget",
        "forget_10",
        "--out",
        str(out),
        "--max_steps",
        "1",
        "--disable_tqdm",
        "true",
        *extra,
    ]


# ----- never into an input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_unlearn_out_equal_to_model_is_refused_and_the_model_is_unchanged(
    finetuned_dir, amnesia_dir, tmp_path, capsys, overwrite
):
    model = tmp_path / "M"
    shutil.copytree(finetuned_dir, model)
    before = checksums(model)
    assert main(unlearn_argv(model, amnesia_dir, model, *overwrite)) == 2
    assert "is the --model folder" in capsys.readouterr().err
    assert checksums(model) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["M"]  # no staging folder either


@pytest.mark.parametrize(
    "out_of, message",
    [
        (lambda model, data: model / "unlearned", "lies inside --model"),
        (lambda model, data: model.parent, "contains --model"),
        (lambda model, data: data, "is the --data folder"),
        (lambda model, data: data / "sub", "lies inside --data"),
    ],
)
@pytest.mark.parametrize("command", ["unlearn", "finetune"])
def test_an_out_over_model_or_data_is_refused_with_overwrite_too(tmp_path, capsys, out_of, message, command):
    """Refused before anything is read: the model and data folders need not hold a model or data."""
    model, data = tmp_path / "inputs" / "model", tmp_path / "data"
    for folder in (model, data):
        folder.mkdir(parents=True)
        (folder / "README.md").write_text("mine")
    before = checksums(tmp_path)
    if command == "unlearn":
        argv = unlearn_argv(model, data, out_of(model, data), "--overwrite")
    else:
        argv = ["finetune", "--model", str(model), "--data", str(data), "--out", str(out_of(model, data))]
        argv += ["--overwrite"]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert checksums(tmp_path) == before


# ----- never over an existing folder without --overwrite; a replaced folder holds only the new model -----


@pytest.fixture()
def unlearned_folder(tmp_path) -> Path:
    """A folder as `unlearn` leaves it (its card and config are what must not survive a replacement)."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "README.md").write_text("---\nbase_model: x\n---\n# NPO on forget_10\n")
    (folder / "unlearning_config.json").write_text(json.dumps({"beta": 0.1}))
    (folder / "probe.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"the unlearned weights")
    return folder


def test_finetune_into_an_unlearned_model_folder_needs_overwrite_and_then_leaves_nothing_of_it(
    amnesia_dir, unlearned_folder, capsys
):
    before = checksums(unlearned_folder)
    argv = ["finetune", "--model", "tiny-llama", "--data", str(amnesia_dir), "--out", str(unlearned_folder)]
    argv += ["--notes-epochs", "0", "--qa-epochs", "1", *TINY]
    assert main(argv) == 2
    assert "already exists (pass --overwrite" in capsys.readouterr().err
    assert checksums(unlearned_folder) == before
    assert main([*argv, "--overwrite"]) == 0
    names = {p.name for p in unlearned_folder.iterdir()}
    assert "model.safetensors" in names and "conventions.json" in names
    assert not names & {"unlearning_config.json", "probe.json"}
    # The card is the fine-tuned model's own, not the unlearned model's left behind.
    assert (unlearned_folder / "README.md").read_text().count("# Fine-tuned model:") == 1
    assert (unlearned_folder / "model.safetensors").read_bytes() != b"the unlearned weights"
    assert sorted(p.name for p in unlearned_folder.parent.iterdir()) == ["out"]


def test_unlearn_over_an_existing_folder_needs_overwrite(
    finetuned_dir, amnesia_dir, unlearned_folder, capsys
):
    before = checksums(unlearned_folder)
    assert main(unlearn_argv(finetuned_dir, amnesia_dir, unlearned_folder)) == 2
    assert "already exists (pass --overwrite" in capsys.readouterr().err
    assert checksums(unlearned_folder) == before
    assert main(unlearn_argv(finetuned_dir, amnesia_dir, unlearned_folder, "--overwrite")) == 0
    saved = json.loads((unlearned_folder / "unlearning_config.json").read_text())
    assert saved["output_dir"] == str(unlearned_folder) and saved["max_steps"] == 1  # not the staging path
    assert not (unlearned_folder / "probe.json").exists()


def test_unlearn_removes_the_staging_a_killed_run_left_and_gives_the_same_weights(
    finetuned_dir, amnesia_dir, tmp_path
):
    """A killed run leaves its staging folder; the rerun removes it and trains from the start, so its weights
    equal those of a run that was never interrupted."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    out = tmp_path / "gd"
    stale = tmp_path / f".gd.partial-{child.pid}-{files._host_tag()}-killed"
    stale.mkdir()
    (stale / "checkpoint-1").mkdir()
    assert main(unlearn_argv(finetuned_dir, amnesia_dir, out)) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gd"]
    assert main(unlearn_argv(finetuned_dir, amnesia_dir, tmp_path / "uninterrupted")) == 0
    assert (out / "model.safetensors").read_bytes() == (
        tmp_path / "uninterrupted" / "model.safetensors"
    ).read_bytes()


# ----- numeric options, table-driven ------------------------------------------------------------------------

# (command, extra arguments, the option the message names)
FINETUNE_NUMBERS = [
    (["--notes-epochs", "-1"], "--notes-epochs"),
    (["--qa-epochs", "-2"], "--qa-epochs"),
    (["--notes-epochs", "-1", "--qa-epochs", "-2"], "--notes-epochs"),
    (["--qa-epochs", "nan"], "--qa-epochs"),
    (["--tiny-vocab-size", "0"], "--tiny-vocab-size"),
    (["--lora-r", "0"], "--lora-r"),
    (["--lora-alpha", "-3"], "--lora-alpha"),
    (["--max_steps", "-5"], "--max_steps"),
    (["--max_steps", "0"], "--max_steps"),
    (["--learning_rate", "-1e-4"], "--learning_rate"),
    (["--per_device_train_batch_size", "0"], "--per_device_train_batch_size"),
    (["--gradient_accumulation_steps", "0"], "--gradient_accumulation_steps"),
    (["--warmup_ratio", "1.5"], "--warmup_ratio"),
    (["--max_length", "0"], "--max_length"),
    (["--seed", "-1"], "--seed"),
    (["--warmup_steps", "-1"], "--warmup_steps"),  # TrainingArguments' own check raised a bare ValueError
]
UNLEARN_NUMBERS = [
    (["--max_steps", "-5"], "--max_steps"),
    (["--max_steps", "0"], "--max_steps"),
    (["--num_train_epochs", "-1"], "--num_train_epochs"),
    (["--learning_rate", "0"], "--learning_rate"),
    (["--per_device_train_batch_size", "0"], "--per_device_train_batch_size"),
    (["--logging_steps", "-10"], "--logging_steps"),
    (["--weight_decay", "-0.01"], "--weight_decay"),
    (["--forget_weight", "-1"], "--forget_weight"),
    (["--retain_weight", "-1"], "--retain_weight"),
    (["--max_length", "-512"], "--max_length"),
    (["--seed", "-1"], "--seed"),
    (["--max_retain_mu_drop", "-0.1"], "--max_retain_mu_drop"),
    (["--adam_beta1", "2"], "--adam_beta1"),
    (["--lora-r", "-4"], "--lora-r"),
    (["--warmup_steps", "-0.5"], "--warmup_steps"),  # TrainingArguments' own check raised a bare ValueError
    (["--learning_rate", "inf"], "--learning_rate"),
    (["--num_train_epochs", "nan"], "--num_train_epochs"),
    (["--warmup_ratio", "nan"], "--warmup_ratio"),
    (["--bf16", "true", "--fp16", "true"], "refuses these settings"),  # a cross-field check: named too
]


@pytest.mark.parametrize("extra, option", FINETUNE_NUMBERS)
def test_finetune_refuses_impossible_numbers(amnesia_dir, tmp_path, capsys, extra, option):
    out = tmp_path / "ft"
    argv = ["finetune", "--model", "tiny-llama", "--data", str(amnesia_dir), "--out", str(out), *extra]
    assert exit_code(argv) == 2
    assert option in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("extra, option", UNLEARN_NUMBERS)
def test_unlearn_refuses_impossible_numbers(amnesia_dir, tmp_path, capsys, extra, option):
    out = tmp_path / "gd"
    argv = ["unlearn", "--method", "grad_diff", "--model", "tiny-llama", "--data", str(amnesia_dir)]
    argv += ["--forget", "forget_10", "--out", str(out), *extra]
    assert exit_code(argv) == 2
    assert option in capsys.readouterr().err
    assert not out.exists()


def _option_actions():
    """(command, the option's flag, its argparse action) for every option of every subcommand."""
    from medunlearn.cli import SUBCOMMANDS, subcommand_parser

    for name in SUBCOMMANDS:
        parsers = [subcommand_parser(name)]
        while parsers:
            parser = parsers.pop()
            for action in parser._actions:
                if isinstance(action, argparse._SubParsersAction):
                    parsers.extend(action.choices.values())
                elif action.option_strings:
                    yield name, action.option_strings[-1], action


def test_every_numeric_option_of_every_command_is_checked_when_parsed():
    """No bare `type=int` / `type=float` (which take -5, nan and inf): every numeric option uses a check of
    medunlearn.utils.numbers, and each of those refuses nan and inf by name at parse time."""
    bare = [f"{name} {flag}" for name, flag, action in _option_actions() if action.type in (int, float)]
    assert bare == []
    checked = [
        (name, flag, action)
        for name, flag, action in _option_actions()
        if getattr(action.type, "__module__", "") == "medunlearn.utils.numbers"
    ]
    assert len(checked) > 40
    accepted = [
        f"{name} {flag} {value}"
        for name, flag, action in checked
        for value in ("nan", "inf", "-inf", "x", "1e999")
        if _accepts(action.type, value)
    ]
    assert accepted == []


def _accepts(check, value: str) -> bool:
    try:
        check(value)
    except argparse.ArgumentTypeError:
        return False
    return True


@pytest.mark.parametrize(
    "argv",
    [
        ["biodivergence", "mine", "--abstracts", "a.jsonl", "--out", "o", "--cap-per-domain", "0"],
        ["biodivergence", "mine", "--abstracts", "a.jsonl", "--out", "o", "--neighbours", "-1"],
        ["biodivergence", "mine", "--abstracts", "a.jsonl", "--out", "o", "--llm-pairs-per-domain", "-3"],
        ["biodivergence", "eval", "--baseline", "lexical", "--data", "d", "--limit", "0"],
        ["biodivergence", "eval", "--baseline", "finetuned", "--data", "d", "--learning-rate", "inf"],
        ["biodivergence", "compare", "--data", "d", "--epochs", "-1"],
        ["attack", "--out", "o", "--relearn-learning-rate", "inf"],
        ["attack", "--out", "o", "--relearn-share", "1"],
        ["amnesia", "build", "--out", "o", "--patients", "-5"],
        ["study", "s.yaml", "--jobs", "0"],
        ["tofu", "build", "--out", "o", "--authors", "nan"],
        ["muse", "build", "--out", "o", "--articles", "-8"],
        ["demo", "--patients", "0"],
    ],
)
def test_a_bad_number_stops_the_command_before_it_reads_anything(tmp_path, capsys, argv, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the inputs named do not exist: the number is refused first
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    flag = next(arg for arg in reversed(argv) if arg.startswith("--"))
    assert f"argument {flag}" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_recipe_value_is_checked_and_the_recipe_named(amnesia_dir, tmp_path, capsys):
    recipe = tmp_path / "npo.yaml"
    recipe.write_text("method: npo\nbeta: 0\n")
    argv = ["unlearn", "--config", str(recipe), "--model", "tiny-llama", "--data", str(amnesia_dir)]
    argv += ["--forget", "forget_10", "--out", str(tmp_path / "npo")]
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "--beta" in err and "npo.yaml" in err


@pytest.mark.parametrize(
    "extra, option",
    [
        (["--max-new-tokens", "0"], "--max-new-tokens"),
        (["--max-retain-patients", "-1"], "--max-retain-patients"),
        (["--seed", "-1"], "--seed"),
        (["--max-batch-size", "0"], "--max-batch-size"),
        (["--batch-size", "-2"], "--batch-size"),
    ],
)
def test_evaluate_refuses_impossible_numbers(tmp_path, capsys, extra, option):
    argv = ["evaluate", "--model", "m", "--data", "d", "--forget", "forget_10", "--out", str(tmp_path / "e")]
    assert exit_code([*argv, *extra]) == 2
    assert option in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_a_finetune_of_zero_qa_steps_is_refused(amnesia_dir, tmp_path, capsys):
    """--qa-epochs 0 trains no QA step: the base model would be written as "fine-tuned"."""
    out = tmp_path / "ft"
    argv = ["finetune", "--model", "tiny-llama", "--data", str(amnesia_dir), "--out", str(out)]
    assert exit_code([*argv, "--notes-epochs", "0", "--qa-epochs", "0", *TINY]) == 2
    assert "0 steps" in capsys.readouterr().err
    assert not out.exists()
