"""``medunlearn biodivergence mine|build|audit|eval|compare``: parses, calls
:func:`medunlearn.biodivergence.mining.mine_pool`, :func:`medunlearn.biodivergence.build_biodivergence`,
:func:`~medunlearn.biodivergence.audit_folder`, :func:`~medunlearn.biodivergence.evaluate_biodivergence` or
:func:`~medunlearn.biodivergence.leakage_gap.compare_baselines`, prints."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from pathlib import Path

from medunlearn.cli.options import (
    batch_size_int,
    concurrency_count,
    epoch_count,
    llm_spec,
    lora_rank,
    new_tokens,
    non_negative_int,
    pair_count,
    positive_float,
    positive_int,
    resample_count,
    seed_int,
    sequence_tokens,
)
from medunlearn.utils.files import (
    check_apart_from_output,
    check_not_an_input,
    check_output_file,
    check_output_folder,
    check_writable,
    no_empty_output_on_failure,
)

# medunlearn.biodivergence (pandas, scipy) is imported by the run_* functions: the parser needs none of it.

EPILOG = """examples:
  medunlearn biodivergence build --synthetic --pairs 2000 --seed 0 --out bd_demo
  medunlearn biodivergence audit bd_demo
  medunlearn biodivergence eval --baseline lexical --data bd_demo --out bd_demo_eval
  medunlearn biodivergence eval --predictions bd_demo_eval/predictions.jsonl --data bd_demo
  medunlearn biodivergence eval --baseline finetuned --data bd_demo --epochs 2 --out bd_demo_ft
  medunlearn biodivergence compare --data bd_demo --baselines majority lexical --out bd_demo_compare

  medunlearn biodivergence build --pool my_pool.jsonl --out my_build
  medunlearn biodivergence build --pubmedqa ../shared/data/pubmedqa/ori_pqal.json --out bd_pubmedqa

  medunlearn biodivergence mine --abstracts my_abstracts.jsonl --out my_pool_dir --cap-per-domain 100
  medunlearn biodivergence build --abstracts pubmed24n0001.xml.gz --out my_build \
      --labeller openai:smollm2-135m@http://127.0.0.1:8000/v1 --cap-per-domain 100
  medunlearn biodivergence build --abstracts ../shared/data/pubmedqa/ori_pqal.json --out my_silver_build \
      --eval-labels heuristic

