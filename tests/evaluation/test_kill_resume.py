"""A runner process killed with SIGKILL mid-run, then restarted, ends with the outputs of an uninterrupted
run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from medunlearn.evaluation.runner import MANIFEST, RunnerConfig, read_outputs, run_model

NUM_EXAMPLES, BATCH_SIZE = 24, 2


def build_job():
    """The same tiny model, tokenizer and examples in every process (everything seeded)."""
    import pandas as pd

    from medunlearn.models import build_tiny_llama, train_bpe_tokenizer

    texts = [f"Patient {i} received drug {i % 7} for finding {i % 5}." for i in range(40)]
    tokenizer = train_bpe_tokenizer(texts * 2, vocab_size=300)
    examples = pd.DataFrame(
        {
            "example_id": [f"e{i}" for i in range(NUM_EXAMPLES)],
            "question": [f"What did patient {i} receive?" + " Why?" * (i % 4) for i in range(NUM_EXAMPLES)],
            "answer": [f"drug {i % 7}" for i in range(NUM_EXAMPLES)],
        }
    )
    config = RunnerConfig(batch_size=BATCH_SIZE, max_new_tokens=4, progress=False)
    return build_tiny_llama(tokenizer), tokenizer, examples, config


# The child slows every forward pass down so that the parent can kill it between batches.
CHILD = textwrap.dedent(
    """
    import importlib.util, sys, time
    spec = importlib.util.spec_from_file_location("job", sys.argv[1])
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    model, tokenizer, examples, config = job.build_job()
    forward = model.forward
    def slow_forward(*args, **kwargs):
        time.sleep(0.2)
        return forward(*args, **kwargs)
    model.forward = slow_forward
    job.run_model(model, tokenizer, examples, sys.argv[2], config, model_id="tiny")
    """
)


def _completed(out_dir: Path) -> int:
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return 0
    return sum(len(done) for done in manifest["completed"].values())


@pytest.mark.slow  # ~10 s: one child process that imports torch, killed after three batches
def test_sigkill_then_restart_equals_uninterrupted(tmp_path, one_torch_thread):
    killed_dir, whole_dir = tmp_path / "killed", tmp_path / "whole"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, __file__, str(killed_dir)],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while _completed(killed_dir) < 3 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    _, stderr = child.communicate()
    total = 2 * NUM_EXAMPLES // BATCH_SIZE  # two passes
    assert child.returncode == -signal.SIGKILL, f"the child ended on its own: {stderr.decode()[-2000:]}"
    assert 3 <= _completed(killed_dir) < total

    # Restart here (same seeded model: the weights checksum in the fingerprint must match the child's).
    model, tokenizer, examples, config = build_job()
    assert run_model(model, tokenizer, examples, killed_dir, config, model_id="tiny")
    assert _completed(killed_dir) == total
    run_model(model, tokenizer, examples, whole_dir, config, model_id="tiny")

    ids = examples["example_id"]
    resumed, whole = read_outputs(killed_dir, ids), read_outputs(whole_dir, ids)
    assert resumed["generated_text"].tolist() == whole["generated_text"].tolist()
    for a, b in zip(resumed["token_logprobs"], whole["token_logprobs"]):
        np.testing.assert_array_equal(a, b)
