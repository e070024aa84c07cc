"""Evaluation in bf16 (``RunnerConfig.dtype``, ``--dtype``; docs/scaling.md "Precision"): the dtype is part of
what is computed, so it enters the fingerprint (float32 fingerprints stay those of earlier versions), a
model loaded from its folder is cast to it, and its metrics stay within the stated tolerance of float32's."""

from __future__ import annotations

import json

import pytest

from medunlearn.evaluation.outputs_folder import outputs_fingerprint
from medunlearn.evaluation.settings import RunnerConfig
from medunlearn.utils import precision

# Written by the code before RunnerConfig had a dtype (the same examples table, model id and weights).
FLOAT32_FINGERPRINTS = {
    "both passes, defaults": "2bcdd36bce9bef6020de537417c7150dbaca74b6d20e59e8287d34cbe8e2f0da",
    "teacher-forced, batch 4": "9f9c798f66c890e26900606a608d7ddc0956d06c105f90a5fe2f375b8dbe179e",
}


def _fingerprints(make_examples, **config):
    examples = make_examples()
    return {
        "both passes, defaults": outputs_fingerprint("m", examples, RunnerConfig(**config), "w"),
        "teacher-forced, batch 4": outputs_fingerprint(
            "m", examples, RunnerConfig(batch_size=4, **config), "w", passes=("teacher_forced",)
        ),
    }


def test_float32_fingerprints_are_those_of_earlier_versions(make_examples, monkeypatch):
    assert _fingerprints(make_examples) == FLOAT32_FINGERPRINTS
    assert _fingerprints(make_examples, dtype="float32") == FLOAT32_FINGERPRINTS
    # `auto` resolved to float32 (this CPU: no native bf16) is float32.
    monkeypatch.setattr(precision, "cpu_flags", lambda *a: frozenset({"avx2"}))
    monkeypatch.setattr(precision, "default_device", lambda: "cpu")
    assert _fingerprints(make_examples, dtype="auto") == FLOAT32_FINGERPRINTS


def test_bfloat16_enters_the_fingerprint(make_examples, monkeypatch):
    bf16 = _fingerprints(make_examples, dtype="bfloat16")
    assert set(bf16.values()).isdisjoint(FLOAT32_FINGERPRINTS.values())
    # `auto` resolved to bf16 (a CPU with native bf16, measured fast) is bf16.
    monkeypatch.setattr(precision, "cpu_flags", lambda *a: frozenset({"amx_bf16"}))
    monkeypatch.setattr(precision, "bf16_matmul_speedup", lambda *a: 3.0)
    monkeypatch.setattr(precision, "default_device", lambda: "cpu")
    assert _fingerprints(make_examples, dtype="auto") == bf16


def _save(model, tokenizer, folder):
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def _token_logprobs(folder):
    import pandas as pd

    table = pd.concat(pd.read_parquet(p) for p in sorted(folder.glob("teacher_forced-*.parquet")))
    return table.sort_values("example_id")


def test_a_folder_model_is_evaluated_in_the_config_dtype(
    lively_model, tiny_tokenizer, make_examples, tmp_path, one_torch_thread
):
    import numpy as np

    from medunlearn.evaluation.pipeline import evaluate_unlearning

    model = _save(lively_model, tiny_tokenizer, tmp_path / "model")
    logprobs, manifests = {}, {}
    for dtype in ("float32", "bfloat16"):
        out = tmp_path / dtype
        config = RunnerConfig(batch_size=4, max_new_tokens=3, progress=False, dtype=dtype)
        evaluate_unlearning(
            str(model), None, "forget_10", out, runner_config=config, examples=make_examples()
        )
        logprobs[dtype] = _token_logprobs(out / "outputs" / "model")
        manifests[dtype] = json.loads((out / "outputs" / "model" / "manifest.json").read_text())
    assert manifests["float32"]["fingerprint"] != manifests["bfloat16"]["fingerprint"]
    fp32 = np.concatenate(logprobs["float32"]["token_logprobs"].to_list())
    bf16 = np.concatenate(logprobs["bfloat16"]["token_logprobs"].to_list())
    difference = np.abs(fp32 - bf16)
    # Computed in bf16 (not cast back to float32 and run in float32): the values differ by bf16 rounding
    # (8 significant bits), about 0.3 at most on this random model's peaked logits.
    assert 1e-4 < difference.max() < 1.0


def test_a_model_object_runs_in_its_own_dtype_which_its_outputs_record(
    lively_model, tiny_tokenizer, make_examples, tmp_path
):
    import torch

    from medunlearn.evaluation.outputs_folder import weights_checksum
    from medunlearn.evaluation.pipeline import evaluate_unlearning

    lively_model.to(torch.bfloat16)
    config = RunnerConfig(batch_size=4, max_new_tokens=2, progress=False)  # float32 asked
    evaluate_unlearning(
        lively_model,
        None,
        "forget_10",
        tmp_path / "e",
        tokenizer=tiny_tokenizer,
        runner_config=config,
        examples=make_examples(),
    )
    assert next(lively_model.parameters()).dtype is torch.bfloat16  # the caller's object is left as it is
    manifest = json.loads((tmp_path / "e" / "outputs" / "model" / "manifest.json").read_text())
    weights = weights_checksum(lively_model)
    as_asked = outputs_fingerprint(manifest["model"], make_examples(), config, weights)
    as_computed = outputs_fingerprint(
        manifest["model"], make_examples(), RunnerConfig(**{**config.__dict__, "dtype": "bfloat16"}), weights
    )
    assert manifest["fingerprint"] == as_computed != as_asked