Abstracts files: PubMed XML (PubmedArticleSet, .xml or .xml.gz), JSON Lines or CSV (pmid, title, abstract,
optional domain and year), PubMedQA's ori_pqal.json, the NCBI Disease corpus. `mine` writes each stage's
file into its folder (abstracts, claims, domains, pairs, labels, pool.jsonl, funnel.md) and a rerun
resumes; `build --abstracts` mines into OUT-mining (or --mine-dir) and then builds OUT from the pool.
v1.0's dev and test take LLM labels only (the paper's rule), so `build --abstracts` needs --labeller, or
--eval-labels heuristic to admit the rule-made labels to dev/test (the card and the audit then warn).

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
    commands = parser.add_subparsers(dest="action", required=True, metavar="{mine,build,audit,eval,compare}")

    mine = commands.add_parser(
        "mine",
        help="abstracts -> claims -> candidate pairs -> silver labels: a pair pool",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the construction pipeline (read, de-duplicate, extract claims, assign domains, mine "
        "pairs, label) on abstracts files; every stage writes a file into --out and a rerun resumes.",
    )
    mine.add_argument(
        "--abstracts", type=Path, nargs="+", required=True, metavar="FILE", help="abstracts files"
    )
    mine.add_argument("--out", type=Path, required=True, metavar="POOL_DIR", help="folder of the stage files")
    add_mining_arguments(mine)

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
    source.add_argument(
        "--abstracts",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="abstracts files: mine a pool from them (as `mine`), then build",
    )
    build.add_argument("--out", type=Path, required=True, help="output folder")
    build.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    build.add_argument(
        "--pairs",
        type=pair_count,
        default=2000,
        help="pairs of the synthetic pool (default 2000; at most 200,000)",
    )
    build.add_argument("--seed", type=seed_int, default=0, help="seed of the pool generator and the splits")
    build.add_argument(
        "--pubmedqa-label-source",
        choices=["heuristic", "llm"],
        default="heuristic",
        help="what the PubMedQA rule labels are recorded as (llm only to exercise dev/test)",
    )
    build.add_argument(
        "--eval-labels",
        choices=["llm", "heuristic"],
        default="llm",
        help="label sources v1.0 dev/test admit: llm (the paper's rule, default) or heuristic (rule-made "
        "labels too, at confidence >= 0.45; every row, the card and the audit say so). Without --labeller, "
        "build --abstracts needs heuristic",
    )
    build.add_argument("--save-pool", type=Path, help="also write the pool used as JSON Lines")
    build.add_argument(
        "--mine-dir", type=Path, default=None, help="with --abstracts: the stage files (default OUT-mining)"
    )
    add_mining_arguments(build, with_seed=False)

    add_audit_parser(commands)

    add_eval_parser(commands)
    add_compare_parser(commands)
    return parser


def add_audit_parser(commands) -> None:
    """`audit`: check a folder's split invariants."""
    audit = commands.add_parser(
        "audit",
        help="check a folder's split invariants",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Exit 0 iff v1.0 is article-, claim- and pair-disjoint, dev/test hold "
        "only LLM labels (or the sources the build's --eval-labels admitted; a WARN line counts heuristic "
        "ones), nothing is below confidence 0.45 and every label is valid.",
    )
    audit.add_argument("data", type=Path, help="folder written by `build`")


def add_eval_parser(commands) -> None:
    """`eval`: run a baseline or score a predictions file."""
    evaluate = commands.add_parser(
        "eval",
        help="run a baseline or score a predictions file",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a baseline (fit on train) or read a predictions file, and "
        "score it on a split with the contextual_contradiction metric.",
    )
    what = evaluate.add_mutually_exclusive_group(required=True)
    what.add_argument("--baseline", choices=["majority", "lexical", "zero-shot", "finetuned"])
    what.add_argument("--predictions", type=Path, help="JSON Lines predictions to score")
    evaluate.add_argument("--data", type=Path, required=True, help="folder written by `build`")
    evaluate.add_argument("--config", default="v1.0", help="v1.0 (default) or v1.0-pairlevel")
    evaluate.add_argument("--split", default="test", help="split to score (default test)")
    evaluate.add_argument(
        "--model",
        default=None,
        help="zero-shot: a causal LM (local path or smollm2-135m); finetuned: an encoder (local folder or "
        "Hub id; default the offline all-MiniLM-L6-v2)",
    )
    evaluate.add_argument("--limit", type=positive_int, default=None, help="score only the first N pairs")
    evaluate.add_argument(
        "--max-new-tokens", type=new_tokens, default=160, help="zero-shot: tokens to generate (160)"
    )
    evaluate.add_argument(
        "--batch-size", type=batch_size_int, default=8, help="zero-shot: prompts per generate call (8)"
    )
    evaluate.add_argument(
        "--device", default=None, help="zero-shot: torch device (default: cuda if available)"
    )
    evaluate.add_argument(
        "--out", type=Path, default=None, help="folder for predictions.jsonl and metrics.json"
    )
    add_finetuned_arguments(evaluate)


def add_finetuned_arguments(parser: argparse.ArgumentParser) -> None:
    """The fine-tuned baseline's options (eval --baseline finetuned, compare)."""
    group = parser.add_argument_group("fine-tuned baseline")
    group.add_argument(
        "--epochs", type=epoch_count, default=4, help="most epochs (early stopping on dev loss; 4)"
    )
    group.add_argument(
        "--learning-rate", type=positive_float, default=5e-5, help="AdamW learning rate (5e-5)"
    )
    group.add_argument(
        "--train-batch-size", type=batch_size_int, default=16, help="pairs per training step (16)"
    )
    group.add_argument(
        "--max-length", type=sequence_tokens, default=256, help="tokens of the pair input (256)"
    )
    group.add_argument(
        "--patience", type=non_negative_int, default=1, help="epochs without dev improvement (1)"
    )
    group.add_argument("--seed", type=seed_int, default=0, help="training seed (0)")
    group.add_argument(
        "--context",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="append each claim's abstract to the input (default: when the folder has abstracts)",
    )
    group.add_argument(
        "--lora", action="store_true", help="train LoRA adapters (PEFT) instead of the encoder"
    )
    group.add_argument("--lora-rank", type=lora_rank, default=8, help="LoRA rank (8)")


def add_compare_parser(commands) -> None:
    compare = commands.add_parser(
        "compare",
        help="train and score baselines on both variants: the pair-level - v1.0 leakage gap",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fit each baseline on the train split of v1.0-pairlevel and of v1.0, score both test "
        "splits, and report the gap of every metric with an article-bootstrap interval; the gap 'appears' "
        "only when the interval lies above 0. Also prints the pair-level split's article overlap.",
    )
    compare.add_argument("--data", type=Path, required=True, help="folder written by `build`")
    compare.add_argument(
        "--baselines",
        nargs="+",
        choices=["majority", "lexical", "finetuned"],
        default=["majority", "lexical", "finetuned"],
        help="baselines to compare (default all three)",
    )
    compare.add_argument("--model", default=None, help="encoder of the fine-tuned baseline (default MiniLM)")
    compare.add_argument(
        "--resamples", type=resample_count, default=2000, help="bootstrap resamples (2000; at most 10,000)"
    )
    compare.add_argument("--out", type=Path, default=None, help="folder for compare.json (optional)")
    add_finetuned_arguments(compare)


def add_mining_arguments(parser: argparse.ArgumentParser, with_seed: bool = True) -> None:
    """The construction pipeline's options, shared by `mine` and `build --abstracts`."""
    group = parser.add_argument_group("mining (with --abstracts)")
    group.add_argument(
        "--labeller",
        metavar="BACKEND:MODEL",
        type=llm_spec,
        default=None,
        help="the LLM silver labeller, e.g. openai:smollm2-135m@http://127.0.0.1:8000/v1 or "
        "transformers:smollm2-135m (default: heuristic labels only; `build` then needs --eval-labels "
        "heuristic, since v1.0 dev/test take LLM labels only)",
    )
    group.add_argument(
        "--cap-per-domain",
        type=positive_int,
        default=10_000,
        help="most pairs kept per domain (paper: 10000)",
    )
    group.add_argument(
        "--llm-pairs-per-domain",
        type=non_negative_int,
        default=None,
        help="LLM-label only the best-ranked N pairs of each domain (default: all kept pairs)",
    )
    group.add_argument(
        "--label-prompt", type=Path, default=None, help="a prompt file replacing silver_label.yaml"
    )
    group.add_argument(
        "--llm-cache",
        type=Path,
        default=None,
        help="SQLite cache of LLM answers (default POOL_DIR/llm-cache.sqlite)",
    )
    group.add_argument(
        "--neighbours", type=positive_int, default=10, help="neighbours retrieved per claim (10)"
    )
    group.add_argument(
        "--format", default=None, help="abstracts format for every file (default: detected per file)"
    )
    group.add_argument(
        "--concurrency",
        type=concurrency_count,
        default=8,
        help="LLM requests in flight on a server (8; at most 1,024)",
    )
    if with_seed:
        group.add_argument("--seed", type=seed_int, default=0, help="seed of MinHash and the ANN index (0)")


def mine_config(args):
    from medunlearn.biodivergence.mining import LabelConfig, MineConfig
    from medunlearn.biodivergence.mining.pairs import MiningConfig

    return MineConfig(
        mining=MiningConfig(k=args.neighbours, cap_per_domain=args.cap_per_domain, seed=args.seed),
        labels=LabelConfig(
            labeller=args.labeller,
            cache=args.llm_cache,
            prompt=args.label_prompt,
            llm_pairs_per_domain=args.llm_pairs_per_domain,
            seed=args.seed,
            concurrency=args.concurrency,
        ),
        format=args.format,
        seed=args.seed,
    )


def _print_stage(stage: str, what: str, seconds: float) -> None:
    print(
        f"stage {stage}: "
        + ("current, skipped (resumed)" if what == "skipped" else f"done in {seconds:.1f} s")
    )


def _llm_calls_line(calls: dict) -> str:
    return (
        f"LLM labeller this run: {calls['requests']} requests, {calls['cache_hits']} from the cache, "
        f"{calls['calls']} calls sent, {calls['failed']} failed"
    )


def _check_llm_cache(args, inputs: dict) -> None:
    """The LLM cache (an SQLite file) is never one of the files the command reads."""
    if args.llm_cache is not None:
        check_output_file(args.llm_cache, inputs, "--llm-cache")


def _build_inputs(args) -> dict:
    """The files and folders a build reads, which its --out may never replace."""
    return {
        "--pool": args.pool,
        "--pubmedqa": args.pubmedqa,
        "--abstracts": args.abstracts,
        "--mine-dir": args.mine_dir,
        "--save-pool": args.save_pool,
    }


def run_mine(args) -> int:
    from medunlearn.biodivergence.mining import format_funnel, mine_pool

    check_not_an_input(args.out, {"--abstracts": args.abstracts})
    _check_llm_cache(args, {"--abstracts": args.abstracts, "--label-prompt": args.label_prompt})

    with no_empty_output_on_failure(args.out):
        result = mine_pool(args.abstracts, args.out, mine_config(args), on_stage=_print_stage)
    print(format_funnel(result.funnel, result.seconds))
    if result.llm_calls:
        print(_llm_calls_line(result.llm_calls))
    llm = result.label_report.get("llm")
    if llm and llm["failed"]:
        print(f"note: {llm['failed']} of {llm['requests']} LLM label requests failed: {llm['failures']}")
    out = result.out_dir
    print(f"wrote {out / 'pool.jsonl'} ({len(result.pool)} pool rows) and {out / 'funnel.md'}")
    return 0


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
    from medunlearn.biodivergence.build import PoolSource, build_biodivergence, mine_dir_for

    # Written beside --out, never inside it: the built folder replaces --out whole.
    written = {"--save-pool": args.save_pool, "--llm-cache": args.llm_cache, "--mine-dir": args.mine_dir}
    check_apart_from_output(args.out, written)
    check_output_folder(args.out, overwrite=args.overwrite, inputs=_build_inputs(args))
    read = {name: value for name, value in _build_inputs(args).items() if name != "--save-pool"}
    if args.save_pool is not None:
        check_output_file(args.save_pool, read, "--save-pool")
    _check_llm_cache(args, read | {"--label-prompt": args.label_prompt})
    source = PoolSource(
        pool=args.pool,
        pubmedqa=args.pubmedqa,
        synthetic=args.synthetic,
        pairs=args.pairs,
        pubmedqa_label_source=args.pubmedqa_label_source,
        abstracts=args.abstracts,
        mine=mine_config(args) if args.abstracts else None,
        mine_dir=args.mine_dir,
    )
    # The mining stage files go to their own folder (resumable): kept on a failure, and named then.
    mine_dir = mine_dir_for(args.out, source) if args.abstracts else None
    with no_empty_output_on_failure(mine_dir) if mine_dir else contextlib.nullcontext():
        folder, stats = build_biodivergence(
            args.out,
            source,
            seed=args.seed,
            save_pool=args.save_pool,
            on_stage=_print_stage,
            eval_labels=args.eval_labels,
        )
    if args.abstracts:
        _print_mined_build(folder, mine_dir_for(args.out, source), stats)
    print(
        f"wrote {folder}: v1.0 {stats.split_sizes}, v1.0-pairlevel {stats.pairlevel_split_sizes}; "
        f"bridging pairs dropped: {stats.bridging_pairs_dropped}"
    )
    print(f"dev/test labels: {_eval_sources_text(stats.eval_label_sources)}")
    if stats.split_sizes["dev"] + stats.split_sizes["test"] == 0:
        print(
            "note: no pair with a label dev/test admit survived cleaning, so dev and test are empty "
            f"(--eval-labels {args.eval_labels}); empty splits are not written, and "
            "load_dataset(folder, 'v1.0') returns train only (the card says so)"
        )
    return 0


def _print_mined_build(folder: Path, mine_dir: Path, stats) -> None:
    """After `build --abstracts`: the funnel, the LLM calls and the share of mined pairs with a usable
    label."""
    import json

    from medunlearn.biodivergence.build import usable_share
    from medunlearn.biodivergence.mining import format_funnel

    funnel = json.loads((folder / "build.json").read_text())["funnel"]
    timings = json.loads((mine_dir / "timings.json").read_text())
    print(format_funnel(funnel, timings["seconds"]))
    if timings.get("llm_calls"):
        print(_llm_calls_line(timings["llm_calls"]))
    mined = funnel["counts"]["pairs"]["kept"]
    print(
        f"pairs with a usable label: {stats.pairs_after_cleaning} of {mined} "
        f"({usable_share(funnel, stats):.1%}; an LLM label, or a heuristic one with confidence >= 0.45)"
    )


def _eval_sources_text(sources: dict) -> str:
    """``heuristic``, ``llm`` or ``heuristic + llm`` over v1.0 dev and test; ``none`` when both are
    empty."""
    found = sorted({source for counts in sources.values() for source in counts})
    return " + ".join(found) if found else "none (dev and test are empty)"


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


def finetuned_config(args):
    from medunlearn.biodivergence.finetuned import FinetunedConfig

    return FinetunedConfig(
        model=args.model,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        batch_size=args.train_batch_size,
        max_length=args.max_length,
        patience=args.patience,
        seed=args.seed,
        use_context=args.context,
        lora=args.lora,
        lora_rank=args.lora_rank,
    )


def run_eval(args) -> int:
    from medunlearn.biodivergence.baselines import ZeroShotConfig
    from medunlearn.biodivergence.evaluate import evaluate_biodivergence

    if args.out is not None:  # the eval folder is never written into the folder or file it scores
        check_not_an_input(args.out, {"--data": args.data, "--predictions": args.predictions})
        check_writable(args.out)
    if args.baseline == "finetuned":
        options = finetuned_config(args)
    else:
        options = ZeroShotConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
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
            options=options,
            device=args.device,
        )
    for warning in caught:
        print(f"note: {warning.message}")
    out = Path(result["out"])
    print(
        f"{result['system']} on {args.config}/{args.split} ({result['n']} pairs)\n"
        + format_table(result["scores"])
    )
    if result.get("training"):
        training = result["training"]
        print(
            f"trained {training['epochs_run']} epochs ({training['steps']} steps) in "
            f"{training['train_seconds']:.1f} s; model card {out / 'README.md'}"
        )
    print(f"wrote {out / 'metrics.json'}" + (f" and {out / 'predictions.jsonl'}" if args.baseline else ""))
    return 0


