"""Bench: a greedy decoding step against its arithmetic at this machine's measured peak (docs/scaling.md).

One process, ``--rounds`` interleaved rounds, one thread by default, on the 27.8M-parameter Llama of
``bench/bench_limits.py`` (random weights) and a batch of prompts of different lengths (left padded).
Each round times, in turn:

- ``today``: a copy of ``medunlearn.generation.greedy_generate`` as it was before this bench
  (``model.generate``, dynamic KV cache) — the baseline;
- ``static``: the same with ``decoding="static"`` (transformers' preallocated KV cache, not compiled);
- ``hand loop``: a plain greedy loop over ``model(...)`` with a dynamic cache — no logits processors,
  stopping criteria or input preparation per step (the "fewer Python operations" candidate);
- with ``--compiled``, the hand loop with a static cache and its step under ``torch.compile`` on the CPU
  (inductor; compile time printed apart, and not in the per-step figure);
- the matmul peak (``torch.matmul``, 1024², fp32) and the rate of the step's own product shapes
  (``batch × hidden`` times the MLP and LM-head weights), just before the candidates.

Per-step time = (time of ``--new-tokens`` tokens − time of 1 token) / (``--new-tokens`` − 1): the prefill
cancels. A step's FLOPs: ``2 · P · batch + 4 · L · d · Σ context`` ([ours], as in bench_limits.py).
Printed: per-step ms of each loop, its ratio to today's, and the step time over its arithmetic at the
square-matmul peak (target ≤ 1.5). Outputs are checked token-identical to today's loop; nothing on time is
asserted. The load average is printed with every round.

    python bench/bench_generation_step.py [--rounds 3] [--batch 16] [--new-tokens 16] [--threads 1]
                                          [--compiled]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_limits import bench_llama, forward_flops, linear_parameters, matmul_rate, timed  # noqa: E402


def today_greedy_generate(model, prompts, pad_token_id, eos_token_ids, max_new_tokens, decoding="dynamic"):
    """``medunlearn.generation.greedy_generate`` before this bench (the baseline), copied verbatim."""
    import torch

    from medunlearn.generation import decoding_options, model_device, pad_batch

    eos_token_ids = sorted(set(eos_token_ids))
    input_ids, attention_mask = pad_batch(prompts, pad_token_id, "left")
    width = input_ids.shape[1]
    device = model_device(model)
    with torch.inference_mode():
        output = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention_mask.to(device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=pad_token_id,
            eos_token_id=eos_token_ids,
            **decoding_options(decoding, device, width + max_new_tokens),
        )
    new_tokens = output[:, width:].cpu().numpy()
    is_eos = np.isin(new_tokens, eos_token_ids)
    stops = np.where(is_eos.any(1), is_eos.argmax(1), new_tokens.shape[1])
    return [row[:stop].tolist() for row, stop in zip(new_tokens, stops)]


def greedy_steps(logits, next_logits, pad_token_id, eos, max_new_tokens, record=None) -> list[list[int]]:
    """Greedy tokens from the prefill's ``logits``; ``next_logits(token, step)`` runs one decoding step.
    ``record``: a list that receives each step's next-token logits (for :func:`largest_logit_gap`)."""
    import torch

    finished = torch.zeros(logits.shape[0], dtype=torch.bool)
    steps = []
    for step in range(max_new_tokens):
        if record is not None:
            record.append(logits[:, -1].clone())
        token = torch.where(finished, pad_token_id, logits[:, -1].argmax(-1))
        steps.append(token)
        finished |= torch.isin(token, eos)
        if step == max_new_tokens - 1 or bool(finished.all()):
            break
        logits = next_logits(token, step)
    new_tokens = torch.stack(steps, 1).numpy()
    is_eos = np.isin(new_tokens, eos.numpy())
    stops = np.where(is_eos.any(1), is_eos.argmax(1), new_tokens.shape[1])
    return [row[:stop].tolist() for row, stop in zip(new_tokens, stops)]


