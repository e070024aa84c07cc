"""``medunlearn amnesia build | audit | publish``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from medunlearn.amnesia.audit import AuditFailure, audit_folder
from medunlearn.amnesia.build import build_amnesia
from medunlearn.amnesia.hub import print_split_table, publish_folder
from medunlearn.ontology.amnesia import DISEASE_LEVEL_DEFAULT, DISEASES

EXAMPLES = """examples:
  medunlearn amnesia build --out amnesia --patients 200 --seed 0
  medunlearn amnesia build --out amnesia-pmc --source pmc-patients --notes PMC-Patients.csv --qa qa.jsonl
  medunlearn amnesia audit amnesia
  medunlearn amnesia publish amnesia --repo my-org/amnesia-synthetic --dry-run
"""


def build_parser(prog: str = "medunlearn amnesia") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Build, audit and publish AMNESIA dataset folders (load them with datasets.load_dataset).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    build = sub.add_parser(
        "build",
        help="build a Hub-ready folder from the fictitious cohort or from PMC-Patients notes + a QA file",
        description="Build a Hub-ready AMNESIA folder: parquet per config and split, README with configs and card.",
        epilog="example:\n  medunlearn amnesia build --out amnesia --patients 200 --seed 0",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.add_argument(
        "--out", required=True, help="folder to write (atomically: nothing half-written on failure)"
    )
    build.add_argument(
        "--source",
        choices=["synthetic", "pmc-patients"],
        default="synthetic",
        help="synthetic: the embedded fictitious cohort (default); pmc-patients: --notes and --qa",
    )
    build.add_argument(
        "--patients",
        type=int,
        default=8820,
        help="cohort size for --source synthetic (default: 8820, the paper's)",
    )
    build.add_argument("--seed", type=int, default=0, help="fixes the cohort, the holdout and every split")
    build.add_argument("--notes", help="PMC-Patients file (.csv, .json or .jsonl) for --source pmc-patients")
    build.add_argument(
        "--qa", help="QA file (.jsonl: patient_id, qa_type, question, answer) for --source pmc-patients"
    )
    build.add_argument(
        "--disease-level",
        default=",".join(DISEASE_LEVEL_DEFAULT),
        help=f"comma-separated diseases with disease-level splits (default: %(default)s; "
        f"known: {', '.join(DISEASES)})",
    )
    build.add_argument("--qa-per-type", type=int, default=4, help="QA of each type per patient (default: 4)")
    build.add_argument("--overwrite", action="store_true", help="replace --out if it exists")

    audit = sub.add_parser(
        "audit",
        help="check every split invariant of a folder; exit 0 iff all hold",
        description="Re-read an AMNESIA folder and check every split invariant; exit 1 naming the first violation.",
        epilog="example:\n  medunlearn amnesia audit amnesia",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit.add_argument("folder", help="an AMNESIA folder written by `medunlearn amnesia build`")

    publish = sub.add_parser(
        "publish",
        help="upload a folder to the Hugging Face Hub as a dataset repo",
        description="Upload a folder with huggingface_hub. The token is read from HF_TOKEN or your login.",
        epilog="example:\n  medunlearn amnesia publish amnesia --repo my-org/amnesia-synthetic --dry-run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    publish.add_argument("folder", help="an AMNESIA folder")
    publish.add_argument("--repo", required=True, help="dataset repo id, ORG/NAME")
    publish.add_argument("--private", action="store_true", help="create the repo as private")
    publish.add_argument("--dry-run", action="store_true", help="list what would be uploaded, upload nothing")
    return parser


def run(args: argparse.Namespace) -> int:
    if args.action == "build":
        start = time.perf_counter()
        diseases = [d.strip() for d in args.disease_level.split(",") if d.strip()]
        folder = build_amnesia(
            args.out,
            overwrite=args.overwrite,
            source=args.source,
            patients=args.patients,
            seed=args.seed,
            notes_path=args.notes,
            qa_path=args.qa,
            disease_level=diseases,
            qa_per_type=args.qa_per_type,
        )
        print_split_table(Path(folder))
        print(f"wrote {folder} in {time.perf_counter() - start:.1f} s")
        return 0
    if args.action == "audit":
        try:
            result = audit_folder(args.folder)
        except AuditFailure as failure:  # a verdict, not a usage error: exit 1
            print(f"FAIL {failure}", file=sys.stderr)
            return 1
        for invariant, detail in result.checks:
            print(f"ok  {invariant}: {detail}")
        print(f"{args.folder}: all {len(result.checks)} invariant groups hold")
        return 0
    files = publish_folder(args.folder, args.repo, private=args.private, dry_run=args.dry_run)
    verb = "would upload" if args.dry_run else "uploaded"
    for name in files:
        print(f"{verb} {name}")
    print(f"{verb} {len(files)} files to https://huggingface.co/datasets/{args.repo}")
    return 0
