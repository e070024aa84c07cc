"""`medunlearn evaluate` end to end on a small AMNESIA folder and a tiny saved model; user errors exit
cleanly."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from medunlearn.cli import evaluate as cli
from medunlearn.cli import main


@pytest.fixture(scope="module")
def amnesia_folder(tmp_path_factory):
    from medunlearn.amnesia import build_amnesia_folder

    return build_amnesia_folder(tmp_path_factory.mktemp("amnesia") / "amnesia", patients=20, seed=0)


@pytest.fixture()
def saved_model(tiny_model, tiny_tokenizer, tmp_path):
    folder = tmp_path / "tiny"
    tiny_model.save_pretrained(folder, safe_serialization=True)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def _run(*argv) -> int:
    return main(["evaluate", *(str(a) for a in argv)])


@pytest.mark.slow  # ~10 s: builds a 20-patient AMNESIA folder, then evaluates twice
def test_evaluate_writes_summary_and_rescore_reproduces_it(amnesia_folder, saved_model, tmp_path, capsys):
    out = tmp_path / "eval"
    common = [
        "--model",
        saved_model,
        "--data",
        amnesia_folder,
        "--forget",
        "forget_10",
        "--out",
        out,
        "--batch-size",
        8,
        "--max-new-tokens",
        4,
        "--max-retain-patients",
        3,
        "--no-progress",
    ]
    shared_before = tmp_path / "before_forget_10"
    assert (
        _run(
            *common, "--before", saved_model, "--retain-model", saved_model, "--before-outputs", shared_before
        )
        == 0
    )
    assert "AFE" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["complete"]
    # the generation length recorded is the one used (it was the preset's 64 whatever --max-new-tokens said)
    assert summary["conventions"]["max_new_tokens"] == run_info["conventions"]["max_new_tokens"] == 4
    assert run_info["models"] == {
        "model": str(saved_model),
        "before": str(saved_model),
        "retain": str(saved_model),
    }
    # The retain model is the model itself: its membership signal is the same, so privleak is 0.
    mia = summary["membership_inference"]
    assert mia["auc"] == mia["auc_retain_model"]
    assert all(value in (0.0, None) for value in mia["privleak"].values())
    examples = pd.read_parquet(out / "examples.parquet")
    assert set(summary["populations"]) == set(examples["population"])
    for population, cells in summary["populations"].items():
        assert cells["all"]["n"] == int((examples["population"] == population).sum())
    # The model is its own "before" model: nothing was forgotten.
    forget_all = summary["populations"]["forget_seen"]["all"]
    assert forget_all["similarity_before"] == forget_all["similarity"]
    assert forget_all["answer_forgetting"] in (0.0, None)

    per_example = pd.read_parquet(out / "per_example.parquet")
    assert len(per_example) == len(examples)
    (out / "summary.json").unlink()
    assert _run("--out", out, "--rescore") == 0
    assert json.loads((out / "summary.json").read_text()) == summary
    # Rerunning finds every batch done and changes nothing.
    manifest = (out / "outputs" / "model" / "manifest.json").read_text()
    before_manifest = (shared_before / "manifest.json").read_text()
    assert (
        _run(
            *common, "--before", saved_model, "--retain-model", saved_model, "--before-outputs", shared_before
        )
        == 0
    )
    assert (out / "outputs" / "model" / "manifest.json").read_text() == manifest
    # A second evaluation sharing the before model's outputs reuses them (nothing is appended to its
    # manifest).
    other = [a if a != out else tmp_path / "eval2" for a in common]
    assert _run(*other, "--before", saved_model, "--before-outputs", shared_before) == 0
    assert (shared_before / "manifest.json").read_text() == before_manifest
    second = json.loads((tmp_path / "eval2" / "summary.json").read_text())
    assert second["populations"]["forget_seen"]["all"]["similarity_before"] == forget_all["similarity_before"]


def test_unknown_forget_config_is_reported_without_traceback(saved_model, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    code = _run("--model", saved_model, "--data", data, "--forget", "retain_90", "--out", tmp_path / "e")
    assert code == 2
    assert "retain_90" in capsys.readouterr().err


def test_missing_data_folder_is_named(saved_model, tmp_path, capsys):
    code = _run(
        "--model",
        saved_model,
        "--data",
        tmp_path / "nowhere",
        "--forget",
        "forget_10",
        "--out",
        tmp_path / "e",
    )
    assert code == 2
    assert f"AMNESIA folder {tmp_path / 'nowhere'} does not exist" in capsys.readouterr().err


def test_missing_options_are_named(tmp_path, capsys):
    assert _run("--out", tmp_path / "e") == 2
    assert "--model, --data, --forget required" in capsys.readouterr().err


def test_help_has_a_description_and_an_example():
    text = cli.build_parser("medunlearn evaluate").format_help()
    assert "medunlearn evaluate --model ckpt/finetuned --data amnesia --forget forget_10" in text


@pytest.mark.slow  # ~5 s: builds a second AMNESIA folder
def test_populations_come_from_the_folder_given_not_from_the_datasets_cache(amnesia_folder, tmp_path):
    """`datasets` caches local folders by name; a second folder also called "amnesia" must still be read."""
    from medunlearn.amnesia import build_amnesia_folder
    from medunlearn.evaluation.populations import PopulationConfig, load_populations

    other = build_amnesia_folder(tmp_path / "amnesia", patients=40, seed=1)
    assert other.name == amnesia_folder.name
    config = PopulationConfig(max_retain_patients=None)
    first = load_populations(amnesia_folder, "forget_10", config)
    second = load_populations(other, "forget_10", config)
    assert first["patient_id"].nunique() == 20 and second["patient_id"].nunique() == 40


@pytest.mark.slow  # ~20 s: torchrun starts two evaluation processes
def test_two_processes_give_the_single_process_summary(
    amnesia_folder, saved_model, tmp_path, one_torch_thread
):
    import os
    import shutil
    import subprocess
    import sys

    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    if torchrun is None:
        pytest.skip("torchrun is not installed next to this Python")
    common = [
        "--model",
        saved_model,
        "--data",
        amnesia_folder,
        "--forget",
        "forget_10",
        "--batch-size",
        4,
        "--max-new-tokens",
        3,
        "--max-retain-patients",
        2,
        "--no-progress",
    ]
    assert _run(*common, "--out", tmp_path / "one") == 0
    medunlearn = [sys.executable, "-m", "medunlearn.cli", "evaluate"]
    # --standalone: torchrun picks a free port, so concurrent runs on one machine do not collide.
    command = [
        torchrun,
        "--standalone",
        "--nproc_per_node",
        "2",
        "--no-python",
        *medunlearn,
        *map(str, common),
        "--out",
        str(tmp_path / "two"),
    ]
    finished = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    manifests = sorted(p.name for p in (tmp_path / "two" / "outputs" / "model").glob("manifest*.json"))
    assert manifests == ["manifest-0-of-2.json", "manifest-1-of-2.json"]
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    two = json.loads((tmp_path / "two" / "summary.json").read_text())
    # Same batch plan, same kernels: the processes reproduce the single-process numbers exactly.
    assert two["populations"] == one["populations"]
    assert two["membership_inference"] == one["membership_inference"]


def test_overwrite_keeps_a_shared_before_outputs_folder(tiny_model, tiny_tokenizer, make_examples, tmp_path):
    from medunlearn.evaluation.pipeline import evaluate_unlearning
    from medunlearn.evaluation.runner import RunnerConfig

    examples = make_examples()
    kwargs = {
        "tokenizer": tiny_tokenizer,
        "before": (tiny_model, tiny_tokenizer),
        "examples": examples,
        "before_outputs": tmp_path / "shared_before",
        "overwrite": True,
        "runner_config": RunnerConfig(batch_size=4, max_new_tokens=2, progress=False),
    }
    evaluate_unlearning(tiny_model, None, "forget_10", tmp_path / "a", **kwargs)
    shard = tmp_path / "shared_before" / "generation-00000.parquet"
    written = shard.stat().st_mtime_ns
    evaluate_unlearning(tiny_model, None, "forget_10", tmp_path / "b", **kwargs)
    assert shard.stat().st_mtime_ns == written  # reused, not discarded and recomputed
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["populations"]["forget_seen"]


def test_overwrite_discards_a_stale_shared_before_outputs_folder(
    tiny_model, tiny_tokenizer, make_examples, tmp_path
):
    import torch

    from medunlearn.evaluation.pipeline import evaluate_unlearning
    from medunlearn.evaluation.runner import RunnerConfig, read_outputs

    examples = make_examples()
    kwargs = {
        "tokenizer": tiny_tokenizer,
        "examples": examples,
        "before_outputs": tmp_path / "shared_before",
        "overwrite": True,
        "runner_config": RunnerConfig(batch_size=4, max_new_tokens=2, progress=False),
    }
    evaluate_unlearning(
        tiny_model, None, "forget_10", tmp_path / "a", before=(tiny_model, tiny_tokenizer), **kwargs
    )
    before = read_outputs(tmp_path / "shared_before")
    with torch.no_grad():
        tiny_model.model.norm.weight.mul_(3.0)  # the "before" model was re-trained in place
    evaluate_unlearning(
        tiny_model, None, "forget_10", tmp_path / "b", before=(tiny_model, tiny_tokenizer), **kwargs
    )
    after = read_outputs(tmp_path / "shared_before")
    assert not np.allclose(
        np.concatenate(before["token_logprobs"].tolist()), np.concatenate(after["token_logprobs"].tolist())
    )
