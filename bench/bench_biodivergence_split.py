"""Bench: v1.0 split of a 50,000-pair pool (target: within 5 s on the project machine).

Prints the wall time of each stage and the speed-up of the vectorised components (scipy connected
components of the pair–key graph) over a naive Python union-find measured in the same run.

    python bench/bench_biodivergence_split.py [--pairs 50000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time


def best_of(repeats: int, function, *args):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function(*args)
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from medunlearn.biodivergence.schema import normalise_pool
    from medunlearn.biodivergence.splits import (
        SplitConfig,
        article_disjoint_split,
        build_splits,
        clean_pool,
        key_components,
        naive_union_find_components,
        pair_keys,
    )
    from medunlearn.biodivergence.synthetic import generate_pair_pool

    start = time.perf_counter()
    pool = normalise_pool(generate_pair_pool(n_pairs=args.pairs, seed=args.seed), "bench pool")
    print(f"pool: {len(pool):,} rows (generated and validated in {time.perf_counter() - start:.2f} s)")

    cleaned, _ = clean_pool(pool)
    keys, n_keys = pair_keys(cleaned)
    fast, fast_labels = best_of(args.repeats, key_components, keys, n_keys)
    naive, naive_labels = best_of(1, naive_union_find_components, keys)
    assert len(set(zip(fast_labels, naive_labels))) == len(set(fast_labels)) == len(set(naive_labels))
    print(
        f"components ({len(cleaned):,} pairs, {n_keys:,} keys): vectorised {fast * 1000:.1f} ms, "
        f"naive union-find {naive * 1000:.1f} ms, speed-up x{naive / fast:.1f}"
    )

    split_time, (split, stats) = best_of(
        args.repeats, article_disjoint_split, cleaned, SplitConfig(seed=args.seed)
    )
    print(
        f"v1.0 assignment (components, carving, dev/test choice): {split_time:.2f} s; "
        f"sizes { {name: int((split == name).sum()) for name in ('train', 'dev', 'test')} }; "
        f"bridging pairs dropped {stats['bridging_pairs_dropped']}"
    )
    total, (_, full_stats) = best_of(args.repeats, build_splits, pool, SplitConfig(seed=args.seed))
    print(
        f"build_splits (clean + v1.0 + pair-level, {args.pairs:,}-pair pool): {total:.2f} s "
        f"(target 5 s: {'met' if total <= 5 else 'MISSED'}, ratio to target {total / 5:.2f})"
    )


if __name__ == "__main__":
    main()
