"""Two CPU processes under ``accelerate launch`` give the single-process loss at the same effective batch,
with either ``loss_averaging``: per answer, or one token mean over the step's global token count; on QA rows
and on chunks of raw text (``data_format="text"``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tiny_training import free_port

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("accelerate") is None, reason="accelerate CLI not installed")
@pytest.mark.parametrize(
    ("loss_averaging", "data_format"),
    [("sequence", "qa"), ("token", "qa"), ("sequence", "text"), ("token", "text")],
)
def test_two_processes_match_one_process_at_the_same_effective_batch(tmp_path, loss_averaging, data_format):
    import importlib.util

    spec = importlib.util.spec_from_file_location("ddp_run", HERE / "ddp_run.py")
    ddp_run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ddp_run)
    (tmp_path / "single").mkdir()
    ddp_run.main(str(tmp_path / "single" / "result.json"), 4, loss_averaging, data_format)
    single = json.loads((tmp_path / "single" / "result.json").read_text())

    (tmp_path / "ddp").mkdir()
    # Without a GPU, the multi-GPU launcher starts torch.distributed processes that Accelerate runs as
    # MULTI_CPU (gloo); `--cpu` alone would start a single process.
    command = [
        shutil.which("accelerate"),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--main_process_port",
        str(free_port()),
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        str(HERE / "ddp_run.py"),
        str(tmp_path / "ddp" / "result.json"),
        "2",
        loss_averaging,
        data_format,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    ddp = json.loads((tmp_path / "ddp" / "result.json").read_text())

    assert single["processes"] == 1 and ddp["processes"] == 2
    assert ddp["losses"] == pytest.approx(single["losses"], abs=1e-5)
    assert ddp["checksum"] == pytest.approx(single["checksum"], abs=1e-3)
