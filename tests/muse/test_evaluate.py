"""`evaluate --benchmark muse` through the evaluation runner: the same values as the hand path of
`test_tiny_model.py` (plain `model.generate` and one forward pass per text), the command's folder, a bad
MUSE folder, and reuse of stored outputs."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from muse.test_tiny_model import _generate, _teacher_forced

from medunlearn.evaluation.settings import RunnerConfig
from medunlearn.muse.build import build_muse_folder
from medunlearn.muse.conventions import MUSE_PRESETS
from medunlearn.muse.evaluate import evaluate_muse, score_muse_folder
from medunlearn.muse.rendering import clean_up_spaces
from medunlearn.muse.scoring import MuseOutputs, min_k_row_scores, muse_examples, privleak_auc, score_muse

QUIET = RunnerConfig(batch_size=4, progress=False)
# A few rows per split: the knowmem prompts still carry every in-context pair of the (two-row) ICL splits.
ROWS = {"knowmem": 2, "verbmem": 2, "privleak": 3}
NEW_TOKENS = 4


def _tiny_muse_folder(path):
    folder = build_muse_folder(path, articles=5, prompt_words=6, continuation_words=8, seed=0)
    for config, n in ROWS.items():
        for split in (folder / config).glob("*.jsonl"):
            split.write_text("".join(split.read_text().splitlines(keepends=True)[:n]))
    return folder


def _conventions(name):
    return replace(MUSE_PRESETS[name], knowmem_max_new_tokens=NEW_TOKENS, verbmem_max_new_tokens=NEW_TOKENS)


def _hand_reference_truth(tokenizer, prompt, continuation, whole):
    """The reference's ROUGE ground truth, written out from its lines (open-unlearning@d3d7cf9
    src/data/utils.py:99-121, 166-176; src/evals/metrics/utils.py:271-281), decoding with transformers'
    own space clean-up as its pinned 4.45.1 does."""
    prompt_ids = tokenizer(prompt).input_ids
    full = tokenizer(prompt + continuation).input_ids
    labels = full + [tokenizer.eos_token_id] if whole else full[len(prompt_ids) :]

    def decode(ids):
        return tokenizer.clean_up_tokenization(tokenizer.decode(ids, skip_special_tokens=True))

    return decode(labels).replace(decode(prompt_ids), "").strip()


def _hand_outputs(model, tokenizer, folder):
    """The runner played by hand on every row (as `test_tiny_model.py`), and the reference's ground truths
    and clean-up of the decodes."""
    examples = muse_examples(folder)
    forget_qa, retain_qa, verb = (examples[k] for k in ("knowmem_forget", "knowmem_retain", "verbmem"))
    matches = []
    for row in verb:
        prompt_ids = tokenizer(row["prompt"]).input_ids
        _, is_argmax = _teacher_forced(model, tokenizer(row["prompt"] + " " + row["reference"]).input_ids)
        matches.append(list(is_argmax[len(prompt_ids) - 1 :]))
    privleak = {
        task: [list(_teacher_forced(model, tokenizer(r["text"]).input_ids)[0]) for r in examples[task]]
        for task in ("privleak_forget", "privleak_holdout")
    }
    generations = {
        name: _generate(model, tokenizer, [r["prompt"] for r in rows], NEW_TOKENS)
        for name, rows in (("forget", forget_qa), ("retain", retain_qa), ("verbmem", verb))
    }
    outputs = MuseOutputs(
        knowmem_forget_generations=generations["forget"],
        knowmem_forget_references=[r["reference"] for r in forget_qa],
        knowmem_retain_generations=generations["retain"],
        knowmem_retain_references=[r["reference"] for r in retain_qa],
        verbmem_generations=generations["verbmem"],
        verbmem_references=[r["reference"] for r in verb],
        verbmem_argmax_match=matches,
        privleak_forget_logprobs=privleak["privleak_forget"],
        privleak_holdout_logprobs=privleak["privleak_holdout"],
    )
    clean = tokenizer.clean_up_tokenization
    reference = replace(
        outputs,
        knowmem_forget_generations=[clean(t) for t in outputs.knowmem_forget_generations],
        knowmem_retain_generations=[clean(t) for t in outputs.knowmem_retain_generations],
        verbmem_generations=[clean(t) for t in outputs.verbmem_generations],
        knowmem_forget_references=[
            _hand_reference_truth(tokenizer, r["prompt"], r["reference"], True) for r in forget_qa
        ],
        knowmem_retain_references=[
            _hand_reference_truth(tokenizer, r["prompt"], r["reference"], True) for r in retain_qa
        ],
        verbmem_references=[
            _hand_reference_truth(tokenizer, r["prompt"], " " + r["reference"], False) for r in verb
        ],
    )
    return outputs, reference


def _assert_same_summary(runner: dict, hand: dict):
    assert runner["metrics"].keys() == hand["metrics"].keys()
    for name, value in hand["metrics"].items():
        if value is None:
            assert runner["metrics"][name] is None, name
        else:
            assert runner["metrics"][name] == pytest.approx(value, abs=1e-6), name
    assert runner["open_unlearning"] == pytest.approx(hand["open_unlearning"], abs=1e-6)


@pytest.mark.slow
def test_the_runner_path_gives_the_hand_paths_values(tmp_path, tiny_model, tiny_tokenizer):
    from medunlearn.models import TinyLlamaConfig, build_tiny_llama

    tiny_model.eval()
    retain = build_tiny_llama(tiny_tokenizer, TinyLlamaConfig(seed=1)).eval()
    folder = _tiny_muse_folder(tmp_path / "muse")
    ours, reference = _hand_outputs(tiny_model, tiny_tokenizer, folder)
    retain_forget, retain_holdout = (
        [
            list(_teacher_forced(retain, tiny_tokenizer(r["text"]).input_ids)[0])
            for r in muse_examples(folder)[t]
        ]
        for t in ("privleak_forget", "privleak_holdout")
    )
    for name, hand_outputs, retain_model in (
        ("medunlearn", ours, None),
        ("open-unlearning", reference, (retain, tiny_tokenizer)),
    ):
        conventions = _conventions(name)
        retain_auc = None
        if retain_model is not None:
            retain_auc = privleak_auc(retain_forget, retain_holdout, conventions)
        hand = score_muse(hand_outputs, conventions, retain_auc)
        out = tmp_path / name
        runner = evaluate_muse(
            tiny_model,
            folder,
            out,
            tokenizer=tiny_tokenizer,
            retain_model=retain_model,
            conventions=conventions,
            runner_config=QUIET,
        )
        _assert_same_summary(runner, hand)
        table = pd.read_parquet(out / "per_example.parquet")
        scored = table[table["task"].isin(["knowmem_forget", "knowmem_retain", "verbmem"])]
        generations = (
            hand_outputs.knowmem_forget_generations
            + hand_outputs.knowmem_retain_generations
            + hand_outputs.verbmem_generations
        )
        truths = (
            hand_outputs.knowmem_forget_references
            + hand_outputs.knowmem_retain_references
            + hand_outputs.verbmem_references
        )
        assert scored["generated_text"].tolist() == generations
        assert scored["ground_truth"].tolist() == truths
        rouge = [hand["per_example"][name] for name in ("knowmem_f", "knowmem_r", "verbmem_f")]
        np.testing.assert_allclose(scored["rouge_l_f1"], np.concatenate(rouge), atol=1e-12)
        verbmem = table[table["task"] == "verbmem"]["extraction_strength"].to_numpy()
        np.testing.assert_allclose(verbmem, hand["per_example"]["extraction_strength"], atol=1e-12)
        min_k = [
            min_k_row_scores(rows, conventions)
            for rows in (hand_outputs.privleak_forget_logprobs, hand_outputs.privleak_holdout_logprobs)
        ]
        privleak = table[table["task"].str.startswith("privleak")]["min_k_score"].to_numpy()
        np.testing.assert_allclose(privleak, np.concatenate(min_k), atol=1e-6)
    # Not vacuous: the retain model's AUC entered PrivLeak, and the reference's extraction strength (at least
    # 1/|y| a row) and the AUC are neither bound. (ROUGE is 0: a fresh tiny model's text shares no word with
    # any reference; the generations themselves are compared above.)
    assert hand["metrics"]["privleak"] is not None and runner["metrics"]["retain_auc"] == retain_auc
    assert 0.0 < hand["metrics"]["extraction_strength"] < 1.0
    assert 0.0 < hand["metrics"]["mia_min_k_auc"] < 1.0


def test_clean_up_spaces_is_transformers_clean_up(tiny_tokenizer):
    texts = ["It is n't here , is it ? Yes !", "they 're sure ' twas what we 've said . I 'm", "no change"]
    for text in texts:
        assert clean_up_spaces(text) == tiny_tokenizer.clean_up_tokenization(text)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A MUSE folder and a tiny checkpoint saved as `medunlearn finetune` saves one."""
    from medunlearn.models import build_tiny_llama_for_texts

    root = tmp_path_factory.mktemp("muse-evaluate")
    folder = _tiny_muse_folder(root / "data")
    rows = muse_examples(folder)
    texts = [r.get("text") or r["prompt"] + " " + r["reference"] for task in rows.values() for r in task]
    model, tokenizer = build_tiny_llama_for_texts(texts)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return folder, root / "model"


