"""``medunlearn evaluate --overwrite`` stages the new run beside the old folder and swaps it in when done: an
interrupted run (an error, Ctrl-C) leaves the old folder byte-identical, and a finished one replaces it
whole, with ``run.json`` naming the final folders."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from medunlearn.evaluation import pipeline, runner
from medunlearn.evaluation.runner import RunnerConfig

QUIET = RunnerConfig(batch_size=4, max_new_tokens=3, progress=False)


@pytest.fixture()
def examples(make_examples):
    return pd.concat(
        [make_examples(population=p) for p in ("forget_seen", "forget_holdout", "retain_same_disease")],
        ignore_index=True,
    )


@pytest.fixture()
def model_folder(lively_model, tiny_tokenizer, tmp_path):
    folder = tmp_path / "model"
    lively_model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def digest(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _evaluate(model_folder, examples, out: Path, **settings) -> dict:
    return pipeline.evaluate_unlearning(
        str(model_folder), None, "forget_10", out, examples=examples, runner_config=QUIET, **settings
    )


def test_an_interrupted_overwrite_leaves_the_old_folder_byte_identical(
    model_folder, examples, tmp_path, monkeypatch
):
    out = tmp_path / "eval"
    first = _evaluate(model_folder, examples, out, before=str(model_folder))
    old = digest(out)
    write_manifest = runner.write_manifest
    for interruption in (KeyboardInterrupt, RuntimeError):  # Ctrl-C, and any error of the run
        written = []

        def interrupted(path, manifest, written=written, interruption=interruption):
            write_manifest(path, manifest)  # the new run has written a shard and its manifest, then stops
            written.append(path)
            if len(written) == 2:
                raise interruption("stopped mid-run")

        monkeypatch.setattr(runner, "write_manifest", interrupted)
        with pytest.raises(interruption, match="stopped mid-run"):
            _evaluate(model_folder, examples, out, before=str(model_folder), overwrite=True)
        assert digest(out) == old
        assert len(written) == 2 and all(out not in path.parents for path in written)  # it ran elsewhere
        assert sorted(p.name for p in tmp_path.iterdir()) == ["eval", "model"]  # no staging folder left

    monkeypatch.setattr(runner, "write_manifest", write_manifest)
    again = _evaluate(model_folder, examples, out, before=str(model_folder), overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval", "model"]
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["outputs"]["model"] == [str(out / "outputs" / "model"), str(out / "outputs" / "before")]
    assert pipeline.score_evaluation(out) == again
    assert again["models"] == first["models"]
