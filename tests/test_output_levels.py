"""What a command prints at each output level (docs/cli.md, "Output"): one bar per stage of real work by
default, the libraries' own bars with --verbose, nothing but the result with --quiet.

The command runs in a fresh process: the libraries read their output settings when they are imported.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from medunlearn.cli import main, split_global_flags
from medunlearn.cli.verbosity import DEFAULT, QUIET, VERBOSE, library_environment, output_at, output_level

# The per-operation bars of the libraries (TRL's datasets maps, transformers' model load and save).
LIBRARY_BARS = ("Adding EOS", "Tokenizing", "Truncating", "Dropping fully masked", "Loading weights")


def bars(stderr: str) -> list[str]:
    """The description of every finished tqdm bar (a bar ends with a newline; its updates with \\r)."""
    finished = [line.rsplit("\r", 1)[-1] for line in stderr.split("\n")]
    matches = [re.match(r"^(?:(.*?):)?\s*\d+%\|", line) for line in finished]
    return [(match.group(1) or "").strip() for match in matches if match]


def warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if re.search(r"\w+Warning\b|\bwarn", line)]


def test_bars_reads_each_finished_bar_once():
    stderr = (
        "Tokenizing:   0%|  | 0/4 [00:00]\rTokenizing: 100%|##| 4/4 [00:00]\n  0%|  | 0/2\r100%|##| 2/2\nok\n"
    )
    assert bars(stderr) == ["Tokenizing", ""]


def test_global_flags_come_before_the_command():
    assert split_global_flags(["--quiet", "demo", "--quick"]) == (["--quiet"], ["demo", "--quick"])
    assert split_global_flags(["-v", "env", "-q"]) == (["-v"], ["env", "-q"])
    assert split_global_flags(["env"]) == ([], ["env"])


def test_quiet_and_verbose_together_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--quiet", "--verbose", "env"])
    assert stopped.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_a_level_is_undone_after_the_command_and_a_users_setting_wins():
    environ = {"HF_DATASETS_DISABLE_PROGRESS_BARS": "0"}
    with output_at(QUIET, environ):
        assert output_level(environ) == QUIET and environ["TQDM_DISABLE"] == "1"
        assert environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] == "0"
    assert environ == {"HF_DATASETS_DISABLE_PROGRESS_BARS": "0"}
    assert "TQDM_DISABLE" not in library_environment(DEFAULT) and "TQDM_DISABLE" not in library_environment(
        VERBOSE
    )


@pytest.fixture(scope="module")
def finetune_inputs(tmp_path_factory):
    """A 20-patient AMNESIA folder and a saved tiny Llama (loading it is a "Loading weights" bar)."""
    from medunlearn.amnesia.pipeline import build_amnesia
    from medunlearn.data_loading import load_config
    from medunlearn.models import build_tiny_llama_for_texts

    root = tmp_path_factory.mktemp("levels")
    data = build_amnesia(root / "amnesia", source="synthetic", patients=20, seed=0)
    qa = load_config(data, "full", "train")
    model, tokenizer = build_tiny_llama_for_texts(list(qa["question"]) + list(qa["answer"]), vocab_size=300)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return root, data


def _finetune(finetune_inputs, *flags: str) -> subprocess.CompletedProcess:
    root, data = finetune_inputs
    out = root / f"out{'-'.join(flags)}"
    argv = [*flags, "finetune", "--model", str(root / "model"), "--data", str(data), "--out", str(out)]
    argv += ["--notes-epochs", "1", "--qa-epochs", "1", "--max_steps", "1", "--overwrite"]
    variables = ("TQDM_DISABLE", "HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS")
    env = {k: v for k, v in os.environ.items() if k not in variables and not k.endswith("_VERBOSITY")}
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    # Bytes, decoded here: text mode would turn tqdm's carriage returns into line ends.
    finished = subprocess.run(
        [sys.executable, "-m", "medunlearn.cli", *argv], capture_output=True, env=env, timeout=600
    )
    finished.stdout, finished.stderr = finished.stdout.decode(), finished.stderr.decode()
    assert finished.returncode == 0, finished.stderr[-3000:]
    return finished


@pytest.mark.slow  # three fine-tuning processes of one step per stage
def test_finetune_prints_one_bar_per_training_stage_by_default(finetune_inputs):
    finished = _finetune(finetune_inputs)
    assert bars(finished.stderr) == ["", ""]  # the Trainer's bar of the notes stage, then of the QA stage
    assert warning_lines(finished.stderr) == []
    assert finished.stdout.strip().endswith("fine-tuned model written to " + str(finetune_inputs[0] / "out"))


@pytest.mark.slow
def test_verbose_brings_back_the_libraries_bars(finetune_inputs):
    shown = bars(_finetune(finetune_inputs, "--verbose").stderr)
    assert "Loading weights" in shown and any(bar.startswith("Tokenizing") for bar in shown)
    assert shown.count("") >= 2  # the Trainer's two, and whatever else the libraries draw


@pytest.mark.slow
def test_quiet_prints_no_bar_and_no_warning(finetune_inputs):
    finished = _finetune(finetune_inputs, "--quiet")
    assert bars(finished.stderr) == [] and warning_lines(finished.stderr) == []
    assert not any(name in finished.stderr for name in LIBRARY_BARS)