def _evaluate(*argv) -> int:
    from medunlearn.cli import main

    return main(
        ["evaluate", "--benchmark", "muse", "--max-new-tokens", "2", "--no-progress", *map(str, argv)]
    )


def test_the_command_writes_the_folder_and_the_reference_summary(saved_model, tmp_path, capsys):
    folder, model = saved_model
    out = tmp_path / "eval"
    assert _evaluate("--model", model, "--data", folder, "--out", out, "--preset", "open-unlearning") == 0
    summary = json.loads((out / "summary.json").read_text())
    reference = json.loads((out / "MUSE_SUMMARY.json").read_text())
    assert list(reference) == sorted(summary["open_unlearning"])  # privleak: the reference's AUC 0.5
    assert reference == pytest.approx(summary["open_unlearning"])
    assert summary["metrics"]["retain_auc"] == 0.5 and summary["conventions"]["name"] == "open-unlearning"
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["complete"] and run_info["models"] == {"model": str(model)}
    assert run_info["conventions"]["verbmem_max_new_tokens"] == 2
    for name in ("model-knowmem", "model-verbmem", "model-privleak"):
        assert (out / "outputs" / name / "manifest.json").is_file()
    table = pd.read_parquet(out / "per_example.parquet")
    assert table["task"].value_counts().to_dict() == {
        "knowmem_forget": 2,
        "knowmem_retain": 2,
        "privleak_forget": 3,
        "privleak_holdout": 3,
        "verbmem": 2,
    }
    assert str(out / "summary.json") in capsys.readouterr().out
    # Our preset, without a retain model, reports no PrivLeak; the reference file then leaves it out.
    ours = tmp_path / "ours"
    assert _evaluate("--model", model, "--data", folder, "--out", ours) == 0
    assert json.loads((ours / "summary.json").read_text())["metrics"]["privleak"] is None
    assert "privleak" not in json.loads((ours / "MUSE_SUMMARY.json").read_text())


