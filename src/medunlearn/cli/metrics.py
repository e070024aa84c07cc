"""``medunlearn metrics install [--list]``: medunlearn's ``evaluate`` modules in evaluate's module cache, so
that ``evaluate.load("disease_leakage")`` works by its bare name, offline (``register_evaluate_modules``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from medunlearn.metric_modules.evaluate_cache import installed_evaluate_modules, register_evaluate_modules

EXAMPLES = """examples:
  medunlearn metrics install          # every module of this medunlearn version
  medunlearn metrics install --list   # what is installed, and where

then, in Python, offline and from any folder:
  import evaluate
  leakage = evaluate.load("disease_leakage")

The modules go to $HF_MODULES_CACHE/evaluate_modules/metrics/evaluate-metric--<name>/<sha256>/<name>.py
(evaluate's module cache; HF_MODULES_CACHE defaults to $HF_HOME/modules). Run the install again after
upgrading medunlearn: each version has its own folder, and evaluate loads the latest installed."""


def build_parser(prog: str = "medunlearn metrics") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Install medunlearn's evaluate modules into evaluate's module cache, so that "
        'evaluate.load("disease_leakage") works by its bare name, offline.',
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    install = sub.add_parser(
        "install",
        help="write every module of this version into evaluate's module cache (idempotent)",
        description="Write every evaluate module of this medunlearn version into evaluate's module cache, "
        "keyed by the SHA-256 of its file; a module already there is left as it is.",
        epilog="example:\n  medunlearn metrics install",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    install.add_argument(
        "--list", action="store_true", help="show what is installed and exit (writes nothing)"
    )
    install.add_argument(
        "--modules-cache",
        type=Path,
        metavar="DIR",
        help="evaluate's module cache (default: evaluate's HF_MODULES_CACHE, $HF_HOME/modules)",
    )
    return parser


def run(args) -> int:
    if args.list:
        modules = installed_evaluate_modules(args.modules_cache)
        width = max(len(module.name) for module in modules)
        for module in modules:
            where = f"  {module.path}" if module.status != "not installed" else ""
            print(f"{module.name:<{width}}  {module.status:<13}  {module.sha256[:12]}{where}")
        missing = sum(module.status != "installed" for module in modules)
        if missing:
            print(f"{missing} of {len(modules)} not at this version: run `medunlearn metrics install`")
        return 0
    modules = register_evaluate_modules(modules_cache=args.modules_cache)
    for module in modules:
        print(f"{module.name:<24}  {module.status:<9}  {module.path}")
    written = sum(module.status == "written" for module in modules)
    names = [module.name for module in modules]
    example = "disease_leakage" if "disease_leakage" in names else names[0]
    print(
        f"{written} written, {len(modules) - written} already installed; "
        f'evaluate.load("{example}") now works by name'
    )
    return 0
