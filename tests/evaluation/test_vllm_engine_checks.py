"""``--engine vllm`` generates only for the weights it was asked about, and only for models vLLM can serve.

Against a fake OpenAI-compatible server (tests/fake_vllm.py: ``/v1/models`` lists each served model's root
folder, as vLLM does), no vLLM needed: a server that does not serve the checkpoint is refused before anything
is generated or written; an in-memory model never goes to a URL; the generation fingerprint records the
served weights; a study (a different model in every cell) at one URL is refused. A checkpoint vLLM's CPU
backend cannot serve (head size 16) is refused before any server starts, and a server that dies mid-run is
quoted from its log.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from fake_vllm import ANSWER_TOKENS, FakeVLLM, fake_vllm_python

from medunlearn.cli import main
from medunlearn.errors import InputError
from medunlearn.evaluation.engines import GenerationEngineError, VLLMEngine, make_engine
from medunlearn.evaluation.runner import (
    GENERATION,
    RunnerConfig,
    outputs_fingerprint,
    read_outputs,
    run_model,
)
from medunlearn.models import TinyLlamaConfig, build_tiny_llama

QUESTIONS = ["Which artery was occluded?", "What was the troponin level?", "Biopsy?"]


def examples_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "example_id": [f"q{i}" for i in range(len(QUESTIONS))],
            "question": QUESTIONS,
            "answer": ["An answer."] * len(QUESTIONS),
        }
    )


def save(model, tokenizer, folder):
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture()
def checkpoints(tiny_tokenizer, tmp_path):
    """Two different tiny checkpoints (``model`` and ``before``) in the default tiny-llama shape."""
    return {
        role: save(
            build_tiny_llama(tiny_tokenizer, TinyLlamaConfig(seed=seed)), tiny_tokenizer, tmp_path / role
        )
        for seed, role in enumerate(("model", "before"))
    }


CONFIG = RunnerConfig(engine="vllm", batch_size=2, max_new_tokens=4, progress=False)


# --- point 1: a URL generates only for the checkpoint it serves


def test_a_url_that_serves_other_weights_is_refused_before_anything_is_generated_or_written(
    checkpoints, tiny_tokenizer, tmp_path
):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(checkpoints["before"])
    out = tmp_path / "outputs"
    with FakeVLLM({"served": checkpoints["model"]}) as server:
        config = RunnerConfig(**{**CONFIG.__dict__, "vllm_url": server.base_url})
        with make_engine(config, model, checkpoints["before"]) as engine:
            with pytest.raises(InputError) as raised:
                run_model(model, tiny_tokenizer, examples_frame(), out, config, engine=engine)
        message = str(raised.value)
        for named in (server.base_url, "served", str(checkpoints["model"]), str(checkpoints["before"])):
            assert named in message
        # Naming the served model (--vllm-model) does not make it the checkpoint's weights.
        named = RunnerConfig(**{**config.__dict__, "vllm_model": "served"})
        with make_engine(named, model, checkpoints["before"]) as engine:
            with pytest.raises(InputError, match="served"):
                run_model(model, tiny_tokenizer, examples_frame(), out, named, engine=engine)
        assert server.completions == 0
    assert not out.exists()


def test_the_served_model_whose_root_is_the_checkpoint_is_the_one_requested(
    checkpoints, tiny_tokenizer, tmp_path
):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(checkpoints["model"])
    served = {"other": checkpoints["before"], "mine": checkpoints["model"]}
    with FakeVLLM(served) as server:
        config = RunnerConfig(**{**CONFIG.__dict__, "vllm_url": server.base_url})
        with make_engine(config, model, checkpoints["model"]) as engine:
            assert run_model(model, tiny_tokenizer, examples_frame(), tmp_path, config, engine=engine)
            assert engine.served_model == "mine"
        assert server.completions == len(QUESTIONS)
    outputs = read_outputs(tmp_path)
    assert all(list(ids) == ANSWER_TOKENS for ids in outputs["generated_token_ids"])


def test_an_in_memory_model_never_goes_to_a_url_it_generates_on_transformers(
    tiny_model, tiny_tokenizer, tmp_path, capsys
):
    with FakeVLLM({"served": tmp_path}) as server:
        config = RunnerConfig(**{**CONFIG.__dict__, "vllm_url": server.base_url})
        assert run_model(tiny_model, tiny_tokenizer, examples_frame(), tmp_path / "vllm", config)
        assert server.completions == 0
        with pytest.raises(InputError, match="in-memory"):
            VLLMEngine(None, url=server.base_url, model=tiny_model)
    assert "in-memory" in capsys.readouterr().err
    hf = RunnerConfig(batch_size=2, max_new_tokens=4, progress=False)
    run_model(tiny_model, tiny_tokenizer, examples_frame(), tmp_path / "hf", hf)
    a, b = read_outputs(tmp_path / "vllm"), read_outputs(tmp_path / "hf")
    assert a["generated_token_ids"].map(list).tolist() == b["generated_token_ids"].map(list).tolist()
    # The engine that generated is the one fingerprinted: these are transformers' outputs.
    manifest = json.loads((tmp_path / "vllm" / "manifest.json").read_text())
    assert (
        manifest["fingerprint"] == json.loads((tmp_path / "hf" / "manifest.json").read_text())["fingerprint"]
    )


def test_the_generation_fingerprint_records_the_served_weights(checkpoints, tiny_tokenizer, tmp_path):
    from transformers import AutoModelForCausalLM

    from medunlearn.evaluation.engines import served_weights_identity

    examples = examples_frame()
    a = outputs_fingerprint("m", examples, CONFIG, "w", passes=(GENERATION,), served_weights="/a")
    b = outputs_fingerprint("m", examples, CONFIG, "w", passes=(GENERATION,), served_weights="/b")
    assert a != b
    model = AutoModelForCausalLM.from_pretrained(checkpoints["model"])
    with FakeVLLM({"mine": checkpoints["model"]}) as server:
        config = RunnerConfig(**{**CONFIG.__dict__, "vllm_url": server.base_url})
        with make_engine(config, model, checkpoints["model"]) as engine:
            run_model(
                model,
                tiny_tokenizer,
                examples,
                tmp_path,
                config,
                engine=engine,
                weights="w",
                model_id="m",
                passes=(GENERATION,),
            )
    identity = served_weights_identity(checkpoints["model"])
    assert identity == str(checkpoints["model"].resolve())
    expected = outputs_fingerprint("m", examples, config, "w", passes=(GENERATION,), served_weights=identity)
    assert json.loads((tmp_path / "manifest.json").read_text())["fingerprint"] == expected
    assert expected != outputs_fingerprint(
        "m", examples, config, "w", passes=(GENERATION,), served_weights="/b"
    )


@pytest.fixture(scope="module")
def amnesia_folder(tmp_path_factory):
    from medunlearn.amnesia import build_amnesia_folder

    return build_amnesia_folder(tmp_path_factory.mktemp("amnesia") / "amnesia", patients=12, seed=0)


def test_evaluate_at_a_url_that_does_not_serve_before_exits_2_and_writes_nothing(
    checkpoints, amnesia_folder, tmp_path, capsys
):
    out = tmp_path / "eval"
    with FakeVLLM({"unlearned": checkpoints["model"]}) as server:
        status = main(
            [
                "evaluate",
                "--model",
                str(checkpoints["model"]),
                "--before",
                str(checkpoints["before"]),
                "--data",
                str(amnesia_folder),
                "--forget",
                "forget_10",
                "--out",
                str(out),
                "--max-new-tokens",
                "4",
                "--max-retain-patients",
                "2",
                "--no-progress",
                "--engine",
                "vllm",
                "--vllm-url",
                server.base_url,
            ]
        )
        assert server.completions == 0
    error = capsys.readouterr().err
    assert status == 2
    assert server.base_url in error and str(checkpoints["before"]) in error and "unlearned" in error
    assert not out.exists()


def test_a_study_at_one_url_is_refused_before_it_starts(tmp_path, capsys):
    study = tmp_path / "study.yaml"
    study.write_text(
        "name: s\nmodel: tiny-llama\ndata: {path: " + str(tmp_path / "amnesia") + "}\n"
        "methods: {grad_diff: {}}\nforget: [forget_10]\n"
    )
    out = tmp_path / "study"
    status = main(["study", str(study), "--out", str(out), "--engine", "vllm", "--vllm-url", "http://h:1/v1"])
    assert status == 2
    assert "--vllm-url" in capsys.readouterr().err
    assert not out.exists()


# --- point 9: what vLLM's CPU backend cannot serve is refused before a server starts


def test_a_head_size_vllm_cpu_does_not_serve_is_refused_before_any_server_starts(
    tiny_tokenizer, tmp_path, monkeypatch
):
    narrow = build_tiny_llama(tiny_tokenizer, TinyLlamaConfig(num_attention_heads=4, num_key_value_heads=2))
    folder = save(narrow, tiny_tokenizer, tmp_path / "head16")
    started = tmp_path / "started"
    monkeypatch.setenv("FAKE_VLLM_STARTED", str(started))
    engine = VLLMEngine(folder, python=fake_vllm_python(tmp_path), model=narrow)
    with pytest.raises(InputError) as raised:
        engine.start(max_model_len=256)
    engine.close()
    assert "head size 16" in str(raised.value) and "--engine hf" in str(raised.value)
    assert not started.exists()
    from medunlearn.llm.server import check_vllm_cpu_can_serve

    with pytest.raises(InputError, match="float64"):
        check_vllm_cpu_can_serve({"architectures": ["LlamaForCausalLM"], "head_dim": 64}, "float64", "m")
    with pytest.raises(InputError, match="BertModel"):
        check_vllm_cpu_can_serve({"architectures": ["BertModel"], "head_dim": 64}, "float32", "m")


def test_evaluate_a_model_vllm_cpu_cannot_serve_exits_2_before_writing(
    tiny_tokenizer, amnesia_folder, tmp_path, capsys
):
    narrow = build_tiny_llama(tiny_tokenizer, TinyLlamaConfig(num_attention_heads=4, num_key_value_heads=2))
    folder = save(narrow, tiny_tokenizer, tmp_path / "head16")
    out = tmp_path / "eval"
    argv = ["evaluate", "--model", str(folder), "--data", str(amnesia_folder), "--forget", "forget_10"]
    status = main([*argv, "--out", str(out), "--engine", "vllm", "--vllm-python", "/absent/python"])
    assert status == 2
    assert "head size 16" in capsys.readouterr().err
    assert not out.exists()


def test_the_tiny_llama_default_is_a_shape_vllm_cpu_serves(tiny_tokenizer):
    from medunlearn.evaluation.engines import check_checkpoint_servable
    from medunlearn.llm.server import VLLM_CPU_HEAD_SIZES

    model = build_tiny_llama(tiny_tokenizer)
    head_size = model.config.hidden_size // model.config.num_attention_heads
    assert head_size in VLLM_CPU_HEAD_SIZES
    check_checkpoint_servable(None, "float32", model=model)


def test_a_server_that_dies_mid_run_is_quoted_from_its_log(
    checkpoints, tiny_tokenizer, tmp_path, monkeypatch
):
    from transformers import AutoModelForCausalLM

    cause = "RuntimeError: Unsupported CPU attention configuration: head_dim=16"
    monkeypatch.setenv("FAKE_VLLM_DIE_WITH", cause)
    model = AutoModelForCausalLM.from_pretrained(checkpoints["model"])
    engine = VLLMEngine(checkpoints["model"], python=fake_vllm_python(tmp_path), model=model)
    with engine, pytest.raises(GenerationEngineError) as raised:
        run_model(model, tiny_tokenizer, examples_frame(), tmp_path / "out", CONFIG, engine=engine)
    message = str(raised.value)
    assert cause in message and "exited with status 1" in message
    assert "rerun the same command" not in message
