"""The ``medunlearn`` command: one module per subcommand, each only parsing, calling the Python API and
printing.

Each subcommand module (``medunlearn/cli/amnesia.py`` for ``medunlearn amnesia``) exposes
``build_parser(prog) -> argparse.ArgumentParser`` and ``run(args) -> int``. Subcommand modules are imported
only when used, so ``medunlearn --help`` stays instant and a user without the training extras can still build
datasets. Every error a user can cause is a :class:`~medunlearn.errors.MedunlearnError`; :func:`main` catches
it here, once, and prints ``medunlearn <command>: error: <message>`` with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from medunlearn import __version__
from medunlearn.cli.verbosity import QUIET, VERBOSE, output_at, output_level
from medunlearn.errors import MedunlearnError
from medunlearn.utils.secrets import redacted_output

# name -> (module, one-line summary). Order is the order of the data flow.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "amnesia": ("medunlearn.cli.amnesia", "build, audit and publish AMNESIA dataset folders"),
    "biodivergence": (
        "medunlearn.cli.biodivergence",
        "build, audit and evaluate BioDivergence claim-pair splits",
    ),
    "finetune": ("medunlearn.cli.finetune", "notes pretraining then QA SFT: the model to unlearn from"),
    "unlearn": ("medunlearn.cli.unlearn", "run an unlearning method on a model"),
    "evaluate": ("medunlearn.cli.evaluate", "score a model on an AMNESIA (or TOFU) forget config"),
    "attack": ("medunlearn.cli.attack", "relearning, quantization, probing and membership attacks"),
    "report": ("medunlearn.cli.report", "table, JSON and plots from evaluation folders"),
    "metrics": ("medunlearn.cli.metrics", 'install the evaluate modules: evaluate.load("disease_leakage")'),
    "tofu": ("medunlearn.cli.tofu", "TOFU-format data and the TOFU metric set (OpenUnlearning-compatible)"),
    "muse": ("medunlearn.cli.muse", "MUSE-format data: build a fictitious folder, check a local MUSE copy"),
    "publish": ("medunlearn.cli.publish", "push an unlearned model and its card to the Hub"),
    "study": ("medunlearn.cli.study", "a grid of unlearning runs from a study file, resumable, in parallel"),
    "demo": ("medunlearn.cli.demo", "the whole pipeline on the embedded default, on a laptop CPU"),
    "env": ("medunlearn.cli.env", "versions, devices and settings to paste into a bug report"),
}


def _available_subcommands() -> dict[str, tuple[str, str]]:
    """Subcommands whose module is installed (extras may be missing)."""
    return {
        name: entry for name, entry in SUBCOMMANDS.items() if importlib.util.find_spec(entry[0]) is not None
    }


def build_parser() -> argparse.ArgumentParser:
    commands = _available_subcommands()
    epilog = "commands:\n" + "\n".join(f"  {name:<15}{summary}" for name, (_, summary) in commands.items())
    epilog += "\n\nRun `medunlearn COMMAND --help` for the options and an example."
    parser = argparse.ArgumentParser(
        prog="medunlearn",
        description="Medical machine unlearning (AMNESIA) and biomedical contradiction analysis "
        "(BioDivergence).",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "command", choices=sorted(commands), metavar="COMMAND", help="one of the commands below"
    )
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument("--version", action="version", version=f"medunlearn {__version__}")
    level = parser.add_mutually_exclusive_group()
    level.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also the libraries' own output: their progress bars (datasets maps, model loads, downloads) "
        "and info logs",
    )
    level.add_argument(
        "-q", "--quiet", action="store_true", help="only the result and errors: no progress bar, no warning"
    )
    return parser


# The exit status of a command stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports it.
INTERRUPTED = 130
GLOBAL_FLAGS = frozenset({"-v", "--verbose", "-q", "--quiet"})


def split_global_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """``medunlearn [--quiet|--verbose] COMMAND ARGS``: the global flags before the command, and the rest."""
    count = 0
    while count < len(argv) and argv[count] in GLOBAL_FLAGS:
        count += 1
    return argv[:count], argv[count:]


def subcommand_parser(name: str) -> argparse.ArgumentParser:
    """The full parser of one subcommand (also used to generate the CLI reference)."""
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return module.build_parser(f"medunlearn {name}")


def main(argv: list[str] | None = None) -> int:
    flags, argv = split_global_flags(list(sys.argv[1:] if argv is None else argv))
    top = build_parser()
    if not argv:
        top.print_help()
        return 0
    ns = top.parse_args(flags + (argv[:1] if not argv[0].startswith("-") else argv))
    # Without a flag, the level a parent command gave (accelerate launch, study workers) or DEFAULT.
    level = VERBOSE if ns.verbose else QUIET if ns.quiet else output_level()
    # Before the subcommand's module imports any library: the libraries read their settings at import.
    # Everything the command prints goes through the secrets' redaction (medunlearn.utils.secrets).
    with output_at(level), redacted_output():
        try:
            module = importlib.import_module(SUBCOMMANDS[ns.command][0])
            parser = module.build_parser(f"medunlearn {ns.command}")
            args = parser.parse_args(argv[1:])
            return int(module.run(args) or 0)
        except MedunlearnError as error:
            print(f"medunlearn {ns.command}: error: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            # Ctrl-C: the staged writers have removed their staging folders on the way up (utils/files.py),
            # so what --out held before is as it was; 130 is the shells' status for SIGINT.
            print(f"medunlearn {ns.command}: interrupted", file=sys.stderr)
            return INTERRUPTED
