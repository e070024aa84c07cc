"""The transformers engine's GPU options, checked on CPU: a static KV cache gives the dynamic cache's greedy
tokens, ``decoding="compiled"`` is refused without CUDA, and ``batch_size="auto"`` resolves (to 16 without
CUDA; halving on a simulated CUDA out-of-memory error) without changing any output."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from medunlearn.errors import InputError
from medunlearn.evaluation.runner import (
    AUTO_BATCH_SIZE_WITHOUT_CUDA,
    MANIFEST,
    RunnerConfig,
    outputs_fingerprint,
    read_outputs,
    run_model,
)
from medunlearn.generation import generate_texts, greedy_generate, resolve_decoding

QUIET = {"progress": False, "max_new_tokens": 12}


def _prompts(tokenizer) -> list[list[int]]:
    texts = [
        "What was the troponin level?",
        "Which artery?",
        "A 54-year-old man presented with chest pain radiating to the left arm for two hours.",
        "Biopsy of the breast mass",
        "Sputum culture grew Streptococcus pneumoniae sensitive to penicillin; she received amoxicillin.",
        "ST",
    ]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def _pad(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def test_static_cache_generates_the_dynamic_cache_tokens(lively_model, tiny_tokenizer):
    prompts = _prompts(tiny_tokenizer)
    assert len({len(p) for p in prompts}) == len(prompts)  # every batch is left-padded
    eos = [tiny_tokenizer.eos_token_id]
    dynamic = greedy_generate(lively_model, prompts, _pad(tiny_tokenizer), eos, 16)
    static = greedy_generate(lively_model, prompts, _pad(tiny_tokenizer), eos, 16, decoding="static")
    assert static == dynamic
    assert len({tuple(tokens) for tokens in dynamic}) > 1  # the model's continuations differ: a real check
    texts = [tiny_tokenizer.decode(p) for p in prompts]
    kwargs = {"max_new_tokens": 16, "batch_size": 4}  # batches of 4 and 2: two cache shapes
    assert generate_texts(lively_model, tiny_tokenizer, texts, decoding="static", **kwargs) == generate_texts(
        lively_model, tiny_tokenizer, texts, **kwargs
    )


def test_compiled_decoding_is_refused_without_cuda(lively_model, tiny_tokenizer, make_examples, tmp_path):
    assert resolve_decoding("auto", "cpu") == "dynamic"
    with pytest.raises(InputError, match="'compiled'.*needs a CUDA device.*'cpu'"):
        resolve_decoding("compiled", "cpu")
    with pytest.raises(InputError, match="needs a CUDA device"):
        run_model(
            lively_model,
            tiny_tokenizer,
            make_examples(),
            tmp_path,
            RunnerConfig(decoding="compiled", **QUIET),
        )


def test_runner_static_cache_equals_dynamic_and_is_fingerprinted(
    lively_model, tiny_tokenizer, make_examples, tmp_path
):
    examples = make_examples()
    run_model(lively_model, tiny_tokenizer, examples, tmp_path / "dynamic", RunnerConfig(**QUIET))
    run_model(
        lively_model, tiny_tokenizer, examples, tmp_path / "static", RunnerConfig(decoding="static", **QUIET)
    )
    dynamic, static = read_outputs(tmp_path / "dynamic"), read_outputs(tmp_path / "static")
    assert static["generated_text"].tolist() == dynamic["generated_text"].tolist()
    fingerprint = {
        name: json.loads((tmp_path / name / MANIFEST).read_text())["fingerprint"]
        for name in ("dynamic", "static")
    }
    assert fingerprint["dynamic"] != fingerprint["static"]
    # "auto" resolves before fingerprinting: on CPU it is the dynamic cache, with the dynamic fingerprint.
    run_model(
        lively_model, tiny_tokenizer, examples, tmp_path / "dynamic", RunnerConfig(decoding="auto", **QUIET)
    )
    # The new settings leave the default fingerprint as it was.
    assert outputs_fingerprint("m", examples, RunnerConfig()) == outputs_fingerprint(
        "m", examples, RunnerConfig(max_batch_size=4)
    )


def test_batch_size_auto_without_cuda_is_the_default_and_is_recorded(
    lively_model, tiny_tokenizer, make_examples, tmp_path, capsys
):
    examples = make_examples()
    run_model(
        lively_model, tiny_tokenizer, examples, tmp_path / "auto", RunnerConfig(batch_size="auto", **QUIET)
    )
    manifest = json.loads((tmp_path / "auto" / MANIFEST).read_text())
    assert (
        manifest["batch_sizes"]
        == {"teacher_forced": 16, "generation": 16}
        == {
            "teacher_forced": AUTO_BATCH_SIZE_WITHOUT_CUDA,
            "generation": AUTO_BATCH_SIZE_WITHOUT_CUDA,
        }
    )
    assert "auto: generation: batch_size='auto' chose 16" in capsys.readouterr().err
    run_model(
        lively_model, tiny_tokenizer, examples, tmp_path / "fixed", RunnerConfig(batch_size=16, **QUIET)
    )
    pd.testing.assert_frame_equal(read_outputs(tmp_path / "auto"), read_outputs(tmp_path / "fixed"))
    fixed = json.loads((tmp_path / "fixed" / MANIFEST).read_text())
    assert fixed["batch_sizes"] == manifest["batch_sizes"]
    assert fixed["fingerprint"] != manifest["fingerprint"]  # the batch plan's setting is fingerprinted


def _fits_batches_of(model, limit: int, monkeypatch) -> list[int]:
    """Make ``model``'s forward raise CUDA's out-of-memory error on batches above ``limit``; returns the
    batch sizes it was called with."""
    forward = model.forward
    seen: list[int] = []

    def limited_forward(*args, **kwargs):
        inputs = kwargs.get("input_ids")
        inputs = inputs if inputs is not None else kwargs.get("inputs_embeds", args[0] if args else None)
        seen.append(int(inputs.shape[0]))
        if inputs.shape[0] > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", limited_forward)
    return seen


def test_batch_size_auto_halves_on_out_of_memory_to_the_size_that_fits(
    lively_model, tiny_tokenizer, make_examples, tmp_path, capsys, monkeypatch
):
    examples = make_examples()
    run_model(lively_model, tiny_tokenizer, examples, tmp_path / "fixed", RunnerConfig(batch_size=4, **QUIET))
    seen = _fits_batches_of(lively_model, 4, monkeypatch)
    run_model(
        lively_model, tiny_tokenizer, examples, tmp_path / "auto", RunnerConfig(batch_size="auto", **QUIET)
    )
    manifest = json.loads((tmp_path / "auto" / MANIFEST).read_text())
    # 16 and 8 both make one batch of the 7 examples (too large); 4 fits.
    assert manifest["batch_sizes"] == {"teacher_forced": 4, "generation": 4}
    assert max(seen) == 7
    err = capsys.readouterr().err
    assert "batch size 16 ran out of memory; trying 8" in err
    assert "batch size 8 ran out of memory; trying 4" in err
    assert "auto: teacher_forced: batch_size='auto' chose 4" in err
    fixed, auto = read_outputs(tmp_path / "fixed"), read_outputs(tmp_path / "auto")
    assert auto["generated_text"].tolist() == fixed["generated_text"].tolist()
    for column in ("token_logprobs", "token_mean_logprob"):
        for a, b in zip(auto[column], fixed[column]):
            assert a == pytest.approx(b, abs=1e-5)
    # A resumed run reuses the recorded sizes without searching again.
    run_model(
        lively_model, tiny_tokenizer, examples, tmp_path / "auto", RunnerConfig(batch_size="auto", **QUIET)
    )
    assert "ran out of memory" not in capsys.readouterr().err


def test_batch_size_auto_needs_one_process(lively_model, tiny_tokenizer, make_examples, tmp_path):
    with pytest.raises(InputError, match="single process"):
        run_model(
            lively_model,
            tiny_tokenizer,
            make_examples(),
            tmp_path,
            RunnerConfig(batch_size="auto", **QUIET),
            num_processes=2,
        )


def test_cli_options_reach_the_runner_config():
    from medunlearn.cli.evaluate import _runner_config, build_parser

    parser = build_parser()
    required = ["--model", "m", "--data", "d", "--forget", "f", "--out", "o"]
    config = _runner_config(
        parser.parse_args([*required, "--batch-size", "auto", "--decoding", "auto", "--max-batch-size", "64"])
    )
    assert (config.batch_size, config.decoding, config.max_batch_size, config.engine) == (
        "auto",
        "auto",
        64,
        "hf",
    )
    assert _runner_config(parser.parse_args(required)).batch_size == 16
    for bad in ("0", "big"):
        with pytest.raises(SystemExit):
            parser.parse_args([*required, "--batch-size", bad])
