"""A before model that is the evaluated model (a study's baseline, ``--model X --before X``) runs once on the
forget examples: the before role scores them, the model role only the others, with the old path's results."""

from __future__ import annotations

import copy
import json
import shutil

import pandas as pd
import pytest

from medunlearn.evaluation import pipeline, roles
from medunlearn.evaluation.populations import FORGET_POPULATIONS
from medunlearn.evaluation.runner import RunnerConfig

QUIET = RunnerConfig(batch_size=4, max_new_tokens=3, progress=False)


@pytest.fixture()
def examples(make_examples):
    return pd.concat(
        [make_examples(population=p) for p in ("forget_seen", "forget_holdout", "retain_same_disease")],
        ignore_index=True,
    )


@pytest.fixture()
def folder(lively_model, tiny_tokenizer, tmp_path):
    folder = tmp_path / "model"
    lively_model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def _count_runs(monkeypatch):
    """(output folder name, example ids) of every ``run_model`` call, and how many models were loaded."""
    runs, loads = [], []
    run_model, resolve_model = roles.run_model, pipeline.resolve_model

    def counting_run(model, tokenizer, examples, out_dir, *args, **kwargs):
        runs.append((out_dir.name, list(examples["example_id"])))
        return run_model(model, tokenizer, examples, out_dir, *args, **kwargs)

    def counting_load(*args, **kwargs):
        loads.append(args[0])
        return resolve_model(*args, **kwargs)

    monkeypatch.setattr(roles, "run_model", counting_run)
    monkeypatch.setattr(pipeline, "resolve_model", counting_load)
    return runs, loads


def _assert_same_results(new_dir, old_dir, new, old):
    """Equal outputs, up to float rounding: the forget examples are batched with each other only."""
    pd.testing.assert_frame_equal(
        pd.read_parquet(new_dir / "per_example.parquet"),
        pd.read_parquet(old_dir / "per_example.parquet"),
        check_exact=False,
        rtol=1e-5,
        atol=1e-6,
    )
    new, old = _flat(new, "models"), _flat(old, "models")
    numbers = {k for k, v in old.items() if isinstance(v, float)}
    assert {k: v for k, v in new.items() if k not in numbers} == {
        k: v for k, v in old.items() if k not in numbers
    }
    # A rank statistic is not continuous: the tiny model's near-tied losses, 1e-6 apart between the two
    # batchings, can swap one member/non-member pair (1/49 of an AUC here) depending on the thread count.
    ranks = {k for k in numbers if "/membership_inference/" in k or "privleak" in k}
    assert {k: new[k] for k in numbers - ranks} == pytest.approx(
        {k: old[k] for k in numbers - ranks}, rel=1e-5, abs=1e-6, nan_ok=True
    )
    assert {k: new[k] for k in ranks} == pytest.approx({k: old[k] for k in ranks}, abs=0.05, nan_ok=True)


def _flat(value, skip, prefix=""):
    if isinstance(value, dict):
        return {
            key: leaf
            for name, item in value.items()
            if name != skip
            for key, leaf in _flat(item, skip, f"{prefix}/{name}").items()
        }
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, skip, f"{prefix}/{i}").items()}
    return {prefix: float("nan") if value is None else value}


def _forget_ids(examples):
    return set(examples.loc[examples["population"].isin(FORGET_POPULATIONS), "example_id"])


