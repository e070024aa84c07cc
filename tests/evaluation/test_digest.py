"""A model folder's weights digest comes from its files, once (cached in the user cache, never in the model
folder, keyed by names, sizes and mtimes), and changes with any weight file; outputs of a before / retain
model named by its folder are computed once and reused by every evaluation that names them (AMNESIA and
TOFU), without loading the model again."""

from __future__ import annotations

import json
import os

import pytest
import torch

from medunlearn.evaluation.runner import RunnerConfig, StaleOutputsError, run_model
from medunlearn.utils import digest as digest_module
from medunlearn.utils.digest import DIGEST_FILE, folder_weights_digest, start_folder_digest

QUIET = RunnerConfig(batch_size=4, max_new_tokens=2, progress=False)


@pytest.fixture(autouse=True)
def user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDUNLEARN_CACHE", str(tmp_path / "user-cache"))
    return tmp_path / "user-cache" / "digests"


@pytest.fixture()
def model_folder(tiny_model, tiny_tokenizer, tmp_path):
    folder = tmp_path / "model"
    tiny_model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def _no_hashing(monkeypatch):
    def refuse(files):
        raise AssertionError("the files were hashed again: the cached digest was not used")

    monkeypatch.setattr(digest_module, "hash_files", refuse)


def _rewrite_weights(folder, tiny_model, scale: float = 2.0):
    with torch.no_grad():
        tiny_model.model.norm.weight.mul_(scale)
    tiny_model.save_pretrained(folder)


def test_the_digest_is_hashed_once_then_read_from_the_user_cache(model_folder, user_cache, monkeypatch):
    before = sorted(p.name for p in model_folder.iterdir())
    first = folder_weights_digest(model_folder)
    assert sorted(p.name for p in model_folder.iterdir()) == before  # the input folder is never written
    (cache,) = user_cache.glob("*.json")
    cached = json.loads(cache.read_text())
    assert cached["digest"] == first and "model.safetensors" in cached["files"]
    _no_hashing(monkeypatch)
    assert folder_weights_digest(model_folder) == first  # a hit: no file is read


def test_cached_only_never_hashes_and_the_background_digest_is_the_same(model_folder, monkeypatch):
    assert folder_weights_digest(model_folder, cached_only=True) is None
    assert not (model_folder / DIGEST_FILE).exists()
    digest = start_folder_digest(model_folder).result(timeout=60)
    _no_hashing(monkeypatch)
    assert (
        folder_weights_digest(model_folder, cached_only=True) == digest == folder_weights_digest(model_folder)
    )


def test_a_changed_weight_file_gives_a_new_digest(model_folder, tiny_model):
    first = folder_weights_digest(model_folder)
    _rewrite_weights(model_folder, tiny_model)
    assert folder_weights_digest(model_folder) != first


def test_a_touched_file_is_hashed_again_to_the_same_digest(model_folder, monkeypatch):
    first = folder_weights_digest(model_folder)
    weights = model_folder / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    calls = []
    original = digest_module.hash_files
    monkeypatch.setattr(digest_module, "hash_files", lambda files: calls.append(files) or original(files))
    assert folder_weights_digest(model_folder) == first  # same bytes, same digest
    assert len(calls) == 1  # the mtime changed: a miss


def test_a_digest_left_in_the_folder_by_an_earlier_version_is_neither_read_nor_written(
    model_folder, user_cache
):
    (model_folder / DIGEST_FILE).write_text(json.dumps({"version": 1, "digest": "stale"}))
    first = folder_weights_digest(model_folder)
    assert first != "stale" and json.loads((model_folder / DIGEST_FILE).read_text())["digest"] == "stale"
    assert len(list(user_cache.glob("*.json"))) == 1


def test_an_unwritable_user_cache_only_costs_the_hashing(model_folder, tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("MEDUNLEARN_CACHE", str(tmp_path / "a-file"))  # below a file: nothing can be written
    assert folder_weights_digest(model_folder) == folder_weights_digest(model_folder)


def test_an_adapter_digest_covers_its_base_model(model_folder, tiny_model, tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(model_folder)}))
    (adapter / "adapter_model.safetensors").write_bytes(b"adapter weights")
    first = folder_weights_digest(adapter)
    assert first is not None and first != folder_weights_digest(model_folder)
    _rewrite_weights(model_folder, tiny_model)
    assert folder_weights_digest(adapter) != first  # the base changed: the adapter's model changed
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/hub-model"}))
    assert folder_weights_digest(adapter) is None  # not a local base: the runner hashes the tensors


def test_no_digest_for_what_is_not_a_model_folder(tmp_path):
    assert folder_weights_digest(tmp_path / "absent") is None
    assert folder_weights_digest("org/hub-model") is None
    assert folder_weights_digest(tmp_path) is None  # a folder without weight files