def hand_loop(model, prompts, pad_token_id, eos_token_ids, max_new_tokens, record=None):
    """Greedy decoding as a plain loop: one forward per step, argmax, the mask grown by one column.
    ``record``: a list that receives each step's next-token logits (for :func:`largest_logit_gap`)."""
    import torch
    from transformers import DynamicCache

    from medunlearn.generation import pad_batch

    eos = torch.tensor(sorted(set(eos_token_ids)))
    input_ids, mask = pad_batch(prompts, pad_token_id, "left")
    cache = DynamicCache(config=model.config)

    def next_logits(token, step):
        nonlocal mask
        mask = torch.cat([mask, mask.new_ones(len(prompts), 1)], 1)
        return model(input_ids=token[:, None], attention_mask=mask, cache=cache, use_cache=True).logits

    with torch.inference_mode():
        logits = model(input_ids=input_ids, attention_mask=mask, cache=cache, use_cache=True).logits
        return greedy_steps(logits, next_logits, pad_token_id, eos, max_new_tokens, record)


class CompiledStepLoop:
    """The hand loop with a static KV cache and its decoding step under ``torch.compile`` (inductor, CPU
    code; ``dynamic=False``: every step has the same shapes). The prefill runs eagerly; the attention mask is
    the whole cache length from the start (the causal mask hides the positions not written yet), so no step
    changes a shape and nothing recompiles. One cache per instance, reset per call."""

    def __init__(self, model, max_cache_len: int):
        import torch
        from transformers import StaticCache

        self.model, self.max_cache_len = model, max_cache_len
        self.cache = StaticCache(config=model.config, max_cache_len=max_cache_len)
        self.step = torch.compile(model.forward, dynamic=False)

    def __call__(self, prompts, pad_token_id, eos_token_ids, max_new_tokens, record=None):
        import torch

        from medunlearn.generation import pad_batch

        eos = torch.tensor(sorted(set(eos_token_ids)))
        input_ids, mask = pad_batch(prompts, pad_token_id, "left")
        rows, width = input_ids.shape
        mask = torch.cat([mask, mask.new_ones(rows, self.max_cache_len - width)], 1)

        def next_logits(token, step):
            return self.step(
                input_ids=token[:, None],
                attention_mask=mask,
                past_key_values=self.cache,
                use_cache=True,
                cache_position=torch.tensor([width + step]),
            ).logits

        with torch.inference_mode():
            self.cache.reset()
            logits = self.model(
                input_ids=input_ids,
                attention_mask=mask,
                past_key_values=self.cache,
                use_cache=True,
                cache_position=torch.arange(width),
            ).logits
            return greedy_steps(logits, next_logits, pad_token_id, eos, max_new_tokens, record)


def generate_logits(model, prompts, pad_token_id, max_new_tokens, decoding="dynamic") -> list:
    """Each step's next-token logits of ``model.generate`` (today's loop), greedy, no EOS."""
    import torch

    from medunlearn.generation import decoding_options, pad_batch

    input_ids, attention_mask = pad_batch(prompts, pad_token_id, "left")
    with torch.inference_mode():
        output = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens,
            min_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=pad_token_id,
            output_logits=True,
            return_dict_in_generate=True,
            **decoding_options(decoding, input_ids.device, input_ids.shape[1] + max_new_tokens),
        )
    return list(output.logits)


def largest_logit_gap(reference: list, candidate: list) -> float:
    """Largest |difference| of two loops' step logits: token-identity alone is a weak check on a
    random-weight model, whose greedy tokens repeat whatever its cache holds."""
    if len(reference) != len(candidate):
        return float("inf")
    return max(float((a - b).abs().max()) for a, b in zip(reference, candidate))


