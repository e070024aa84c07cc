r"""Build the fictitious BioDivergence dataset (seeded; safe to publish: no real studies), optionally push it.

Same pipeline as the real data: pool → v1.0 (article-disjoint) and v1.0-pairlevel splits → Hub-ready folder
with README ``configs:``, dataset card and leakage audit. The default size mirrors the paper's candidate
pool (10,000 pairs per domain, 50,000 in all).

    python dataset_scripts/biodivergence_synthetic.py --pairs 50000 --seed 0 --out bd_synthetic
    python dataset_scripts/biodivergence_synthetic.py ... \
        --push-to-hub USER/biodivergence-synthetic   # needs a token
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--push-to-hub", metavar="REPO_ID", default=None)
    args = parser.parse_args(argv)

    from medunlearn.biodivergence import PoolSource, audit_folder, build_biodivergence

    folder, stats = build_biodivergence(
        args.out, PoolSource(synthetic=True, pairs=args.pairs), seed=args.seed
    )
    report = audit_folder(folder)
    print("\n".join(report.lines()))
    status = 0 if report.ok else 1
    if status == 0 and args.push_to_hub:
        from huggingface_hub import upload_folder

        upload_folder(repo_id=args.push_to_hub, repo_type="dataset", folder_path=str(args.out))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
