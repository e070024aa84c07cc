"""NPO step time and peak memory by reference-model source, measured in one run.

    python bench/bench_npo_reference.py            # ~1-2 minutes on a laptop CPU
    python bench/bench_npo_reference.py --quick    # smaller model, fewer steps
    python bench/bench_npo_reference.py --wide     # weights dominate activations (the LLM regime)

Each setting runs in its own fresh process (so peak memory is that setting's alone) on the same model, data
and seed:

* full fine-tuning, reference = a live frozen copy (``reference_mode="copy"``: what a naive
  implementation does)
* full fine-tuning, reference log-probs precomputed once before training (``"precomputed"``, our default)
* LoRA, live frozen copy / precomputed / the adapter-disabled model (``"adapter"``)

Step time is the median time of the training steps after two warm-up steps: wall time on CUDA, the process's
CPU time on CPU (single-threaded, so other jobs on shared cores do not inflate it). Peak memory is the growth
of the process's peak resident set over its resident set just before the model is built, after a warm-up run
on a toy model has imported every module (on CUDA, peak allocated bytes).
Ratios are printed against the live copy of the same training mode. Expected: precomputed ≤ 0.75× the step
time and ≤ 0.6× the peak memory of the live copy (the copy's weights dominate when the optimizer state is
small, as under LoRA; under full fine-tuning Adam's two moments dilute the saving).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SETTINGS = [
    ("full", "copy"),
    ("full", "precomputed"),
    ("lora", "copy"),
    ("lora", "precomputed"),
    ("lora", "adapter"),
]


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def synthetic_qa(n: int, seed: int = 0):
    """Fictitious QA rows long enough that activations matter."""
    import random

    from datasets import Dataset

    rng = random.Random(seed)
    findings = ["troponin", "creatinine", "lactate", "ferritin", "sodium", "platelets", "CRP", "glucose"]
    questions, answers = [], []
    for i in range(n):
        picked = rng.sample(findings, 2)
        questions.append(f"Patient {i}: what were the {', '.join(picked)} values on admission and discharge?")
        answers.append(
            " ".join(f"The {f} was {rng.randint(1, 400)} then {rng.randint(1, 400)} units." for f in picked)
        )
    return Dataset.from_dict({"question": questions, "answer": answers, "disease": ["cardiovascular"] * n})


def _train(
    model,
    tokenizer,
    forget,
    retain,
    reference,
    peft_config,
    steps,
    retain_weight,
    callbacks=(),
    max_length=512,
):
    import torch

    from medunlearn.unlearn import NPOConfig, NPOTrainer

    args = NPOConfig(
        output_dir="/tmp/bench_npo_reference",
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        per_device_train_batch_size=4,
        max_steps=steps,
        learning_rate=1e-5,
        logging_steps=1000,
        save_strategy="no",
        reference_mode=reference,
        retain_weight=retain_weight,
        max_length=max_length,
        disable_tqdm=True,
        seed=0,
    )
    trainer = NPOTrainer(
        model,
        args,
        forget,
        retain,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=list(callbacks),
    )
    trainer.train()
    return trainer


def run_setting(mode: str, reference: str, quick: bool, retain_weight: float, wide: bool = False) -> dict:
    import gc

    import torch
    from transformers import TrainerCallback

    from medunlearn.models import TinyLlamaConfig, build_tiny_llama, train_bpe_tokenizer

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    forget, retain = synthetic_qa(32), synthetic_qa(32, seed=1)
    tokenizer = train_bpe_tokenizer(list(forget["question"]) + list(forget["answer"]), vocab_size=1024)
    lora = None
    if mode == "lora":
        from peft import LoraConfig

        lora = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", lora_dropout=0.0)
    # Warm-up on a toy model: every lazily imported module and allocator arena exists before the baseline.
    _train(build_tiny_llama(tokenizer), tokenizer, forget, retain, reference, lora, 1, retain_weight)
    gc.collect()

    if wide:  # weights dominate activations, as for an LLM: a wide model, answers truncated to 32 tokens
        size = TinyLlamaConfig(
            hidden_size=1536,
            intermediate_size=6144,
            num_hidden_layers=1,
            num_attention_heads=12,
            num_key_value_heads=4,
        )
    else:
        size = (
            TinyLlamaConfig(hidden_size=256, intermediate_size=1024, num_hidden_layers=2)
            if quick
            else TinyLlamaConfig(
                hidden_size=768,
                intermediate_size=3072,
                num_hidden_layers=2,
                num_attention_heads=8,
                num_key_value_heads=2,
            )
        )
    steps = 5 if quick else 9
    cuda = torch.cuda.is_available()
    baseline = _rss_bytes()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    model = build_tiny_llama(tokenizer, size)
    # On CPU, the process's own CPU time: other jobs sharing the cores inflate wall time, not this.
    clock = time.perf_counter if cuda else time.process_time
    step_times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *_, **__):
            if cuda:
                torch.cuda.synchronize()
            self.start = clock()

        def on_step_end(self, *_, **__):
            if cuda:
                torch.cuda.synchronize()
            step_times.append(clock() - self.start)

    _train(
        model,
        tokenizer,
        forget,
        retain,
        reference,
        lora,
        steps,
        retain_weight,
        [StepTimer()],
        max_length=32 if wide else 512,
    )
    peak = torch.cuda.max_memory_allocated() if cuda else _peak_rss_bytes() - baseline
    return {
        "mode": mode,
        "reference": reference,
        "step_s": statistics.median(step_times[2:]),
        "peak_mb": peak / 2**20,
        "parameters_m": sum(p.numel() for p in model.parameters()) / 1e6,
        "device": "cuda" if cuda else "cpu",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller model and fewer steps")
    parser.add_argument(
        "--wide", action="store_true", help="a wide 1-layer model on 32-token examples: weights dominate"
    )
    parser.add_argument(
        "--retain-weight",
        type=float,
        default=1.0,
        help="α of NPO's retain NLL (recipe: 1.0; 0 isolates the reference's cost)",
    )
    parser.add_argument("--one", nargs=2, metavar=("MODE", "REFERENCE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(
            json.dumps(
                run_setting(*args.one, quick=args.quick, retain_weight=args.retain_weight, wide=args.wide)
            )
        )
        return

    env = {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    results = []
    for mode, reference in SETTINGS:
        command = [sys.executable, str(Path(__file__).resolve()), "--one", mode, reference]
        command += ["--quick"] if args.quick else []
        command += ["--wide"] if args.wide else []
        command += ["--retain-weight", str(args.retain_weight)]
        completed = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            sys.exit(f"{mode}/{reference} failed:\n{completed.stderr[-3000:]}")
        results.append(json.loads(completed.stdout.strip().splitlines()[-1]))

    print(
        f"NPO step time and peak memory by reference source ({results[0]['device']}, "
        f"{results[0]['parameters_m']:.1f}M-parameter Llama, batch 4 forget + 4 retain, retain weight "
        f"{args.retain_weight:g})"
    )
    print(
        f"{'training':<9} {'reference':<12} {'step s':>8} {'peak MB':>9} "
        f"{'time × copy':>12} {'memory × copy':>14}"
    )
    for row in results:
        live = next(r for r in results if r["mode"] == row["mode"] and r["reference"] == "copy")
        print(
            f"{row['mode']:<9} {row['reference']:<12} {row['step_s']:>8.3f} {row['peak_mb']:>9.1f} "
            f"{row['step_s'] / live['step_s']:>12.2f} {row['peak_mb'] / live['peak_mb']:>14.2f}"
        )


if __name__ == "__main__":
    main()
