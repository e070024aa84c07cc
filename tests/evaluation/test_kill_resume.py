"""A runner process killed with SIGKILL mid-run, then restarted, ends with the outputs of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from medunlearn.evaluation.runner import MANIFEST, read_outputs

# Builds the same tiny model and examples in every process (seeded), and slows each forward pass down so the
# parent can kill the process between batches.
SCRIPT = textwrap.dedent(
    """
    import sys, time
    import pandas as pd, torch
    from medunlearn.models import build_tiny_llama, train_bpe_tokenizer
    from medunlearn.evaluation.runner import RunnerConfig, run_model

    texts = [f"Patient {i} received drug {i % 7} for finding {i % 5}." for i in range(40)]
    tokenizer = train_bpe_tokenizer(texts * 2, vocab_size=300)
    model = build_tiny_llama(tokenizer)
    delay = float(sys.argv[2])
    forward = model.forward
    def slow_forward(*args, **kwargs):
        time.sleep(delay)
        return forward(*args, **kwargs)
    model.forward = slow_forward
    examples = pd.DataFrame({
        "example_id": [f"e{i}" for i in range(24)],
        "question": [f"What did patient {i} receive?" + " Why?" * (i % 4) for i in range(24)],
        "answer": [f"drug {i % 7}" for i in range(24)],
    })
    run_model(model, tokenizer, examples, sys.argv[1], RunnerConfig(batch_size=2, max_new_tokens=4, progress=False),
              model_id="tiny")
    """
)


def _start(script, out_dir, delay):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(script), str(out_dir), str(delay)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _completed(out_dir) -> int:
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return 0
    return sum(len(done) for done in manifest["completed"].values())


@pytest.mark.slow  # ~15 s: three Python processes that import torch
def test_sigkill_then_restart_equals_uninterrupted(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    killed_dir, whole_dir = tmp_path / "killed", tmp_path / "whole"

    process = _start(script, killed_dir, delay=0.2)
    deadline = time.monotonic() + 120
    while _completed(killed_dir) < 3 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    done_when_killed = _completed(killed_dir)
    assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    total = 2 * 12  # two passes of 12 batches
    assert 3 <= done_when_killed < total

    for out_dir in (killed_dir, whole_dir):
        finished = _start(script, out_dir, delay=0.0)
        _, stderr = finished.communicate(timeout=120)
        assert finished.returncode == 0, stderr.decode()[-2000:]
    assert _completed(killed_dir) == total

    ids = [f"e{i}" for i in range(24)]
    resumed, whole = read_outputs(killed_dir, ids), read_outputs(whole_dir, ids)
    assert resumed["generated_text"].tolist() == whole["generated_text"].tolist()
    for a, b in zip(resumed["token_logprobs"], whole["token_logprobs"]):
        np.testing.assert_array_equal(a, b)
