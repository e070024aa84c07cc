"""Bench: HNSW recall@k on distinct real-text embeddings — every sentence of the shared abstracts.

``bench/bench_mining.py`` measures recall on 2,000 real embeddings replicated with noise to 50,000. This
bench uses no replicas: every distinct sentence of the shared PubMedQA abstracts (contexts and conclusions,
split at sentence ends, 30 characters or more: 11,323 sentences), embedded once with the shipped
all-MiniLM-L6-v2 and cached as ``.npy`` chunks under ``--cache`` (embedding them takes tens of minutes on
two shared cores; a rerun reads the cache, and a killed run resumes at the first missing chunk). It then
finds every row's top-``k`` neighbours exactly (the library's exact search) and with the library's HNSW
index (the settings ``mine_pairs`` uses above ``exact_below``), and prints recall@k of HNSW against exact,
and both wall times. ``--limit`` takes only the first N sentences, ``--cached-only`` only the chunks
cached so far.

    python bench/bench_hnsw_recall.py [--cache /tmp/medunlearn-hnsw-recall] [--k 10] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_limits import pubmedqa_sentences  # noqa: E402

CHUNK = 1000


def cached_embeddings(texts: list[str], cache: Path, limit: int | None, cached_only: bool) -> np.ndarray:
    """Embeddings of ``texts`` (the first ``limit``), from ``cache`` chunks, embedding the missing ones
    (``cached_only``: skipping them)."""
    from medunlearn.biodivergence.mining.embed import embed_texts

    cache.mkdir(parents=True, exist_ok=True)
    wanted = len(texts) if limit is None else min(limit, len(texts))
    chunks = []
    for start in range(0, wanted, CHUNK):
        path = cache / f"{start:06d}.npy"
        if cached_only and not path.exists():
            continue
        if not path.exists():
            began = time.perf_counter()
            vectors = embed_texts(texts[start : start + CHUNK])
            np.save(cache / f"{start:06d}.partial.npy", vectors)
            os.replace(cache / f"{start:06d}.partial.npy", path)  # a killed run leaves no half chunk
            print(f"embedded {start:,}-{start + len(vectors):,} in {time.perf_counter() - began:.0f} s")
        chunks.append(np.load(path))
    return np.concatenate(chunks)[:wanted] if chunks else np.zeros((0, 384), dtype=np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, default=Path("/tmp/medunlearn-hnsw-recall"))
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    parser.add_argument("--cached-only", action="store_true", help="only the chunks already embedded")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch
    from threadpoolctl import threadpool_limits

    from medunlearn.biodivergence.mining import neighbours

    torch.set_num_threads(args.threads)
    texts = [text for _, text in pubmedqa_sentences()]
    vectors = cached_embeddings(texts, args.cache, args.limit, args.cached_only)
    distinct = len(np.unique(vectors.round(6), axis=0))
    with threadpool_limits(limits=args.threads):
        began = time.perf_counter()
        exact, _ = neighbours.nearest_neighbours(vectors, k=args.k, exact_below=len(vectors) + 1)
        exact_seconds = time.perf_counter() - began
        began = time.perf_counter()
        approximate, _ = neighbours.nearest_neighbours(
            vectors, k=args.k, exact_below=0, seed=args.seed, threads=args.threads
        )
        ann_seconds = time.perf_counter() - began
    recall = neighbours.recall_at_k(approximate, exact)
    print(
        f"{len(vectors):,} sentences ({distinct:,} distinct embeddings) of {len(texts):,}, "
        f"all-MiniLM-L6-v2, dim {vectors.shape[1]}; threads {args.threads}; load {os.getloadavg()[0]:.2f}"
    )
    print(f"exact top-{args.k}: {exact_seconds:.2f} s")
    print(
        f"HNSW M={neighbours.HNSW_M} efConstruction={neighbours.HNSW_EF_CONSTRUCTION} "
        f"efSearch={neighbours.HNSW_EF_SEARCH} (build + search): {ann_seconds:.2f} s"
    )
    print(
        f"recall@{args.k} of HNSW against exact: {recall:.4f} "
        f"(target 0.95: {'met' if recall >= 0.95 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
