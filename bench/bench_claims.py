"""Bench: claim extraction (stage 3) on the shared real abstracts — the first version's splitting against
the current one, in one run, on the CPU.

The baseline is the first version's path: pysbd's own ``Segmenter`` (one, reused), one section at a time,
rows appended per sentence (:func:`per_abstract_sentence_table`), then the same cue rules
(:func:`claims_from_sentences`). The new path is :func:`extract_claims`: pysbd with two of its steps
replaced by equal, faster ones (the ``str.find`` span finder and the abbreviation pass that skips scans
which must find nothing) and the cue patterns run once over the joined sentences, in-process with
``workers=1``; ``--workers N`` adds a run with a pool of N spawned processes.
Prints wall and CPU seconds of each (CPU: this process plus its finished children; on a shared machine wall
time is mostly waiting, so read both), the speed ratios against the baseline, and whether the sentence
tables and the claims are equal (they must be; asserted). Nothing is asserted on time.

The abstracts: PubMedQA PQA-L (``ori_pqal.json``) and the NCBI Disease corpus (train, develop, test) from
../shared/data, read with ``read_abstracts``.

    python bench/bench_claims.py [--abstracts N] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pandas as pd

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
COLUMNS = ("pmid", "sentence_index", "section", "text", "domain", "year")


def cpu_seconds() -> float:
    """User + system seconds of this process and of its children that have ended (the pool's workers)."""
    return sum(os.times()[:4])


def timed(function, *args, **kwargs):
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = function(*args, **kwargs)
    return time.perf_counter() - wall, cpu_seconds() - cpu, result


def per_abstract_sentence_table(abstracts: pd.DataFrame) -> pd.DataFrame:
    """The first version's sentence table: pysbd's own Segmenter, section by section."""
    from medunlearn.biodivergence.mining.claims import reference_split_sentences

    rows: dict[str, list] = {name: [] for name in COLUMNS}
    for abstract in abstracts.itertuples(index=False):
        index = 0
        for section in abstract.sections:
            for sentence in reference_split_sentences(section["text"]):
                for name, value in zip(
                    COLUMNS,
                    (
                        abstract.pmid,
                        index,
                        section["label"] or "unlabelled",
                        sentence,
                        abstract.domain,
                        abstract.year,
                    ),
                ):
                    rows[name].append(value)
                index += 1
    table = pd.DataFrame({name: pd.Series(values, dtype=object) for name, values in rows.items()})
    table["sentence_index"] = table["sentence_index"].astype("int64")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--abstracts", type=int, default=None, help="the first N abstracts (default: all)")
    parser.add_argument("--workers", type=int, default=2, help="processes of the pooled run (1: no such run)")
    args = parser.parse_args()

    from medunlearn.biodivergence.mining.claims import claims_from_sentences, extract_claims, sentence_table
    from medunlearn.biodivergence.mining.read import read_abstracts

    paths = [DATA / "pubmedqa" / "ori_pqal.json", *sorted((DATA / "ncbi-disease").glob("NCBI*_corpus.txt"))]
    abstracts = read_abstracts(paths)
    if args.abstracts is not None:
        abstracts = abstracts.iloc[: args.abstracts]
    n_sections = int(abstracts["sections"].map(len).sum())
    print(
        f"abstracts: {len(abstracts):,} ({n_sections:,} sections, "
        f"{int(abstracts['abstract'].str.len().sum()):,} characters) from {len(paths)} files"
    )

    warm = abstracts.iloc[:20]  # imports, pysbd's language tables and the cue patterns, for both paths
    claims_from_sentences(per_abstract_sentence_table(warm))
    extract_claims(warm, workers=1)

    old_wall, old_cpu, old_table = timed(per_abstract_sentence_table, abstracts)
    old_claims_wall, old_claims_cpu, old_claims = timed(claims_from_sentences, old_table)
    new_wall, new_cpu, new_claims = timed(extract_claims, abstracts, workers=1)
    runs = [
        (
            "per-abstract pysbd.Segmenter (first version)",
            old_wall + old_claims_wall,
            old_cpu + old_claims_cpu,
        ),
        ("extract_claims, workers=1", new_wall, new_cpu),
    ]
    pooled_claims = None
    if args.workers > 1:
        pool_wall, pool_cpu, pooled_claims = timed(extract_claims, abstracts, workers=args.workers)
        runs.append((f"extract_claims, workers={args.workers} (spawned pool)", pool_wall, pool_cpu))

    tables_equal = sentence_table(abstracts, workers=1).equals(old_table)
    claims_equal = new_claims.equals(old_claims) and (
        pooled_claims is None or pooled_claims.equals(old_claims)
    )

    print()
    print(
        f"{'claim extraction of ' + format(len(abstracts), ',') + ' abstracts':<52}{'wall s':>9}{'CPU s':>9}"
        f"  {'wall ratio':<12}{'CPU ratio':<12}"
    )
    print("-" * 94)
    _, base_wall, base_cpu = runs[0]
    for number, (name, wall, cpu) in enumerate(runs):
        wall_ratio = f"{base_wall / wall:.2f}x" if number else "1.00 (base)"
        cpu_ratio = f"{base_cpu / cpu:.2f}x" if number else "1.00 (base)"
        print(f"{name:<52}{wall:>9.2f}{cpu:>9.2f}  {wall_ratio:<12}{cpu_ratio:<12}")
    print(f"(baseline: splitting {old_wall:.2f} s wall, cue rules {old_claims_wall:.2f} s wall)")
    print()
    print(
        f"sentences: {len(old_table):,}, tables equal: {tables_equal}; claims: {len(old_claims):,}, "
        f"claims equal (same rows, columns, order, cues): {claims_equal}"
    )
    assert tables_equal and claims_equal


if __name__ == "__main__":
    main()