def test_the_same_folder_as_before_model_runs_once_with_the_old_paths_results(
    folder, examples, tmp_path, monkeypatch
):
    runs, loads = _count_runs(monkeypatch)
    kwargs = {"examples": examples, "runner_config": QUIET}
    shared = tmp_path / "shared_before"
    new = pipeline.evaluate_unlearning(
        str(folder), None, "forget_10", tmp_path / "new", before=str(folder), before_outputs=shared, **kwargs
    )
    forget = _forget_ids(examples)
    assert runs == [
        ("shared_before", [i for i in examples["example_id"] if i in forget]),
        ("model", [i for i in examples["example_id"] if i not in forget]),
    ]  # every example once: the forget ones as the before model, the others as the model
    assert loads == [str(folder)]  # loaded once, for both roles
    run_info = json.loads((tmp_path / "new" / "run.json").read_text())
    assert run_info["outputs"]["model"] == [str(tmp_path / "new" / "outputs" / "model"), str(shared)]
    assert run_info["models"] == {"model": str(folder), "before": str(folder)}

    runs.clear()
    copied = tmp_path / "copy"  # an equal folder elsewhere: the old path, the model scored in both roles
    shutil.copytree(folder, copied)
    old = pipeline.evaluate_unlearning(
        str(folder), None, "forget_10", tmp_path / "old", before=str(copied), **kwargs
    )
    assert [len(ids) for _, ids in runs] == [len(examples), len(forget)]
    _assert_same_results(tmp_path / "new", tmp_path / "old", new, old)

    # Rescoring reads the model's rows from both folders; a rerun reuses both, loading nothing.
    assert pipeline.score_evaluation(tmp_path / "new") == new
    runs.clear()
    loads.clear()
    again = pipeline.evaluate_unlearning(
        str(folder), None, "forget_10", tmp_path / "new", before=str(folder), before_outputs=shared, **kwargs
    )
    assert (runs, loads) == ([], [])
    assert again == new


def test_the_same_model_object_as_before_model_runs_once(
    lively_model, tiny_tokenizer, examples, tmp_path, monkeypatch
):
    runs, loads = _count_runs(monkeypatch)
    kwargs = {"tokenizer": tiny_tokenizer, "examples": examples, "runner_config": QUIET}
    new = pipeline.evaluate_unlearning(
        lively_model, None, "forget_10", tmp_path / "new", before=(lively_model, tiny_tokenizer), **kwargs
    )
    assert sorted(name for name, _ in runs) == ["before", "model"]
    assert sum(len(ids) for _, ids in runs) == len(examples)
    runs.clear()
    other_tokenizer = copy.deepcopy(tiny_tokenizer)  # another object: not known to be the same model
    old = pipeline.evaluate_unlearning(
        lively_model, None, "forget_10", tmp_path / "old", before=(lively_model, other_tokenizer), **kwargs
    )
    assert sum(len(ids) for _, ids in runs) == len(examples) + len(_forget_ids(examples))
    _assert_same_results(tmp_path / "new", tmp_path / "old", new, old)


def test_forget_examples_only_are_all_read_from_the_before_outputs(
    folder, make_examples, tmp_path, monkeypatch
):
    runs, _ = _count_runs(monkeypatch)
    kwargs = {"examples": make_examples(), "runner_config": QUIET}
    new = pipeline.evaluate_unlearning(
        str(folder), None, "forget_10", tmp_path / "new", before=str(folder), **kwargs
    )
    assert [name for name, _ in runs] == ["before"]
    run_info = json.loads((tmp_path / "new" / "run.json").read_text())
    assert run_info["outputs"]["model"] == [str(tmp_path / "new" / "outputs" / "before")]
    shutil.copytree(folder, tmp_path / "copy")
    old = pipeline.evaluate_unlearning(
        str(folder), None, "forget_10", tmp_path / "old", before=str(tmp_path / "copy"), **kwargs
    )
    _assert_same_results(tmp_path / "new", tmp_path / "old", new, old)


def test_complete_outputs_of_the_old_path_are_reused_not_recomputed(folder, examples, tmp_path, monkeypatch):
    """An evaluation folder finished before this change (the model's outputs of every example) is reused."""
    kwargs = {"examples": examples, "runner_config": QUIET}
    out = tmp_path / "eval"
    monkeypatch.setattr(pipeline, "_same_model", lambda *args: False)  # the old path
    old = pipeline.evaluate_unlearning(str(folder), None, "forget_10", out, before=str(folder), **kwargs)
    monkeypatch.undo()
    runs, loads = _count_runs(monkeypatch)
    again = pipeline.evaluate_unlearning(str(folder), None, "forget_10", out, before=str(folder), **kwargs)
    assert (runs, loads) == ([], [])
    assert again == old
