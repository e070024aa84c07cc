"""Bench: mining 50,000 claims — the FAISS HNSW index against exact search, in one run, on the CPU.

Prints the wall time of exact top-k search and of the HNSW index (build + search), the speed ratio, the
recall@k of HNSW against exact search (target: at least 0.95), and the wall time of the whole
``mine_pairs`` on the same vectors. The run's own exact search is the baseline; nothing is asserted on
time.

The vectors: ``--real`` real sentences (PubMedQA PQA-L contexts and conclusions from ../shared/data, split
at sentence ends, 30 characters or more, distinct) embedded with the offline all-MiniLM-L6-v2, then
replicated with noise up to ``--claims`` rows: replica r of sentence i is normalise(v_i + ε), ε Gaussian
with norm about ``--noise`` (0.6: cosine ≈ 0.86 to its original, ≈ 0.74 between two replicas). Embedding
all 50,000 with MiniLM on 2 shared cores would take tens of minutes; the replicas keep the real geometry
around each sentence and make the neighbour lists harder (many near-equal siblings), not easier. A replica
keeps its sentence's text with " [replica r]" appended (so the signals see 50,000 distinct texts) and
belongs to article "<pmid>.r<r>"; domains are the paper's five, by (pmid + r) mod 5.

    python bench/bench_mining.py [--claims 50000] [--real 2000] [--k 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "pubmedqa" / "ori_pqal.json"
DOMAINS = (
    "antimicrobial_resistance",
    "oncology",
    "infectious_disease",
    "genomics",
    "clinical_trials_epidemiology",
)


def real_sentences(path: Path, limit: int | None = None) -> list[tuple[str, str]]:
    """(pmid, sentence) of PubMedQA abstracts (contexts and conclusions), distinct, at least 30 characters."""
    records = json.loads(path.read_text())
    seen, sentences = set(), []
    for pmid, record in records.items():
        for block in [*record["CONTEXTS"], record["LONG_ANSWER"]]:
            for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", block):
                if len(sentence) >= 30 and sentence not in seen:
                    seen.add(sentence)
                    sentences.append((pmid, sentence))
    return sentences[:limit]


def replicate(vectors, sentences, n_claims: int, noise: float, seed: int):
    rng = np.random.default_rng(seed)
    n_real, dim = vectors.shape
    source = np.arange(n_claims) % n_real
    replica = np.arange(n_claims) // n_real
    jitter = rng.normal(size=(n_claims, dim)).astype(np.float32) * (noise / np.sqrt(dim))
    jitter[replica == 0] = 0.0  # the first copy is the real embedding
    out = vectors[source] + jitter
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    pmids = np.array([pmid for pmid, _ in sentences], dtype=object)[source]
    texts = np.array([text for _, text in sentences], dtype=object)[source]
    claims = pd.DataFrame(
        {
            "claim_id": [f"c{i:06d}" for i in range(n_claims)],
            "pmid": [f"{p}.r{r}" for p, r in zip(pmids, replica)],
            "sentence_index": source,
            "section": "results",
            "text": [t if r == 0 else f"{t} [replica {r}]" for t, r in zip(texts, replica)],
            "cues": [[] for _ in range(n_claims)],
            "domain": [DOMAINS[(int(p) + int(r)) % 5] for p, r in zip(pmids, replica)],
            "year": 2020,
        }
    )
    return out.astype(np.float32), claims


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--claims", type=int, default=50_000)
    parser.add_argument("--real", type=int, default=2_000, help="real sentences embedded with MiniLM")
    parser.add_argument("--noise", type=float, default=0.6)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2, help="BLAS, torch and FAISS threads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from threadpoolctl import threadpool_limits

    from medunlearn.biodivergence.mining import neighbours
    from medunlearn.biodivergence.mining.embed import embed_texts
    from medunlearn.biodivergence.mining.pairs import MiningConfig, mine_pairs_with_counts, mining_counts

    sentences = real_sentences(DATA, args.real)
    load_time, _ = timed(embed_texts, ["warm-up"])
    embed_time, real = timed(embed_texts, [text for _, text in sentences])
    vectors, claims = replicate(real, sentences, args.claims, args.noise, args.seed)
    print(
        f"vectors: {len(sentences):,} real PubMedQA sentences embedded with all-MiniLM-L6-v2 "
        f"({embed_time:.1f} s, {len(sentences) / embed_time:.0f} sentences/s; model load {load_time:.1f} s), "
        f"replicated "
        f"with noise {args.noise} to {len(vectors):,} x {vectors.shape[1]}; threads {args.threads}"
    )

    rows = []
    with threadpool_limits(limits=args.threads):
        exact_time, (exact, _) = timed(
            neighbours.nearest_neighbours, vectors, k=args.k, exact_below=len(vectors) + 1
        )
        ann_time, (approximate, _) = timed(
            neighbours.nearest_neighbours,
            vectors,
            k=args.k,
            exact_below=0,
            seed=args.seed,
            threads=args.threads,
        )
        recall = neighbours.recall_at_k(approximate, exact)
        rows.append(("exact search (numpy blocks + argpartition)", exact_time, "1.00 (baseline)", "1.0000"))
        rows.append(
            (
                f"HNSW M={neighbours.HNSW_M} efC={neighbours.HNSW_EF_CONSTRUCTION} "
                f"efS={neighbours.HNSW_EF_SEARCH} (build+search)",
                ann_time,
                f"{exact_time / ann_time:.2f}x faster",
                f"{recall:.4f}",
            )
        )

        one_domain = claims.assign(domain="all")
        config = MiningConfig(k=args.k, seed=args.seed)
        mine_ann_time, (pairs_ann, counts_ann) = timed(mine_pairs_with_counts, one_domain, config, vectors)
        mine_five_time, (pairs_five, counts_five) = timed(mine_pairs_with_counts, claims, config, vectors)

    print()
    print(
        f"{'top-' + str(args.k) + ' neighbours of ' + format(len(vectors), ',') + ' vectors':<62}"
        f"{'wall s':>9}  {'speed vs exact':<18}{'recall@' + str(args.k):>10}"
    )
    print("-" * 101)
    for name, seconds, ratio, value in rows:
        print(f"{name:<62}{seconds:>9.2f}  {ratio:<18}{value:>10}")
    print(f"recall target 0.95: {'met' if recall >= 0.95 else 'MISSED'}")

    print()
    print(
        f"{'mine_pairs (default MiningConfig, given vectors)':<62}{'wall s':>9}  {'kept':>8}"
        f"{'candidates':>12}{'same-art.':>11}{'outside':>9}"
    )
    print("-" * 111)
    for name, seconds, counts in (
        (
            f"1 domain of {len(vectors):,} ({'HNSW' if len(vectors) >= config.exact_below else 'exact'})",
            mine_ann_time,
            counts_ann,
        ),
        (f"5 domains of ~{len(vectors) // 5:,} (exact, < exact_below)", mine_five_time, counts_five),
    ):
        total = mining_counts(counts)
        print(
            f"{name:<62}{seconds:>9.2f}  {total['kept']:>8,}{total['candidates']:>12,}"
            f"{total['same_article_dropped']:>11,}{total['outside_window']:>9,}"
        )
    print()
    top = pairs_five.iloc[0]
    print(
        f"top pair of the 5-domain run: {top['pair_id']} ({top['domain']}, "
        f"score {top['divergence_score']:.3f})"
    )
    print(f"  a: {pairs_five.iloc[0]['text_a'][:100]}")
    print(f"  b: {pairs_five.iloc[0]['text_b'][:100]}")
    assert (pairs_ann["article_a"] != pairs_ann["article_b"]).all()


if __name__ == "__main__":
    main()