def step_shapes_rate(model, batch: int) -> float:
    """FLOP/s of the step's own products: ``batch`` rows through one layer's linears and the LM head."""
    import torch

    weights = [m.weight.detach() for m in model.model.layers[0].modules() if isinstance(m, torch.nn.Linear)]
    weights.append(model.lm_head.weight.detach())
    inputs = [torch.randn(batch, w.shape[1]) for w in weights]
    flops = sum(2 * batch * w.numel() for w in weights)

    def products():
        with torch.inference_mode():
            for x, w in zip(inputs, weights):
                torch.nn.functional.linear(x, w)

    products()
    return flops / timed(products, 0.3)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--compiled", action="store_true", help="also time the hand loop with a compiled step (CPU inductor)"
    )
    args = parser.parse_args()

    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.set_num_threads(args.threads)
    model = bench_llama(torch.float32)
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(20, 60, (args.batch,), generator=generator).tolist()
    prompts = [torch.randint(3, 5120, (n,), generator=generator).tolist() for n in lengths]
    eos = [model.config.vocab_size]  # never produced: every row makes all its tokens
    loops = {
        "today (model.generate, dynamic)": lambda n: today_greedy_generate(model, prompts, 0, eos, n),
        "static cache (decoding='static')": lambda n: today_greedy_generate(
            model, prompts, 0, eos, n, "static"
        ),
        "hand loop (dynamic cache)": lambda n: hand_loop(model, prompts, 0, eos, n),
    }
    if args.compiled:
        compiled = CompiledStepLoop(model, max(lengths) + args.new_tokens)
        started = time.perf_counter()
        compiled(prompts, 0, eos, 2)  # compiles the step (its one shape)
        print(f"torch.compile of the decoding step: {time.perf_counter() - started:.1f} s (first call)")
        loops["hand loop, static cache, compiled step"] = lambda n: compiled(prompts, 0, eos, n)
    reference = loops["today (model.generate, dynamic)"](args.new_tokens)
    for name, run in loops.items():
        print(f"{name}: token-identical to today's: {run(args.new_tokens) == reference}")
    today_logits = generate_logits(model, prompts, 0, args.new_tokens)
    candidates = {
        "static cache": generate_logits(model, prompts, 0, args.new_tokens, "static"),
        "hand loop": [],
    }
    hand_loop(model, prompts, 0, eos, args.new_tokens, record=candidates["hand loop"])
    if args.compiled:
        candidates["compiled step"] = []
        compiled(prompts, 0, eos, args.new_tokens, record=candidates["compiled step"])
    for name, logits in candidates.items():
        print(f"{name}: largest |step logit - today's| {largest_logit_gap(today_logits, logits):.2e}")

    cfg, width = model.config, max(lengths)
    step_flops = forward_flops(
        linear_parameters(model),
        args.batch,
        cfg.num_hidden_layers,
        cfg.hidden_size,
        args.batch * (width + args.new_tokens // 2),
    )
    samples = {name: [] for name in loops}
    peaks, shape_rates = [], []
    for round_ in range(args.rounds):
        peaks.append(matmul_rate(1024, torch.float32))
        shape_rates.append(step_shapes_rate(model, args.batch))
        for name, run in loops.items():
            full, one = timed(lambda run=run: run(args.new_tokens)), timed(lambda run=run: run(1))
            samples[name].append((full - one) / (args.new_tokens - 1))
        line = ", ".join(f"{s[-1] * 1e3:.0f} ms" for s in samples.values())
        print(
            f"round {round_ + 1}: per step {line}; peak {peaks[-1] / 1e9:.1f} GFLOP/s, step shapes "
            f"{shape_rates[-1] / 1e9:.1f}; load {os.getloadavg()[0]:.2f}"
        )
    print()
    print(
        f"batch {args.batch}, prompts {min(lengths)}-{max(lengths)} tokens, {args.new_tokens} new tokens, "
        f"{args.threads} thread(s); a step: {step_flops / 1e9:.2f} GFLOP"
    )
    print("| loop | ms per step (median) | time / today's (median) | step / arithmetic at peak (per round) |")
    print("|---|---|---|---|")
    base = samples["today (model.generate, dynamic)"]
    for name, times in samples.items():
        over = [t / (step_flops / p) for t, p in zip(times, peaks)]
        ratios = [t / b for t, b in zip(times, base)]
        print(
            f"| {name} | {statistics.median(times) * 1e3:.0f} | {statistics.median(ratios):.2f}x | "
            f"{statistics.median(over):.2f} ({', '.join(f'{o:.2f}' for o in over)}) |"
        )
    shape_share = statistics.median(s / p for s, p in zip(shape_rates, peaks))
    print(f"the step's product shapes run at {shape_share:.0%} of the square-matmul peak (median)")


if __name__ == "__main__":
    main()
