"""Build the published AMNESIA fictitious-cohort dataset from its source (the generator)
and optionally push it.

    python dataset_scripts/amnesia_synthetic.py --out build/amnesia-synthetic [--repo ORG/NAME]

The paper's size (8,820 patients, 70,560 QA) with seed 0; rebuilding gives byte-identical files, so the Hub
copy can always be checked against a local build. The token for --repo comes from HF_TOKEN or your login.
"""

from __future__ import annotations

import argparse

from medunlearn.amnesia.audit import audit_folder
from medunlearn.amnesia.hub import publish_folder
from medunlearn.amnesia.pipeline import build_amnesia_folder
from medunlearn.amnesia.sources.synthetic import N_PAPER_PATIENTS


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="build/amnesia-synthetic")
    parser.add_argument("--patients", type=int, default=N_PAPER_PATIENTS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repo", help="push to this dataset repo after the audit passes")
    args = parser.parse_args()
    folder = build_amnesia_folder(args.out, overwrite=True, patients=args.patients, seed=args.seed)
    for invariant, detail in audit_folder(folder).checks:
        print(f"ok  {invariant}: {detail}")
    if args.repo:
        files = publish_folder(folder, args.repo)
        print(f"pushed {len(files)} files to {args.repo}")
    print(f"built {folder}")


if __name__ == "__main__":
    main()
