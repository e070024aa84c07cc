"""A command killed with SIGKILL while it writes its output folder, then run again, ends with the files of a
run that was never interrupted, and leaves no staging debris: `amnesia build`, `finetune` and `unlearn` (the
evaluation runner and the mining stages have their own kill tests: tests/evaluation/test_kill_resume.py,
tests/biodivergence/mining/test_pipeline.py)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

# Files whose content records when or how long a run took, not what it computed.
TIMING_FILES = {"trainer_state.json", "timings.json"}


def checksums(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name not in TIMING_FILES
    }


def command(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "medunlearn.cli", "--quiet", *argv]


def environment() -> dict[str, str]:
    return os.environ | {"OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}


def run(argv: list[str], cwd: Path) -> None:
    finished = subprocess.run(command(argv), capture_output=True, env=environment(), timeout=600, cwd=cwd)
    assert finished.returncode == 0, finished.stderr.decode()[-3000:]


def staging_of(out: Path) -> list[Path]:
    return sorted(out.parent.glob(f".{out.name}.*"))


def run_killed_while_writing(argv: list[str], out: Path) -> None:
    """Start the command, SIGKILL it as soon as its staging folder beside `out` exists (a trainer fills it
    only at the end: killed then, the run has trained but written nothing)."""
    child = subprocess.Popen(
        command(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment(), cwd=out.parent
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and child.poll() is None:
        if staging_of(out):
            break
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL, f"it ended on its own: {child.stderr.read().decode()[-2000:]}"
    child.stderr.close()
    assert staging_of(out) and not out.exists(), "killed before it staged anything, or after it finished"


def check_kill_then_rerun_equals_uninterrupted(argv_for, tmp_path: Path) -> None:
    """Both runs write `out` given as a relative path, each in its own folder: what a command records about
    its output folder (a card's paths, a config's output_dir) is then the same text."""
    clean, interrupted = tmp_path / "clean" / "out", tmp_path / "interrupted" / "out"
    for out in (clean, interrupted):
        out.parent.mkdir()
    run(argv_for(Path("out")), clean.parent)
    run_killed_while_writing(argv_for(Path("out")), interrupted)
    run(argv_for(Path("out")), interrupted.parent)
    assert checksums(interrupted) == checksums(clean)
    assert staging_of(interrupted) == []  # the rerun removed the killed run's staging
    mentions = [p.name for p in clean.rglob("*") if p.is_file() and b".out.partial-" in p.read_bytes()]
    assert mentions == []  # a card or config names the output folder, never the staging one it was written in


@pytest.fixture(scope="module")
def amnesia_and_model(tmp_path_factory):
    """A 20-patient AMNESIA folder and a saved tiny Llama."""
    from medunlearn.amnesia.pipeline import build_amnesia
    from medunlearn.data_loading import load_config
    from medunlearn.models import build_tiny_llama_for_texts

    root = tmp_path_factory.mktemp("kill")
    data = build_amnesia(root / "amnesia", source="synthetic", patients=20, seed=0)
    qa = load_config(data, "full", "train")
    model, tokenizer = build_tiny_llama_for_texts(list(qa["question"]) + list(qa["answer"]), vocab_size=300)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return data, root / "model"


def test_amnesia_build(tmp_path):
    check_kill_then_rerun_equals_uninterrupted(
        lambda out: ["amnesia", "build", "--out", str(out), "--patients", "200", "--seed", "0"], tmp_path
    )


def test_finetune(tmp_path, amnesia_and_model):
    data, model = amnesia_and_model
    check_kill_then_rerun_equals_uninterrupted(
        lambda out: (
            ["finetune", "--model", str(model), "--data", str(data), "--out", str(out)]
            + ["--notes-epochs", "1", "--qa-epochs", "1", "--max_steps", "2", "--seed", "0"]
        ),
        tmp_path,
    )


def test_unlearn(tmp_path, amnesia_and_model):
    data, model = amnesia_and_model
    check_kill_then_rerun_equals_uninterrupted(
        lambda out: (
            ["unlearn", "--method", "grad_diff", "--model", str(model), "--data", str(data)]
            + ["--forget", "forget_10", "--out", str(out), "--max_steps", "2", "--seed", "0"]
        ),
        tmp_path,
    )
