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
# Everything a test session writes to the temporary folder (datasets caches, doctest builds, notebook work folders,
# torchrun's run folders), in this process and in those it starts, lands in one folder removed at exit.
SESSION_TMP = tempfile.mkdtemp(prefix="medunlearn-tests-")
atexit.register(shutil.rmtree, SESSION_TMP, ignore_errors=True)
os.environ["TMPDIR"] = SESSION_TMP
tempfile.tempdir = SESSION_TMP
# `datasets` caches a local folder by its name and config only (not its contents), so a folder rebuilt under the
# same name would be read stale from a shared cache: every test session gets its own cache.
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
    """Each test reads local dataset folders through its own `datasets` cache (see HF_DATASETS_CACHE above)."""
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
def tiny_tokenizer():
    from medunlearn.models import train_bpe_tokenizer

    return train_bpe_tokenizer(FIXTURE_TEXTS * 4, vocab_size=400)


@pytest.fixture()
def tiny_model(tiny_tokenizer):
    """A fresh tiny Llama per test (tests may train it)."""
    from medunlearn.models import build_tiny_llama

    return build_tiny_llama(tiny_tokenizer)
