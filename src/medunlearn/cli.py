"""The ``medunlearn`` command.

Each subcommand lives next to the code it drives (``medunlearn/amnesia/cli.py`` for ``medunlearn amnesia``)
and exposes two functions: ``build_parser(prog) -> argparse.ArgumentParser`` and ``run(args) -> int``.
Subcommand modules are imported only when used, so ``medunlearn --help`` stays instant and a user without
the training extras can still build datasets.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

# name -> (module, one-line summary). Order is the order of the data flow.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "amnesia": ("medunlearn.amnesia.cli", "build, audit and publish AMNESIA dataset folders"),
    "biodivergence": ("medunlearn.biodivergence.cli", "build, audit and evaluate BioDivergence claim-pair splits"),
    "finetune": ("medunlearn.unlearn.finetune_cli", "notes pretraining then QA SFT: the model to unlearn from"),
    "unlearn": ("medunlearn.unlearn.cli", "run an unlearning method on a model"),
    "evaluate": ("medunlearn.evaluation.cli", "score a model on an AMNESIA forget config"),
    "report": ("medunlearn.evaluation.report_cli", "table, JSON and plots from evaluation folders"),
    "tofu": ("medunlearn.tofu.cli", "TOFU-format data and the TOFU metric set (OpenUnlearning-compatible)"),
    "publish": ("medunlearn.unlearn.publish_cli", "push an unlearned model and its card to the Hub"),
    "demo": ("medunlearn.demo", "the whole pipeline on the embedded default, on a laptop CPU"),
}


def _available_subcommands() -> dict[str, tuple[str, str]]:
    """Subcommands whose module is installed (extras may be missing)."""
    found = {}
    for name, (module, summary) in SUBCOMMANDS.items():
        if importlib.util.find_spec(module) is not None:
            found[name] = (module, summary)
    return found


def build_parser() -> argparse.ArgumentParser:
    commands = _available_subcommands()
    epilog = "commands:\n" + "\n".join(f"  {name:<15}{summary}" for name, (_, summary) in commands.items())
    epilog += "\n\nRun `medunlearn COMMAND --help` for the options and an example."
    parser = argparse.ArgumentParser(
        prog="medunlearn",
        description="Medical machine unlearning (AMNESIA) and biomedical contradiction analysis (BioDivergence).",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=sorted(commands), metavar="COMMAND", help="one of the commands below")
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    from medunlearn import __version__

    parser.add_argument("--version", action="version", version=f"medunlearn {__version__}")
    return parser


def subcommand_parser(name: str) -> argparse.ArgumentParser:
    """The full parser of one subcommand (also used to generate the CLI reference)."""
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return module.build_parser(f"medunlearn {name}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = build_parser()
    if not argv:
        top.print_help()
        return 0
    ns = top.parse_args(argv[:1] if not argv[0].startswith("-") else argv)
    module = importlib.import_module(SUBCOMMANDS[ns.command][0])
    parser = module.build_parser(f"medunlearn {ns.command}")
    args = parser.parse_args(argv[1:])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
