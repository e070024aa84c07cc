"""``medunlearn biodivergence build|audit|eval``: parses, calls
:func:`medunlearn.biodivergence.build_biodivergence`, :func:`~medunlearn.biodivergence.audit_folder` or
:func:`~medunlearn.biodivergence.evaluate_biodivergence`, prints."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from medunlearn.biodivergence.audit import audit_folder
from medunlearn.biodivergence.baselines import ZeroShotConfig
from medunlearn.biodivergence.build import PoolSource, build_biodivergence
from medunlearn.biodivergence.evaluate import evaluate_biodivergence

EPILOG = """examples:
  medunlearn biodivergence build --synthetic --pairs 2000 --seed 0 --out bd_demo
  medunlearn biodivergence audit bd_demo
  medunlearn biodivergence eval --baseline lexical --data bd_demo --out bd_demo_eval
  medunlearn biodivergence eval --predictions bd_demo_eval/predictions.jsonl --data bd_demo

  medunlearn biodivergence build --pool my_pool.jsonl --out my_build
  medunlearn biodivergence build --pubmedqa ../shared/data/pubmedqa/ori_pqal.json --out bd_pubmedqa

A pool file has one claim pair per row (JSON Lines, JSON or Parquet) with pair_id, domain, claim_a, claim_b,
article_a, article_b, conflict_type, axes (list), label_source (llm|heuristic), confidence, and optionally
abstract_a/b, dominant_confounder, reconciliation, evidence_a/b. A predictions file is JSON Lines with
pair_id and either the record fields or `prediction` (a model's raw JSON text).
"""


def build_parser(prog: str = "medunlearn biodivergence") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Build, audit and evaluate BioDivergence claim-pair splits (v1.0 article-disjoint and "
        "v1.0-pairlevel) as a Hub-ready dataset folder.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="action", required=True, metavar="{build,audit,eval}")

    build = commands.add_parser(
        "build",
        help="split a pair pool into a Hub-ready folder",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Split a pair pool into v1.0 and v1.0-pairlevel and write the folder.",
    )
    source = build.add_mutually_exclusive_group(required=True)
    source.add_argument("--pool", type=Path, help="pool file (.jsonl, .json or .parquet)")
    source.add_argument("--synthetic", action="store_true", help="use the fictitious pool generator")
    source.add_argument(
        "--pubmedqa", type=Path, help="PubMedQA ori_pqal.json: pair conclusions within MeSH terms"
    )
    build.add_argument("--out", type=Path, required=True, help="output folder")
    build.add_argument("--pairs", type=int, default=2000, help="pairs of the synthetic pool (default 2000)")
    build.add_argument("--seed", type=int, default=0, help="seed of the pool generator and the splits")
    build.add_argument(
        "--pubmedqa-label-source",
        choices=["heuristic", "llm"],
        default="heuristic",
        help="what the PubMedQA rule labels are recorded as (llm only to exercise dev/test)",
    )
    build.add_argument("--save-pool", type=Path, help="also write the pool used as JSON Lines")

    audit = commands.add_parser(
        "audit",
        help="check a folder's split invariants",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Exit 0 iff v1.0 is article-, claim- and pair-disjoint, dev/test hold "
        "only LLM labels, nothing is below confidence 0.45 and every label is valid.",
    )
    audit.add_argument("data", type=Path, help="folder written by `build`")

    evaluate = commands.add_parser(
        "eval",
        help="run a baseline or score a predictions file",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a baseline (fit on train) or read a predictions file, and "
        "score it on a split with the contextual_contradiction metric.",
    )
    what = evaluate.add_mutually_exclusive_group(required=True)
    what.add_argument("--baseline", choices=["majority", "lexical", "zero-shot"])
    what.add_argument("--predictions", type=Path, help="JSON Lines predictions to score")
    evaluate.add_argument("--data", type=Path, required=True, help="folder written by `build`")
    evaluate.add_argument("--config", default="v1.0", help="v1.0 (default) or v1.0-pairlevel")
    evaluate.add_argument("--split", default="test", help="split to score (default test)")
    evaluate.add_argument("--model", default=None, help="zero-shot model: local path or smollm2-135m")
    evaluate.add_argument("--limit", type=int, default=None, help="score only the first N pairs")
    evaluate.add_argument(
        "--max-new-tokens", type=int, default=160, help="zero-shot: tokens to generate (160)"
    )
    evaluate.add_argument(
        "--batch-size", type=int, default=8, help="zero-shot: prompts per generate call (8)"
    )
    evaluate.add_argument(
        "--device", default=None, help="zero-shot: torch device (default: cuda if available)"
    )
    evaluate.add_argument(
        "--out", type=Path, default=None, help="folder for predictions.jsonl and metrics.json"
    )
    return parser


def format_table(scores: dict) -> str:
    lines = [f"{'metric':<52}value"]
    for key, value in scores.items():
        if isinstance(value, dict):
            lines += [f"{key + '[' + name + ']':<52}{score:.4f}" for name, score in value.items()]
        elif isinstance(value, float):
            lines.append(f"{key:<52}{value:.4f}")
        else:
            lines.append(f"{key:<52}{value}")
    return "\n".join(lines)


def run_build(args) -> int:
    source = PoolSource(
        pool=args.pool,
        pubmedqa=args.pubmedqa,
        synthetic=args.synthetic,
        pairs=args.pairs,
        pubmedqa_label_source=args.pubmedqa_label_source,
    )
    folder, stats = build_biodivergence(args.out, source, seed=args.seed, save_pool=args.save_pool)
    print(
        f"wrote {folder}: v1.0 {stats.split_sizes}, v1.0-pairlevel {stats.pairlevel_split_sizes}; "
        f"bridging pairs dropped: {stats.bridging_pairs_dropped}"
    )
    if stats.split_sizes["dev"] + stats.split_sizes["test"] == 0:
        print(
            "note: no LLM-labelled pair survived cleaning, so dev and test are empty "
            "(v1.0 admits heuristic labels to train only)"
        )
    return 0


def run_audit(args) -> int:
    report = audit_folder(args.data)
    print("\n".join(report.lines()))
    if not report.ok:
        violation = report.first_violation
        print(f"audit FAILED: {violation.name}: {violation.detail}", file=sys.stderr)
        return 1
    print(f"audit passed: {sum(c.ok for c in report.checks)} checks")
    return 0


def run_eval(args) -> int:
    zero_shot = ZeroShotConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evaluate_biodivergence(
            args.data,
            args.out,
            baseline=args.baseline,
            predictions=args.predictions,
            config=args.config,
            split=args.split,
            limit=args.limit,
            model=args.model,
            zero_shot=zero_shot,
            device=args.device,
        )
    for warning in caught:
        print(f"note: {warning.message}")
    out = Path(result["out"])
    print(
        f"{result['system']} on {args.config}/{args.split} ({result['n']} pairs)\n"
        + format_table(result["scores"])
    )
    print(f"wrote {out / 'metrics.json'}" + (f" and {out / 'predictions.jsonl'}" if args.baseline else ""))
    return 0


def run(args) -> int:
    return {"build": run_build, "audit": run_audit, "eval": run_eval}[args.action](args)
