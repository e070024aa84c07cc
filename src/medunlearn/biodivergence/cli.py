"""``medunlearn biodivergence build|audit|eval``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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


class PredictionsFormatError(ValueError):
    """A predictions file that cannot be matched to the gold split."""


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Build, audit and evaluate BioDivergence claim-pair splits (v1.0 article-disjoint and "
        "v1.0-pairlevel) as a Hub-ready dataset folder.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="action", required=True, metavar="{build,audit,eval}")

    build = commands.add_parser("build", help="split a pair pool into a Hub-ready folder", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Split a pair pool into v1.0 and v1.0-pairlevel and write the folder.")
    source = build.add_mutually_exclusive_group(required=True)
    source.add_argument("--pool", type=Path, help="pool file (.jsonl, .json or .parquet)")
    source.add_argument("--synthetic", action="store_true", help="use the fictitious pool generator")
    source.add_argument("--pubmedqa", type=Path, help="PubMedQA ori_pqal.json: pair conclusions within MeSH terms")
    build.add_argument("--out", type=Path, required=True, help="output folder")
    build.add_argument("--pairs", type=int, default=2000, help="pairs of the synthetic pool (default 2000)")
    build.add_argument("--seed", type=int, default=0, help="seed of the pool generator and the splits")
    build.add_argument("--pubmedqa-label-source", choices=["heuristic", "llm"], default="heuristic",
                       help="what the PubMedQA rule labels are recorded as (llm only to exercise dev/test)")
    build.add_argument("--save-pool", type=Path, help="also write the pool used as JSON Lines")

    audit = commands.add_parser("audit", help="check a folder's split invariants", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Exit 0 iff v1.0 is article-, claim- and pair-disjoint, dev/test hold "
                                "only LLM labels, nothing is below confidence 0.45 and every label is valid.")
    audit.add_argument("data", type=Path, help="folder written by `build`")

    evaluate = commands.add_parser("eval", help="run a baseline or score a predictions file", epilog=EPILOG,
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   description="Run a baseline (fit on train) or read a predictions file, and "
                                   "score it on a split with the contextual_contradiction metric.")
    what = evaluate.add_mutually_exclusive_group(required=True)
    what.add_argument("--baseline", choices=["majority", "lexical", "zero-shot"])
    what.add_argument("--predictions", type=Path, help="JSON Lines predictions to score")
    evaluate.add_argument("--data", type=Path, required=True, help="folder written by `build`")
    evaluate.add_argument("--config", default="v1.0", help="v1.0 (default) or v1.0-pairlevel")
    evaluate.add_argument("--split", default="test", help="split to score (default test)")
    evaluate.add_argument("--model", default=None, help="zero-shot model: local path or smollm2-135m")
    evaluate.add_argument("--limit", type=int, default=None, help="score only the first N pairs")
    evaluate.add_argument("--max-new-tokens", type=int, default=160, help="zero-shot: tokens to generate (160)")
    evaluate.add_argument("--batch-size", type=int, default=8, help="zero-shot: prompts per generate call (8)")
    evaluate.add_argument("--device", default=None, help="zero-shot: torch device (default: cuda if available)")
    evaluate.add_argument("--out", type=Path, default=None, help="folder for predictions.jsonl and metrics.json")
    return parser


def _load_pool(args):
    from medunlearn.biodivergence.pools import PubMedQAPoolConfig, pubmedqa_pool, read_pool
    from medunlearn.biodivergence.schema import normalise_pool
    from medunlearn.biodivergence.synthetic import generate_pair_pool

    if args.pool:
        return read_pool(args.pool), {"source": f"pool file {args.pool.name}"}
    if args.pubmedqa:
        config = PubMedQAPoolConfig(seed=args.seed, label_source=args.pubmedqa_label_source)
        return pubmedqa_pool(args.pubmedqa, config), {
            "source": "PubMedQA PQA-L conclusions paired within MeSH terms (medunlearn rule labels)",
            "pubmedqa": config.__dict__, "license": "mit"}
    return normalise_pool(generate_pair_pool(n_pairs=args.pairs, seed=args.seed), "synthetic pool"), {
        "source": "fictitious pool (medunlearn.biodivergence.synthetic)", "pairs": args.pairs, "license": "cc0-1.0"}


def run_build(args) -> int:
    from medunlearn.biodivergence.export import write_hub_folder
    from medunlearn.biodivergence.pools import write_pool
    from medunlearn.biodivergence.splits import SplitConfig, build_splits

    pool, params = _load_pool(args)
    config = SplitConfig(seed=args.seed)
    configs, stats = build_splits(pool, config)
    params.update({"seed": args.seed, "min_confidence": config.min_confidence, "proportions": list(config.proportions),
                   "pairlevel_proportions": list(config.pairlevel_proportions),
                   "max_unit_share": config.max_unit_share, "max_drop_fraction": config.max_drop_fraction})
    if args.save_pool:
        write_pool(pool, args.save_pool)
    write_hub_folder(configs, stats, args.out, params)
    print(f"wrote {args.out}: v1.0 {stats.split_sizes}, v1.0-pairlevel {stats.pairlevel_split_sizes}; "
          f"bridging pairs dropped: {stats.bridging_pairs_dropped}")
    if stats.split_sizes["dev"] + stats.split_sizes["test"] == 0:
        print("note: no LLM-labelled pair survived cleaning, so dev and test are empty "
              "(v1.0 admits heuristic labels to train only)")
    return 0


def run_audit(args) -> int:
    from medunlearn.biodivergence.audit import audit_folder

    report = audit_folder(args.data)
    print("\n".join(report.lines()))
    if not report.ok:
        violation = report.first_violation
        print(f"audit FAILED: {violation.name}: {violation.detail}", file=sys.stderr)
        return 1
    print(f"audit passed: {sum(c.ok for c in report.checks)} checks")
    return 0


def _gold_split(args):
    from medunlearn.biodivergence.audit import read_hub_folder

    configs = read_hub_folder(args.data)
    if args.config not in configs:
        raise PredictionsFormatError(f"{args.data}: no config {args.config!r} (found {sorted(configs)})")
    if args.split not in configs[args.config]:
        raise PredictionsFormatError(f"{args.data}: config {args.config!r} has no split {args.split!r}")
    gold = configs[args.config][args.split]
    if args.limit is not None:
        gold = gold.iloc[: args.limit]
    return configs[args.config], gold.reset_index(drop=True)


def read_predictions(path: Path, pair_ids) -> list:
    """Predictions in the order of ``pair_ids``; a pair without a prediction counts as unparseable ("")."""
    from medunlearn.metrics.contextual_contradiction import check_record

    if not path.is_file():
        raise PredictionsFormatError(f"predictions file {path} does not exist")
    wanted = set(pair_ids)
    found: dict = {}
    for line_number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise PredictionsFormatError(f"{path}: line {line_number}: not JSON ({error.msg})") from None
        if not isinstance(row, dict) or "pair_id" not in row:
            raise PredictionsFormatError(f"{path}: line {line_number}: needs a `pair_id` field")
        pair_id = row.pop("pair_id")
        if pair_id not in wanted:
            raise PredictionsFormatError(f"{path}: line {line_number}: pair_id {pair_id!r} is not in the gold split")
        if pair_id in found:
            raise PredictionsFormatError(f"{path}: line {line_number}: pair_id {pair_id!r} appears twice")
        if "prediction" in row:
            if not isinstance(row["prediction"], str):
                raise PredictionsFormatError(f"{path}: line {line_number}: field `prediction` must be a string")
            found[pair_id] = row["prediction"]
        else:
            try:
                found[pair_id] = check_record("prediction", line_number, row)
            except ValueError as error:
                raise PredictionsFormatError(f"{path}: line {line_number}: {error}") from None
    missing = [pair_id for pair_id in pair_ids if pair_id not in found]
    if missing:
        print(f"note: {len(missing)} pairs have no prediction in {path} (e.g. {missing[0]!r}); they count as wrong")
    return [found.get(pair_id, "") for pair_id in pair_ids]


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


def run_eval(args) -> int:
    from medunlearn.biodivergence.baselines import make_baseline, prediction_rows, write_predictions
    from medunlearn.metrics.contextual_contradiction import OUTPUT_KEYS, SPAN_KEYS, contextual_contradiction

    splits, gold = _gold_split(args)
    if args.baseline:
        if args.baseline == "zero-shot":
            from medunlearn.biodivergence.baselines import ZeroShotConfig

            config = ZeroShotConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
            baseline = make_baseline(args.baseline, model=args.model, config=config, device=args.device)
        else:
            baseline = make_baseline(args.baseline)
        predictions = baseline.fit(splits["train"]).predict(gold)
        name = args.baseline
    else:
        predictions = read_predictions(args.predictions, list(gold["pair_id"]))
        name = args.predictions.stem
    references = gold[list(OUTPUT_KEYS + SPAN_KEYS)].to_dict(orient="records")
    for record in references:
        record["axes"] = list(record["axes"])
    scores = contextual_contradiction(predictions, references)
    out = args.out or Path("biodivergence_eval") / f"{name}-{args.config}-{args.split}"
    out.mkdir(parents=True, exist_ok=True)
    if args.baseline:
        write_predictions(prediction_rows(gold, predictions), out / "predictions.jsonl")
    summary = {"data": str(args.data), "config": args.config, "split": args.split,
               "system": name, "scores": scores}
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    print(f"{name} on {args.config}/{args.split} ({len(gold)} pairs)\n" + format_table(scores))
    print(f"wrote {out / 'metrics.json'}" + (f" and {out / 'predictions.jsonl'}" if args.baseline else ""))
    return 0


def run(args) -> int:
    from medunlearn.biodivergence.audit import FolderFormatError
    from medunlearn.biodivergence.ontology import UnknownLabelError
    from medunlearn.biodivergence.pools import PoolNotFoundError
    from medunlearn.biodivergence.schema import PoolFormatError

    user_errors = (PoolFormatError, PoolNotFoundError, FolderFormatError, PredictionsFormatError, UnknownLabelError)
    actions = {"build": run_build, "audit": run_audit, "eval": run_eval}
    try:
        return actions[args.action](args)
    except user_errors as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
