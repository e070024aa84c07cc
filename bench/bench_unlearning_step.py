"""Bench: an unlearning step per method, the new path against today's, interleaved in one process.

    python bench/bench_unlearning_step.py                 # every method, 3 rounds (~10 min on 1 idle core)
    python bench/bench_unlearning_step.py --methods grad_diff rmu --rounds 2
    python bench/bench_unlearning_step.py --padding       # the joint forward's padding rule

Model: the 27.8M-parameter Llama of ``bench/bench_limits.py`` (hidden 512, MLP 1536, 8 layers, 8 heads,
4 key/value heads, vocabulary 5,120), random weights, fp32, on synthetic QA rows (``bench_npo_reference``)
of 40-90 tokens, batch 4 forget + 4 retain, full fine-tuning (RMU: its default trained parameters).

Two trainers per method, built once, on the same model weights and rows:

* **today**: two policy forwards per step (``fuse_forget_retain = False``) and, for the methods with a live
  reference (KL-Min, RMU, UNDIAL), the frozen copy run at every step (``reference_mode="copy"``); NPO keeps
  its precomputed log-probs, as today;
* **new**: the library's defaults, one forward over forget and retain where the loss allows and the
  reference's outputs on fixed rows precomputed before training (``medunlearn.unlearn.frozen``).

A step is ``training_step`` (forward and backward) plus an AdamW step, on batches collated in advance (the
same rows for both). Rounds interleave the two, alternating which goes first; a method's figure is the median
over rounds of each side's median step time, measured as the process's CPU time on one thread (other jobs on
shared cores inflate wall time more than this). The ratio today / new > 1 means the new path is faster. The
one-off set-up (tokenising, the copy or the precomputing pass) is printed apart: ``setup s``.
``uptime`` is printed before and after: on a shared machine only ratios measured in one process count.

``--padding``: one forward over a forget batch of length T and a retain batch of length r·T against two
forwards (forward and backward, GradDiff's loss), for the padding ratios ``(B1 + B2)·max(T) / Σ B·T`` this
gives; ``joint_padding_limit`` in ``medunlearn.unlearn.trainer`` is set from it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

METHODS = [
    "grad_ascent",
    "grad_diff",
    "npo",
    "simnpo",
    "wga",
    "satimp",
    "ce_u",
    "pdu",
    "kl_min",
    "rmu",
    "undial",
]
# α ≠ 0 so that the methods whose retain term is optional read a retain batch.
OVERRIDES = {"ce_u": {"retain_weight": 1.0}, "undial": {"retain_weight": 1.0}}
BATCH = 4


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def bench_model(tokenizer):
    import torch
    from bench_limits import LLAMA
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        **LLAMA,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config)


class Side:
    """One trainer, its optimiser and its batches; ``step(i)`` times one optimiser step in CPU seconds."""

    def __init__(self, stem, state, tokenizer, rows, new: bool, steps: int):
        import torch

        from medunlearn.unlearn.methods import METHODS as SPECS

        config_class, trainer_class = SPECS[stem].load()
        model = bench_model(tokenizer)
        model.load_state_dict(state)
        live_reference = not new and trainer_class.frozen_parts
        args = config_class(
            output_dir="/tmp/bench_unlearning_step",
            use_cpu=True,
            per_device_train_batch_size=BATCH,
            per_device_eval_batch_size=BATCH,
            num_train_epochs=1,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            seed=0,
            **({"reference_mode": "copy"} if live_reference else {}),
            **OVERRIDES.get(stem, {}),
        )
        start = time.process_time()
        self.trainer = trainer_class(model, args, rows[0], rows[1], processing_class=tokenizer)
        self.setup_s = time.process_time() - start
        self.trainer.fuse_forget_retain = new
        self.trainer.current_gradient_accumulation_steps = 1  # what train() sets before its first step
        trainable = [p for p in self.trainer.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=1e-5)
        pairs, collate = self.trainer.pairs, self.trainer.data_collator
        self.batches = [
            collate([pairs[(i * BATCH + j) % len(pairs)] for j in range(BATCH)]) for i in range(steps)
        ]
        self.times: list[list[float]] = []

    def run_round(self) -> None:
        trainer, times = self.trainer, []
        trainer.model.train()
        for batch in self.batches:
            start = time.process_time()
            trainer.training_step(trainer.model, batch)
            self.optimizer.step()
            self.optimizer.zero_grad()
            times.append(time.process_time() - start)
        self.times.append(times)

    def step_s(self) -> float:
        return statistics.median(statistics.median(times) for times in self.times)


def bench_methods(methods, rounds: int, steps: int) -> list[dict]:
    from bench_npo_reference import synthetic_qa

    from medunlearn.models import train_bpe_tokenizer

    forget, retain = synthetic_qa(64), synthetic_qa(256, seed=1)
    tokenizer = train_bpe_tokenizer(list(forget["question"]) + list(forget["answer"]), vocab_size=1024)
    state = bench_model(tokenizer).state_dict()
    results = []
    for stem in methods:
        sides = {
            name: Side(stem, state, tokenizer, (forget, retain), name == "new", steps)
            for name in ("today", "new")
        }
        for round_index in range(rounds):
            order = ("today", "new") if round_index % 2 == 0 else ("new", "today")
            for name in order:
                sides[name].run_round()
        row = {"method": stem, **{f"{n}_s": s.step_s() for n, s in sides.items()}}
        row.update({f"{n}_setup_s": s.setup_s for n, s in sides.items()})
        results.append(row)
        print(
            f"{stem:<12} today {row['today_s']:.3f} s  new {row['new_s']:.3f} s  "
            f"today/new {row['today_s'] / row['new_s']:.2f}  setup today {row['today_setup_s']:.1f} s "
            f"new {row['new_setup_s']:.1f} s",
            flush=True,
        )
    return results


def padded_pair(tokenizer, length: int, retain_length: int):
    import torch

    def batch(n):
        ids = torch.randint(3, len(tokenizer), (BATCH, n))
        labels = ids.clone()
        labels[:, : n // 2] = -100
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}

    return batch(length), batch(retain_length)


def bench_padding(rounds: int, length: int = 96) -> None:
    """Joint vs two forwards (forward + backward of GradDiff's loss) at retain lengths r·T."""
    from medunlearn.models import train_bpe_tokenizer
    from medunlearn.unlearn.grad_diff import grad_diff_loss
    from medunlearn.unlearn.ops import concatenate_batches, padded_token_ratio, split_rows

    tokenizer = train_bpe_tokenizer(["a b c d e f g"] * 20, vocab_size=300)
    model = bench_model(tokenizer).train()
    logits = lambda batch: model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # noqa: E731

    def two(f, r):
        grad_diff_loss(logits(f), f["labels"], logits(r), r["labels"])["loss"].backward()

    def joint(f, r):
        fl, rl = split_rows(logits(concatenate_batches(f, r, 0)), f, r)
        grad_diff_loss(fl, f["labels"], rl, r["labels"])["loss"].backward()

    print(f"{'retain/forget length':>21} {'padding ratio':>14} {'two s':>8} {'joint s':>8} {'two/joint':>10}")
    for fraction in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.35):
        forget, retain = padded_pair(tokenizer, length, max(2, int(length * fraction)))
        times = {"two": [], "joint": []}
        for round_index in range(rounds):
            order = (two, joint) if round_index % 2 == 0 else (joint, two)
            for function in order:
                start = time.process_time()
                function(forget, retain)
                model.zero_grad()
                times["two" if function is two else "joint"].append(time.process_time() - start)
        two_s, joint_s = (statistics.median(times[k]) for k in ("two", "joint"))
        print(
            f"{fraction:>21.2f} {padded_token_ratio(forget, retain):>14.3f} {two_s:>8.3f} {joint_s:>8.3f} "
            f"{two_s / joint_s:>10.2f}",
            flush=True,
        )


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3, help="optimiser steps per side per round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--padding", action="store_true", help="measure the joint forward's padding rule")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"before: {uptime()}", flush=True)
    if args.padding:
        bench_padding(max(args.rounds, 5))
    else:
        threads = torch.get_num_threads()
        print(f"{threads} thread(s), batch {BATCH} forget + {BATCH} retain, CPU seconds per step")
        results = bench_methods(args.methods, args.rounds, args.steps)
        header = f"{'method':<12} {'today s':>8} {'new s':>8} {'today/new':>10}"
        print(f"\n{header} {'setup today':>12} {'setup new':>10}")
        for row in results:
            print(
                f"{row['method']:<12} {row['today_s']:>8.3f} {row['new_s']:>8.3f} "
                f"{row['today_s'] / row['new_s']:>10.2f} {row['today_setup_s']:>12.1f} "
                f"{row['new_setup_s']:>10.1f}"
            )
    print(f"after: {uptime()}", flush=True)


if __name__ == "__main__":
    main()
