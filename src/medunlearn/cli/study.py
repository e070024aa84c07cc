"""``medunlearn study``: parses the options, calls :func:`medunlearn.study.run_study` and prints the grid."""

from __future__ import annotations

import argparse
from pathlib import Path

from medunlearn.cli.options import (
    DTYPE_HELP,
    add_engine_arguments,
    announce_precision,
    concurrency_count,
    engine_settings,
)
from medunlearn.evaluation.engines import refuse_one_url_for_many_models
from medunlearn.study.config import load_study
from medunlearn.study.executors import EXECUTORS
from medunlearn.study.grid import study_precision
from medunlearn.study.run import run_study

EPILOG = """examples:
  medunlearn study recipes/studies/paper.yaml --validate        # check the paper-scale file, run nothing
  medunlearn study recipes/studies/tiny.yaml --out /tmp/tiny --methods grad_diff --forget forget_10
  medunlearn report /tmp/tiny --out /tmp/tiny/report   # the study's figures and Table 2 (Markdown, LaTeX)
  medunlearn study recipes/studies/mini.yaml --out runs/mini --jobs 2   # 18 cells, CPU (see docs/study.md)
  medunlearn study recipes/studies/paper.yaml --executor slurm --jobs 16   # one Slurm job per stage
  medunlearn study recipes/studies/mini.yaml --out runs/mini --engine vllm  # generations on vLLM servers
  medunlearn study recipes/studies/muse-sustainability.yaml --out runs/muse-sust   # MUSE's C6 protocol
  medunlearn study recipes/studies/tiny.yaml --validate --dtype bfloat16   # a bf16 study (over the file)

Rerunning the same command resumes: finished stages (fingerprint matches) are skipped, a changed method
setting reruns that method's cells only. The folder holds study.json (grid, fingerprints, status),
study.log, cells/<cell>/model, cells/<cell>/eval and results.parquet / results.json."""


def build_parser(prog: str = "medunlearn study") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run a study file: fine-tune once, then unlearn and evaluate every cell (method x forget "
        "config x seed), skipping the cells already finished with the same settings.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("study", help="the study file (YAML; see recipes/studies/ and docs/study.md)")
    parser.add_argument("--out", default=None, help="the study folder (default runs/study-<name>)")
    parser.add_argument(
        "--jobs", type=concurrency_count, default=1, help="stages run at once (default 1; at most 1,024)"
    )
    parser.add_argument(
        "--threads",
        type=concurrency_count,
        default=1,
        help="torch threads per stage (default 1: --jobs N on N cores)",
    )
    parser.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="processes",
        help="processes: local process pool; local: submitit's local executor; slurm: submitit on Slurm "
        "(parameters from the file's `slurm:` mapping)",
    )
    parser.add_argument("--methods", default=None, help="comma-separated method labels to run (default all)")
    parser.add_argument("--forget", default=None, help="comma-separated forget configs to run (default all)")
    parser.add_argument(
        "--validate", action="store_true", help="check the file (methods, fields, forget configs) and stop"
    )
    add_dtype_option(parser)
    add_engine_arguments(parser)
    return parser


def add_dtype_option(parser: argparse.ArgumentParser) -> None:
    """``--dtype``: the study's precision over the file's ``dtype`` (docs/study.md, "Precision")."""
    from medunlearn.utils.precision import DTYPE_CHOICES

    parser.add_argument(
        "--dtype",
        choices=DTYPE_CHOICES,
        default=None,
        help=DTYPE_HELP + "; every stage that trains (bf16 autocast over float32 weights) or evaluates "
        "computes in it (default: the study file's `dtype`, else auto); bfloat16 changes the fingerprints",
    )


def _split(value: str | None) -> list[str] | None:
    return [part.strip() for part in value.split(",") if part.strip()] if value else None


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    study = load_study(args.study)
    study.evaluation.runner.update(engine_settings(args))  # over the file's evaluation.runner
    refuse_one_url_for_many_models(study.evaluation.runner)  # every cell is another model
    if args.dtype is not None:
        study.dtype = args.dtype  # over the file's dtype
    announce_precision(study_precision(study))  # once; every stage computes in it
    console = Console(width=160)
    if args.validate:
        from medunlearn.study.grid import validate_study

        grid = validate_study(study)
        cells = len(study.methods) * len(study.forget) * len(study.seeds)
        forget = "folds" if study.benchmark == "muse" else "forget configs"
        console.print(
            f"{args.study}: valid — {len(study.methods)} methods × {len(study.forget)} {forget} × "
            f"{len(study.seeds)} seeds = {cells} cells" + ("" if grid else " (data not built yet)"),
            highlight=False,
        )
        return 0
    out = Path(args.out) if args.out else Path("runs") / f"study-{study.name}"
    result = run_study(
        study,
        out,
        jobs=args.jobs,
        executor=args.executor,
        threads=args.threads,
        methods=_split(args.methods),
        forget=_split(args.forget),
        log=lambda text: console.print(text, highlight=False),
    )
    if study.benchmark == "muse":
        console.print(_muse_table(study, result))
        for figure in result["results"]["figures"]:
            console.print(f"figure: {figure}", highlight=False)
        _print_totals(console, result)
        return 0
    table = Table(title=f"study {study.name}: forget seen QA (AFE) and retained patients' MU")
    for header in ("stage", "this run"):
        table.add_column(header, no_wrap=True)
    for header in ("AFE", "MU same-dis.", "MU out-of-dis."):
        table.add_column(header, justify="right")
    values: dict = {}
    for row in result["results"]["rows"]:
        if row["qa_type"] == "all":
            values.setdefault(row["stage"], {})[row["population"]] = row
    ran = set(result["ran"])
    for stage in [s["stage"] for s in result["results"]["stages"]] + result["results"]["missing"]:
        cells = values.get(stage, {})
        table.add_row(
            stage,
            "ran" if stage in ran else ("skipped" if stage in result["skipped"] else "missing"),
            _fmt(cells.get("forget_seen", {}).get("answer_forgetting")),
            _fmt(cells.get("retain_same_disease", {}).get("model_utility")),
            _fmt(cells.get("retain_out_of_disease", {}).get("model_utility")),
        )
    console.print(table)
    _print_totals(console, result)
    return 0


def _print_totals(console, result: dict) -> None:
    console.print(
        f"ran {len(result['ran'])}, skipped {len(result['skipped'])} (finished before) in "
        f"{result['seconds']:.0f} s; results: {Path(result['study_dir']) / 'results.parquet'}",
        highlight=False,
    )


def _muse_table(study, result: dict):
    """A MUSE protocol study's rows: the models before unlearning, then one line per method, seed and fold."""
    from rich.table import Table

    from medunlearn.study.muse_collect import METRICS

    table = Table(title=f"study {study.name}: MUSE {study.protocol}")
    for header in ("stage", "this run", "method", "seed", "fold", "docs", "request"):
        table.add_column(header, no_wrap=True)
    for header in METRICS:
        table.add_column(header, justify="right")
    ran, skipped = set(result["ran"]), set(result["skipped"])
    for row in result["results"]["rows"]:
        status = "ran" if row["stage"] in ran else ("skipped" if row["stage"] in skipped else "–")
        described = [row.get(key) for key in ("label", "seed", "fold", "fold_documents", "request")]
        table.add_row(
            row["stage"],
            status,
            *("–" if value is None else str(value) for value in described),
            *(_fmt(row.get(metric)) for metric in METRICS),
        )
    for stage in result["results"]["missing"]:
        table.add_row(stage, "missing", *[""] * (5 + len(METRICS)))
    return table