# docs/scaling.md, "Precision": measured on this fixture over 12 seeds, bf16 against float32 (max |Δ|):
# prob 0.0005, loss 0.0008, answer token entropy 0.0038; ROUGE-L / AFE / MU / ES 0 except where a greedy
# near-tie flips a token (1 seed of 12): then up to 0.056 on these 7-answer populations.
TEACHER_FORCED_TOLERANCE = 0.01
GENERATION_TOLERANCE = 0.1
TEACHER_FORCED_METRICS = ("prob", "loss", "answer_token_entropy")
GENERATION_METRICS = ("rouge_l_f1", "answer_forgetting", "model_utility", "extraction_strength", "similarity")


@pytest.mark.slow  # ~15 s: two models evaluated twice, bf16 emulated on an AVX2 CPU
def test_bf16_metrics_are_within_the_stated_tolerance_of_float32(
    tiny_tokenizer, make_examples, tmp_path, one_torch_thread
):
    import pandas as pd
    import torch
    from evaluation.conftest import ANSWERS, QUESTIONS
    from tiny_training import memorised_tiny_model

    from medunlearn.evaluation.pipeline import evaluate_unlearning

    populations = ("forget_seen", "retain_same_disease", "retain_out_of_disease")
    examples = pd.concat([make_examples(population=p) for p in populations], ignore_index=True)
    rows = {"question": list(QUESTIONS), "answer": list(ANSWERS)}
    torch.manual_seed(1)
    before = _save(memorised_tiny_model(tiny_tokenizer, rows, steps=60), tiny_tokenizer, tmp_path / "before")
    # fewer steps: it knows the answers less well (AFE > 0); this seed's greedy answers flip one token in bf16
    model = _save(memorised_tiny_model(tiny_tokenizer, rows, steps=30), tiny_tokenizer, tmp_path / "model")
    summaries = {}
    for dtype in ("float32", "bfloat16"):
        config = RunnerConfig(batch_size=8, max_new_tokens=16, progress=False, dtype=dtype)
        summaries[dtype] = evaluate_unlearning(
            str(model),
            None,
            "forget_10",
            tmp_path / dtype,
            before=str(before),
            runner_config=config,
            examples=examples,
        )["populations"]
    differences = {}
    for population, cells in summaries["float32"].items():
        for metric in TEACHER_FORCED_METRICS + GENERATION_METRICS:
            value, bf16 = cells["all"].get(metric), summaries["bfloat16"][population]["all"].get(metric)
            if value is not None:
                differences[f"{population}.{metric}"] = abs(value - bf16)
    print({name: round(d, 4) for name, d in differences.items()})  # the figures docs/scaling.md cites
    assert summaries["float32"]["forget_seen"]["all"]["answer_forgetting"] > 0.1  # something to compare
    assert 0 < max(differences.values())  # bf16 was computed, not float32 twice
    for name, difference in differences.items():
        tolerance = TEACHER_FORCED_TOLERANCE if name.split(".")[1] in TEACHER_FORCED_METRICS else None
        assert difference <= (tolerance or GENERATION_TOLERANCE), name


@pytest.mark.parametrize(
    ("argv", "flags", "expected", "said"),
    [
        (["--dtype", "bfloat16"], {"avx2"}, "bfloat16", "dtype: bfloat16 (as asked)"),
        ([], {"avx2"}, "float32", "dtype: float32 (auto: this CPU has no native bf16 flag"),
        ([], {"amx_bf16"}, "bfloat16", "dtype: bfloat16 (auto: amx_bf16; bf16 matmul 4.00x float32)"),
        (
            ["--benchmark", "tofu", "--preset", "open-unlearning"],
            {"amx_bf16"},
            "float32",
            "dtype: float32 (auto: the open-unlearning preset pins float32 on CPU)",
        ),
    ],
)
def test_evaluate_dtype_option(monkeypatch, capsys, argv, flags, expected, said):
    from medunlearn.cli import evaluate as cli

    monkeypatch.setattr(precision, "cpu_flags", lambda *a: frozenset(flags))
    monkeypatch.setattr(precision, "bf16_matmul_speedup", lambda *a: 4.0)
    monkeypatch.setattr(precision, "default_device", lambda: "cpu")
    args = cli.build_parser().parse_args(["--out", "e", *argv])
    assert cli._runner_config(args).dtype == expected
    assert said in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [([], "bfloat16"), (["--preset", "open-unlearning"], "float32"), (["--dtype", "float32"], "float32")],
)
def test_tofu_evaluate_resolves_dtype_as_evaluate_benchmark_tofu_does(monkeypatch, argv, expected):
    """`tofu evaluate` and `evaluate --benchmark tofu` are one entry point: one --dtype, resolved alike."""
    from medunlearn.cli import evaluate as evaluate_cli
    from medunlearn.cli import tofu as tofu_cli

    monkeypatch.setattr(precision, "cpu_flags", lambda *a: frozenset({"amx_bf16"}))
    monkeypatch.setattr(precision, "bf16_matmul_speedup", lambda *a: 4.0)
    monkeypatch.setattr(precision, "default_device", lambda: "cpu")
    required = ["--model", "m", "--data", "d", "--out", "e"]
    tofu_args = tofu_cli.build_parser().parse_args(["evaluate", *required, *argv])
    evaluate_args = evaluate_cli.build_parser().parse_args([*required, "--benchmark", "tofu", *argv])
    assert tofu_cli.runner_config(tofu_args).dtype == expected
    assert evaluate_cli._runner_config(evaluate_args).dtype == expected
