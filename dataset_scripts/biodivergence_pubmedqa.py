r"""Build the BioDivergence-style dataset of real PubMed conclusions (PubMedQA PQA-L), optionally push it.

Claims are the first conclusion sentence of each PubMedQA abstract, paired within shared MeSH terms; labels
come from medunlearn's rules over the expert yes/no/maybe decisions and MeSH terms (see
``medunlearn.biodivergence.pools.pubmedqa_pool``). These are rule labels, not LLM labels: with the default
``--label-source heuristic`` the v1.0 dev/test splits stay empty by design; ``--label-source llm`` records
them as LLM labels to exercise the full pipeline on real text (say so if you publish it).

    python dataset_scripts/biodivergence_pubmedqa.py --source ../shared/data/pubmedqa/ori_pqal.json \
        --out bd_pubmedqa
    python dataset_scripts/biodivergence_pubmedqa.py ... \
        --push-to-hub USER/biodivergence-pubmedqa   # needs a token
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", type=Path, required=True, help="PubMedQA ori_pqal.json")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--label-source", choices=["heuristic", "llm"], default="heuristic")
    parser.add_argument("--push-to-hub", metavar="REPO_ID", default=None)
    args = parser.parse_args(argv)

    from medunlearn.biodivergence import PoolSource, audit_folder, build_biodivergence

    source = PoolSource(pubmedqa=args.source, pubmedqa_label_source=args.label_source)
    folder, stats = build_biodivergence(args.out, source, seed=args.seed, save_pool=args.out / "pool.jsonl")
    report = audit_folder(folder)
    print("\n".join(report.lines()))
    status = 0 if report.ok else 1
    if status == 0 and args.push_to_hub:
        from huggingface_hub import upload_folder

        upload_folder(repo_id=args.push_to_hub, repo_type="dataset", folder_path=str(args.out))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