def test_outputs_of_a_changed_weight_file_are_never_reused(
    model_folder, tiny_model, tiny_tokenizer, make_examples, tmp_path
):
    examples = make_examples()
    out = tmp_path / "outputs"
    kwargs = {"model_id": str(model_folder), "passes": ("teacher_forced",)}
    run_model(
        tiny_model,
        tiny_tokenizer,
        examples,
        out,
        QUIET,
        weights=folder_weights_digest(model_folder),
        **kwargs,
    )
    run_model(
        tiny_model,
        tiny_tokenizer,
        examples,
        out,
        QUIET,
        weights=folder_weights_digest(model_folder),
        **kwargs,
    )
    _rewrite_weights(model_folder, tiny_model)
    with pytest.raises(StaleOutputsError):
        run_model(
            tiny_model,
            tiny_tokenizer,
            examples,
            out,
            QUIET,
            weights=folder_weights_digest(model_folder),
            **kwargs,
        )


def _count_loads(monkeypatch, module, name):
    loads = []
    original = getattr(module, name)

    def counting(model_or_path, *args, **kwargs):
        loads.append((str(model_or_path), args[-1] if args else kwargs.get("flag")))
        return original(model_or_path, *args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return loads


def test_before_and_retain_outputs_are_computed_once_for_every_evaluation_naming_them(
    model_folder, tiny_model, tiny_tokenizer, make_examples, tmp_path, monkeypatch
):
    from medunlearn.evaluation import pipeline

    loads = _count_loads(monkeypatch, pipeline, "resolve_model")
    kwargs = {
        "tokenizer": tiny_tokenizer,
        "before": str(model_folder),
        "retain_model": str(model_folder),
        "examples": make_examples(),
        "before_outputs": tmp_path / "shared_before",
        "retain_outputs": tmp_path / "shared_retain",
        "runner_config": QUIET,
    }
    first = pipeline.evaluate_unlearning(tiny_model, None, "forget_10", tmp_path / "a", **kwargs)
    assert [flag for _, flag in loads] == ["--model", "--before", "--retain-model"]
    shards = {p: p.stat().st_mtime_ns for p in (tmp_path / "shared_retain").glob("*.parquet")}
    loads.clear()
    second = pipeline.evaluate_unlearning(tiny_model, None, "forget_10", tmp_path / "b", **kwargs)
    assert [flag for _, flag in loads] == ["--model"]  # before and retain: reused, not even loaded
    assert {p: p.stat().st_mtime_ns for p in shards} == shards
    assert second["populations"] == first["populations"]
    assert second["membership_inference"] == first["membership_inference"]
    run_info = json.loads((tmp_path / "b" / "run.json").read_text())
    assert run_info["outputs"]["retain"] == str(tmp_path / "shared_retain")


def test_a_tofu_retain_model_is_scored_once_for_every_evaluation_naming_its_outputs(tmp_path, monkeypatch):
    from medunlearn.models import build_tiny_llama, train_bpe_tokenizer
    from medunlearn.tofu import evaluate as tofu_evaluate
    from medunlearn.tofu.evaluate import tofu_examples
    from medunlearn.tofu.synthetic import build_tofu_folder

    data = build_tofu_folder(tmp_path / "data", authors=5, qa_per_author=2, perturbed=2, options=2, seed=0)
    examples = tofu_examples(data, "forget10")
    tokenizer = train_bpe_tokenizer(examples["question"].tolist() + examples["answer"].tolist(), 300)
    torch.manual_seed(0)
    model, retain = build_tiny_llama(tokenizer), build_tiny_llama(tokenizer)
    retain_folder = tmp_path / "retain"
    retain.save_pretrained(retain_folder)
    tokenizer.save_pretrained(retain_folder)
    loads = _count_loads(monkeypatch, tofu_evaluate, "_resolve")
    config = RunnerConfig(batch_size=8, progress=False)
    summaries = []
    for name in ("a", "b"):
        summaries.append(
            tofu_evaluate.evaluate_tofu(
                model,
                data,
                "forget10",
                tmp_path / name,
                tokenizer=tokenizer,
                retain_model=str(retain_folder),
                retain_outputs=tmp_path / "shared_retain",
                runner_config=config,
            )
        )
    assert [path for path, _ in loads].count(str(retain_folder)) == 1
    assert summaries[0]["metrics"] == summaries[1]["metrics"]
    assert summaries[1]["metrics"]["forget_quality"] is not None
    assert not (tmp_path / "b" / "outputs" / "retain-answers").exists()
    rescored = tofu_evaluate.score_tofu(tmp_path / "b")
    assert rescored["metrics"] == summaries[1]["metrics"]
