"""Bench: the fine-tuned BioDivergence baseline (all-MiniLM-L6-v2) on the demo pool, on this CPU
(docs/biodivergence.md, "The fine-tuned baseline").

The demo pool is the fictitious 2,000-pair pool of seed 0 (``medunlearn demo``'s). One epoch is trained on the
first ``--train-pairs`` pairs of its v1.0 train split (all of it with ``--train-pairs 0``) and the v1.0 test
split is predicted; it prints the training and prediction token rates (non-padding tokens) and extrapolates
to one epoch of each variant's full train split plus its dev and test (what ``compare`` and the demo run per
epoch), from the token counts of those splits.

Share of peak [ours]: training FLOPs ≈ 3 × (2 · P · tokens + 4 · L · d · Σ T²) with P the encoder's linear
weights (embeddings excluded), L layers, d the width, T the padded batch length (bench/bench_limits.py's
formulas); the peak is a 1024² fp32 ``torch.matmul`` at the same thread count, measured just before.

    python bench/bench_biodivergence_finetuned.py [--train-pairs 200] [--threads 1] [--no-context]
"""

from __future__ import annotations

import argparse
import os
import time


def matmul_peak(threads: int, size: int = 1024, repeats: int = 5) -> float:
    """Best fp32 GFLOP/s of a square matmul at ``threads`` threads."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(size, size), torch.randn(size, size)
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        torch.matmul(a, b)
        best = max(best, 2 * size**3 / (time.perf_counter() - started) / 1e9)
    return best


def split_tokens(tokenizer, frames: dict, use_context: bool, max_length: int) -> dict:
    from medunlearn.biodivergence.finetuned_heads import encode_pairs

    return {
        name: encode_pairs(tokenizer, frame, use_context, max_length, False).token_count()
        for name, frame in frames.items()
    }


def main() -> None:
    import torch

    from medunlearn.biodivergence.finetuned import FinetunedBaseline, FinetunedConfig
    from medunlearn.biodivergence.schema import normalise_pool
    from medunlearn.biodivergence.splits import SplitConfig, build_splits
    from medunlearn.biodivergence.synthetic import generate_pair_pool

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-pairs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--context", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()

    configs, _ = build_splits(normalise_pool(generate_pair_pool(n_pairs=2000, seed=0)), SplitConfig(seed=0))
    v1 = configs["v1.0"]
    train = v1["train"].iloc[: args.train_pairs] if args.train_pairs else v1["train"]
    peak = matmul_peak(args.threads)
    torch.set_num_threads(args.threads)
    config = FinetunedConfig(epochs=1, max_length=args.max_length, use_context=args.context)
    baseline = FinetunedBaseline(config).fit(train)
    baseline.predict(v1["test"])
    record = baseline.training
    encoder = baseline.model.encoder
    layers, width = encoder.config.num_hidden_layers, encoder.config.hidden_size
    linear = sum(m.weight.numel() for m in encoder.encoder.modules() if isinstance(m, torch.nn.Linear))
    mean_length = record["train_tokens"] / record["train_pairs"]
    flops = 3 * (
        2 * linear * record["train_tokens"] + 4 * layers * width * record["train_pairs"] * mean_length**2
    )
    train_rate = record["train_tokens"] / record["train_seconds"]
    predict_rate = record["predict_tokens"] / record["predict_seconds"]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; torch threads {args.threads}")
    achieved = flops / record["train_seconds"] / 1e9
    print(
        f"train: {record['train_pairs']} pairs, 1 epoch ({record['steps']} steps), "
        f"{record['train_tokens']} tokens (mean {mean_length:.0f} per pair), "
        f"{record['train_seconds']:.1f} s, "
        f"{train_rate:.0f} tokens/s, {achieved:.2f} GFLOP/s = {achieved / peak:.1%} of the fp32 matmul peak "
        f"({peak:.1f} GFLOP/s)"
    )
    print(f"predict: {len(v1['test'])} pairs, {record['predict_tokens']} tokens, {predict_rate:.0f} tokens/s")
    tokenizer = baseline.tokenizer
    total = 0.0
    for variant, splits in configs.items():
        counts = split_tokens(tokenizer, splits, args.context, args.max_length)
        seconds = counts["train"] / train_rate + (counts["dev"] + counts["test"]) / predict_rate
        total += seconds
        print(f"extrapolated, {variant}: tokens {counts}; one epoch + dev + test ≈ {seconds / 60:.1f} min")
    print(f"extrapolated, both variants (what compare and the demo train): ≈ {total / 60:.1f} min per epoch")


if __name__ == "__main__":
    main()
