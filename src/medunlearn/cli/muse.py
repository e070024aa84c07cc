"""``medunlearn muse``: build a fictitious MUSE-format folder, check a local copy of MUSE-News / MUSE-Books.

Scoring a model with the MUSE metric set goes through ``medunlearn evaluate`` (docs/muse.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from medunlearn.cli.options import positive_int, seed_int, whole_number_from
from medunlearn.muse.build import MAX_ARTICLES, MIN_ARTICLES

EPILOG = """examples:
  medunlearn muse build --out /tmp/muse --articles 8 --seed 0
  medunlearn muse check --data /tmp/muse

--data is a local folder of the muse-bench/MUSE-News (or MUSE-Books) layout, e.g. downloaded with
`huggingface-cli download muse-bench/MUSE-News --repo-type dataset --revision <sha> --local-dir DIR`. Pin a
revision whose knowmem splits are retain_qa / retain_qa_icl: older revisions name them retain2_qa and are
refused with a named error (docs/muse.md, "Data")."""


def build_parser(prog: str = "medunlearn muse") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="MUSE-format benchmark mode: MUSE-format data (the Hub layout of muse-bench/MUSE-News), "
        "a fictitious folder of ours for offline runs, and a layout check.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = commands.add_parser("build", help="write a small fictitious MUSE-format folder")
    build.add_argument("--out", required=True, type=Path, help="folder to write")
    build.add_argument(
        "--articles",
        type=whole_number_from(MIN_ARTICLES, MAX_ARTICLES),
        default=8,
        help=f"articles per set (forget, retain1, ...; default 8, {MIN_ARTICLES}-{MAX_ARTICLES})",
    )
    build.add_argument(
        "--prompt-words", type=positive_int, default=12, help="words of a verbmem prompt (default 12)"
    )
    build.add_argument(
        "--continuation-words", type=positive_int, default=24, help="words of a verbmem gt (default 24)"
    )
    build.add_argument("--seed", type=seed_int, default=0, help="random seed (default 0)")
    build.add_argument("--overwrite", action="store_true", help="replace --out if it exists")

    check = commands.add_parser("check", help="check a MUSE-format folder: layout, splits, every row")
    check.add_argument("--data", required=True, type=Path, help="local MUSE-format folder")
    return parser


def run(args) -> int:
    from medunlearn.muse.data import LAYOUT, load_muse_split, open_muse_folder

    if args.action == "build":
        from medunlearn.muse.build import build_muse_folder

        folder = build_muse_folder(
            args.out,
            articles=args.articles,
            prompt_words=args.prompt_words,
            continuation_words=args.continuation_words,
            seed=args.seed,
            overwrite=args.overwrite,
        )
        print(f"wrote MUSE-format folder {folder}")
        return 0
    muse = open_muse_folder(args.data)
    for config, splits in LAYOUT.items():
        if not muse.splits(config):
            print(f"{config:<9} (absent, optional)")
            continue
        sizes = ", ".join(f"{split} {len(load_muse_split(muse, config, split))}" for split in splits)
        print(f"{config:<9} {sizes}")
    print(f"{args.data}: MUSE layout with retain_qa / retain_qa_icl, every row checked")
    return 0
