"""``medunlearn report EVALDIR...``: table, JSON and PNG plots comparing evaluation folders."""

from __future__ import annotations

import argparse

from medunlearn.evaluation.report import write_report

EPILOG = """example (two evaluations of the same forget config, e.g. from `medunlearn evaluate`):
  medunlearn report evals/grad_diff evals/simnpo --out evals/report

writes evals/report/report.json and the plots mu_afe_tradeoff.png, mu_same_vs_out_of_disease.png and
leakage_vs_degeneration.png, and prints one row per method × population × QA type
(MU, AFE, LS next to DS, ROUGE-L, Prob)."""


def build_parser(prog: str = "medunlearn report") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Compare evaluation folders: a table per method × population × QA type, "
        "report.json and plots.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "eval_dirs", nargs="+", metavar="EVALDIR", help="folders written by `medunlearn evaluate`"
    )
    parser.add_argument(
        "--out", default="report", help="where report.json and the PNGs go (default: ./report)"
    )
    return parser


def run(args) -> int:
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # piped or logged: rich would assume 80 columns and squeeze the numbers away
        console = Console(width=160)
    payload = write_report(args.eval_dirs, args.out, console=console)
    console.print(f"wrote {args.out}/report.json and {', '.join(payload['plots'])}")
    return 0
