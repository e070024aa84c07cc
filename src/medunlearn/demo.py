"""``medunlearn demo``: the AMNESIA pipeline on the embedded default, on a laptop CPU.

Today it builds the AMNESIA folder from the fictitious cohort, audits it and prints its split table; the
fine-tuning, unlearning and evaluation stages join as they land.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def build_parser(prog: str = "medunlearn demo") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run the AMNESIA pipeline on the embedded fictitious cohort, on CPU.",
        epilog="example:\n  medunlearn demo --out demo-output --quick",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default="demo-output", help="folder for everything the demo writes")
    parser.add_argument("--patients", type=int, default=None, help="cohort size (default: 8820, or 200 with --quick)")
    parser.add_argument("--seed", type=int, default=0, help="fixes the cohort and every split")
    parser.add_argument("--quick", action="store_true", help="a one-minute version (used by the tests)")
    return parser


def run(args: argparse.Namespace) -> int:
    from medunlearn.amnesia.audit import audit_folder
    from medunlearn.amnesia.build import build_amnesia_folder
    from medunlearn.amnesia.cli import print_split_table

    patients = args.patients or (200 if args.quick else 8820)
    out = Path(args.out)
    print(f"[1/2] building the AMNESIA folder from the fictitious cohort ({patients:,} patients, seed {args.seed})")
    folder = build_amnesia_folder(out / "amnesia", overwrite=True, source="synthetic", patients=patients,
                                  seed=args.seed)
    print_split_table(folder)
    print("[2/2] auditing every split invariant")
    for invariant, detail in audit_folder(folder).checks:
        print(f"  ok  {invariant}: {detail}")
    print(f"AMNESIA folder: {folder.resolve()}  (load it with datasets.load_dataset({str(folder)!r}, 'forget_10'))")
    return 0
