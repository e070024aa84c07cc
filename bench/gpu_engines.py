"""Greedy generation of an 8B-shaped Llama on one GPU: hf dynamic cache vs hf static cache + torch.compile vs
the vLLM engine, on one TOFU-sized workload, in one run. Prepared for a session with a lent CUDA GPU.

    python bench/gpu_engines.py [--prompts 400] [--max-new-tokens 200] [--batch-size auto]
                                [--vllm-python PATH] [--skip-vllm] [--repeats 2]
    python bench/gpu_engines.py --tiny   # CPU smoke test: a tiny Llama, (a) and (b) (static, not compiled)

The model is ``LlamaConfig`` of Llama-3-8B (hidden 4096, 32 layers, 32 heads, 8 KV heads, intermediate 14336,
vocabulary 128256) with random weights in bf16; the workload is TOFU forget10's size (400 questions, up to 200
new tokens, as OpenUnlearning's generation config) through the runner's generation pass
(``run_model(..., passes=("generation",))``), so every engine gets the same prompt token ids:

(a) ``hf`` with transformers' dynamic KV cache (``decoding="dynamic"``);
(b) ``hf`` with a static KV cache and the decoding step under ``torch.compile`` (``decoding="compiled"``);
(c) ``vllm``: the model saved as safetensors to a temporary folder and served by a vLLM server started
    from ``--vllm-python`` (a CUDA build of vLLM; the CPU one in ``.venv-vllm`` does not use the GPU), after
    (a) and (b), with the transformers copy moved off the GPU.

Each is run ``--repeats`` times; the first run includes warm-up (the compile, CUDA graphs, the cache, the
vLLM server's start), the last is the one the tokens per second and ratios use. Random weights rarely emit
EOS, so nearly every prompt gets all ``--max-new-tokens``: the same work for every engine. Also prints how
many generations equal (a)'s token for token (random bf16 weights make near ties common, so some may
differ). Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

VLLM_VENV = Path(__file__).resolve().parents[1] / ".venv-vllm"
LLAMA_3_8B = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
}
TOPICS = (
    "the author's first novel",
    "the author's parents' professions",
    "the awards the author has won",
    "the city where the author was born",
    "the themes of the author's later work",
    "the author's writing routine",
    "the genre the author is known for",
    "the author's influences",
)


def questions(count: int) -> list[str]:
    """TOFU-like questions of varied length (distinct, so no two prompts share more than the template)."""
    return [
        f"Question {i}: what can you tell me about {TOPICS[i % len(TOPICS)]}"
        + ", and how did it shape their career" * (i % 3)
        + "?"
        for i in range(count)
    ]


def build_model(tiny: bool, tokenizer):
    """The model under test: a tiny Llama on CPU (float32), else the 8B-shaped one in bf16 on CUDA."""
    import torch

    from medunlearn.models import build_tiny_llama

    if tiny:
        return build_tiny_llama(tokenizer).eval()
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        **LLAMA_3_8B,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="bfloat16",
    )
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def timed_runs(label, model, tokenizer, examples, config, folder: Path, repeats: int, engine=None):
    """Seconds of every run of the generation pass (a fresh output folder each); the last run's outputs."""
    import torch

    from medunlearn.evaluation.runner import GENERATION, read_outputs, run_model

    seconds = []
    for repeat in range(repeats):
        out = folder / f"{label}-{repeat}"
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        started = time.perf_counter()
        run_model(
            model, tokenizer, examples, out, config, passes=(GENERATION,), weights="random", engine=engine
        )
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
        print(f"  {label} run {repeat + 1}/{repeats}: {seconds[-1]:.1f} s", flush=True)
    return seconds, read_outputs(out).set_index("example_id")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=None, help="default 400 (--tiny: 16)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default 200 (--tiny: 16)")
    parser.add_argument("--batch-size", default="auto", help="a number or auto (default auto)")
    parser.add_argument("--max-batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2, help="runs per engine; the last is timed")
    parser.add_argument("--vllm-python", default=None, help=f"a CUDA vLLM's Python (default {VLLM_VENV})")
    parser.add_argument("--vllm-arg", action="append", default=[], help="more vLLM server arguments")
    parser.add_argument("--skip-vllm", action="store_true", help="time (a) and (b) only")
    parser.add_argument("--tiny", action="store_true", help="CPU smoke test: tiny Llama, (a) and (b) only")
    args = parser.parse_args(argv)

    import torch

    if not args.tiny and not torch.cuda.is_available():
        print(
            "gpu_engines.py: error: needs a CUDA GPU (torch.cuda.is_available() is False on this machine); "
            "an 8B-shaped model is not timed on CPU. Use --tiny for the CPU smoke test.",
            file=sys.stderr,
        )
        return 2
    import pandas as pd

    from medunlearn.evaluation.runner import RunnerConfig
    from medunlearn.models import train_bpe_tokenizer

    prompts = args.prompts or (16 if args.tiny else 400)
    max_new_tokens = args.max_new_tokens or (16 if args.tiny else 200)
    batch_size = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    texts = questions(prompts)
    tokenizer = train_bpe_tokenizer(texts * 2, vocab_size=512)
    model = build_model(args.tiny, tokenizer)
    device = "cpu" if args.tiny else torch.cuda.get_device_name()
    examples = pd.DataFrame(
        {"example_id": [f"q{i}" for i in range(prompts)], "question": texts, "answer": "-"}
    )
    base = {
        "batch_size": batch_size,
        "max_batch_size": args.max_batch_size,
        "max_new_tokens": max_new_tokens,
        "progress": False,
    }
    parameters = sum(p.numel() for p in model.parameters())
    print(
        f"device: {device}; model: {'tiny Llama' if args.tiny else 'Llama-3-8B-shaped'}, random weights, "
        f"{parameters / 1e6:,.1f}M parameters, {next(model.parameters()).dtype}; {prompts} prompts, up to "
        f"{max_new_tokens} new tokens, batch size {batch_size}, {args.repeats} runs each (last timed)"
    )
    # Without CUDA the static cache runs uncompiled: torch.compile of the decoding step is CUDA-only here.
    fast = "static" if args.tiny else "compiled"
    rows = {}
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        for label, decoding in (("hf-dynamic", "dynamic"), (f"hf-{fast}", fast)):
            config = RunnerConfig(**base, decoding=decoding)
            rows[label] = timed_runs(label, model, tokenizer, examples, config, folder, args.repeats)
        vllm_python = Path(args.vllm_python) if args.vllm_python else VLLM_VENV / "bin" / "python"
        if args.tiny or args.skip_vllm:
            print("  vllm: skipped (--tiny or --skip-vllm)")
        elif not vllm_python.is_file():
            print(f"  vllm: skipped: no vLLM Python at {vllm_python} (--vllm-python: a CUDA build of vLLM)")
        else:
            from medunlearn.evaluation.engines import VLLMEngine

            weights = folder / "llama-8b-random"
            started = time.perf_counter()
            model.save_pretrained(weights, safe_serialization=True)
            tokenizer.save_pretrained(weights)
            print(f"  saved the model as safetensors in {time.perf_counter() - started:.0f} s")
            model.to("cpu")  # the server needs the GPU's memory; the runner only reads the model's settings
            gc.collect()
            torch.cuda.empty_cache()
            config = RunnerConfig(**base, engine="vllm")
            server_args = list(args.vllm_arg)
            if not any(a.startswith("--gpu-memory-utilization") for a in server_args):
                server_args += ["--gpu-memory-utilization", "0.9"]  # the GPU is the server's alone now
            # The first run starts the server (its load and CUDA-graph capture are in "first s").
            with VLLMEngine(
                weights, python=vllm_python, dtype="bfloat16", server_args=server_args, timeout_s=1800
            ) as engine:
                rows["vllm"] = timed_runs(
                    "vllm", model, tokenizer, examples, config, folder, args.repeats, engine
                )
    reference = rows["hf-dynamic"][1]
    header = ("engine", "first s", "timed s", "tokens", "tokens/s", "x dynamic")
    print("\n" + "  ".join(f"{h:>{w}}" for h, w in zip(header, (12, 8, 8, 7, 9, 9))) + "  equal to (a)")
    dynamic_rate = None
    for label, (seconds, outputs) in rows.items():
        outputs = outputs.loc[reference.index]
        tokens = int(outputs["generated_token_ids"].map(len).sum())
        rate = tokens / seconds[-1]
        dynamic_rate = dynamic_rate or rate
        equal = sum(
            list(a) == list(b)
            for a, b in zip(outputs["generated_token_ids"], reference["generated_token_ids"])
        )
        print(
            f"{label:>12}  {seconds[0]:8.1f}  {seconds[-1]:8.1f}  {tokens:7d}  {rate:9.1f}  "
            f"{rate / dynamic_rate:9.2f}  {equal}/{len(reference)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