def test_a_bad_folder_exits_2_naming_file_row_and_field_and_writes_nothing(saved_model, tmp_path, capsys):
    import shutil

    folder, model = saved_model
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    split = bad / "verbmem" / "forget.jsonl"
    rows = [json.loads(line) for line in split.read_text().splitlines()]
    del rows[1]["gt"]
    split.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "eval"
    assert _evaluate("--model", model, "--data", bad, "--out", out) == 2
    error = capsys.readouterr().err
    assert "verbmem/forget.jsonl" in error and "row 2" in error and "'gt'" in error
    assert not out.exists()
    assert _evaluate("--model", model, "--data", folder, "--out", out, "--forget", "forget10") == 2
    assert "--forget: not an option of --benchmark muse" in capsys.readouterr().err
    assert not out.exists()


def test_a_second_run_reuses_the_outputs_without_loading_the_model(saved_model, tmp_path, monkeypatch):
    from medunlearn.muse import evaluate as muse_evaluate

    folder, model = saved_model
    out, retain = tmp_path / "eval", tmp_path / "retain"
    argv = [
        "--model",
        model,
        "--data",
        folder,
        "--out",
        out,
        "--retain-model",
        model,
        "--retain-outputs",
        retain,
    ]
    assert _evaluate(*argv) == 0
    shards = {p: p.stat().st_mtime_ns for p in out.rglob("*.parquet") if "outputs" in p.parts}
    shards |= {p: p.stat().st_mtime_ns for p in retain.glob("*.parquet")}
    first = json.loads((out / "summary.json").read_text())
    loads = []
    original = muse_evaluate._resolve
    monkeypatch.setattr(muse_evaluate, "_resolve", lambda m, *rest: loads.append(m) or original(m, *rest))
    assert _evaluate(*argv) == 0
    assert loads == []  # neither the model nor the retain model is loaded
    assert {p: p.stat().st_mtime_ns for p in shards} == shards
    assert json.loads((out / "summary.json").read_text()) == first
    assert first["metrics"]["privleak"] is not None  # the retain model's AUC was read from its folder
    assert score_muse_folder(out)["metrics"] == first["metrics"]  # --rescore: no model


def test_an_interrupted_evaluation_resumes_to_the_same_summary(tmp_path, tiny_model, tiny_tokenizer):
    folder = _tiny_muse_folder(tmp_path / "muse")
    settings = {"tokenizer": tiny_tokenizer, "conventions": _conventions("open-unlearning")}
    whole = evaluate_muse(tiny_model, folder, tmp_path / "whole", runner_config=QUIET, **settings)
    out = tmp_path / "resumed"
    stopped = replace(QUIET, stop_after_batches=1)
    assert evaluate_muse(tiny_model, folder, out, runner_config=stopped, **settings) == {}
    assert json.loads((out / "run.json").read_text())["complete"] is False
    first_shards = {p: p.stat().st_mtime_ns for p in (out / "outputs").rglob("*-00000.parquet")}
    resumed = evaluate_muse(tiny_model, folder, out, runner_config=QUIET, **settings)
    assert {p: p.stat().st_mtime_ns for p in first_shards} == first_shards  # kept, not recomputed
    assert resumed["metrics"] == whole["metrics"]