def run_compare(args) -> int:
    import json

    from medunlearn.biodivergence.audit import read_hub_folder
    from medunlearn.biodivergence.leakage_gap import compare_baselines, gap_lines, leakage_line
    from medunlearn.metrics.bootstrap import BootstrapConfig

    if args.out is not None:
        check_not_an_input(args.out, {"--data": args.data})
        check_writable(args.out)
    configs = read_hub_folder(args.data)

    def show(name: str, result: dict) -> None:
        sizes = ", ".join(f"{variant} test {n}" for variant, n in result["n"].items())
        print(f"{name} ({sizes})")
        print("\n".join(gap_lines(name, result["gap"])))

    result = compare_baselines(
        configs,
        args.baselines,
        finetuned_config(args),
        BootstrapConfig(n_resamples=args.resamples),
        on_baseline=show,
    )
    print(leakage_line(result["leakage"]))
    bootstrap = result["bootstrap"]
    print(
        f"intervals: {bootstrap['level']:.0%} article bootstrap ({bootstrap['n_resamples']} resamples of "
        f"{bootstrap['n_articles']} articles, seed {bootstrap['seed']}); 'the gap appears' only when the "
        "interval lies above 0"
    )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "compare.json").write_text(
            json.dumps(result, indent=2, sort_keys=True, default=str) + "\n"
        )
        print(f"wrote {args.out / 'compare.json'}")
    return 0


def run(args) -> int:
    actions = {
        "mine": run_mine,
        "build": run_build,
        "audit": run_audit,
        "eval": run_eval,
        "compare": run_compare,
    }
    return actions[args.action](args)
