"""``medunlearn demo``: parses the demo's options and runs :func:`medunlearn.demo.run_demo`."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from medunlearn.cli.options import patient_count, seed_int
from medunlearn.cli.verbosity import QUIET, output_level
from medunlearn.demo.settings import FULL, QUICK, DemoError
from medunlearn.utils.files import check_not_an_input

EPILOG = """examples:
  medunlearn demo --quick --out runs/demo-quick   # about a minute: tiny cohort, a few steps per method
  medunlearn demo                                 # the full study into runs/demo: \
about 33 CPU-minutes (docs/getting-started.md)

The report folder (printed at the end) holds demo_summary.json (every number shown), table.txt,
report.json and the PNG plots of `medunlearn report`."""


def build_parser(prog: str = "medunlearn demo") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run the AMNESIA study (build, fine-tune, unlearn with GradDiff / KL-Min / SimNPO / RMU, "
        "evaluate, report) and a BioDivergence split comparison on the embedded fictitious data, on CPU.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", default="runs/demo", help="folder for everything the demo writes (default runs/demo)"
    )
    parser.add_argument(
        "--patients",
        type=patient_count,
        default=None,
        help=f"cohort size (default {FULL.patients}, {QUICK.patients} with --quick)",
    )
    parser.add_argument("--seed", type=seed_int, default=0, help="fixes the cohort, the splits and the model")
    parser.add_argument("--quick", action="store_true", help="a one-minute version (used by the tests)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def run(args: argparse.Namespace) -> int:
    from medunlearn.demo.run import run_demo  # the stages: pandas, torch (not for --help)

    settings = QUICK if args.quick else FULL
    if args.patients is not None:
        if args.patients < 20:
            raise DemoError("--patients must be at least 20 (forget_10 needs 2 patients)")
        settings = replace(settings, patients=args.patients)
    quiet = output_level() == QUIET
    check_not_an_input(args.out)  # not the current folder (it would be filled with the demo's folders)
    run_demo(Path(args.out), settings, args.seed, progress=not args.no_progress, quiet=quiet)
    return 0
