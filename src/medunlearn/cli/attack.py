"""``medunlearn attack``: relearning, quantization, probing and membership attacks on unlearned models.

The work is :func:`medunlearn.attacks.run_attacks` (docs/attacks.md); this module parses, calls it and prints
the table.
"""

from __future__ import annotations

import argparse

from medunlearn.attacks.quantization import QUANTIZATIONS
from medunlearn.attacks.relearning import DEFAULT_STEPS, RELEARN_DATA, AttackInputError, RelearnConfig
from medunlearn.attacks.run import ATTACK_DESCRIPTIONS, ATTACKS, AttackArguments, run_attacks, section_lines
from medunlearn.cli.options import (
    add_batch_size_arguments,
    add_retained_sample_argument,
    batch_size_int,
    batch_size_settings,
    fraction,
    new_tokens,
    positive_float,
    seed_int,
    step_count,
)
from medunlearn.evaluation.runner import RunnerConfig
from medunlearn.utils.files import check_not_an_input, check_writable
from medunlearn.utils.tables import in_sections

EPILOG = (
    """example (the models of `medunlearn demo --quick --out runs/demo-quick`):
  medunlearn attack --model runs/demo-quick/models/grad_diff-forget_10 \\
      --before runs/demo-quick/models/finetuned --data runs/demo-quick/amnesia --forget-config forget_10 \\
      --relearn-learning-rate 3e-4 --max-new-tokens 8 --out runs/demo-quick/attacks

several --model values are attacked one after the other and compared in one table and plot.

attacks (--attacks, comma-separated; default all):
"""
    + "\n".join(f"  {name:<11}{text}" for name, text in ATTACK_DESCRIPTIONS.items())
    + """

recovered share = (s after the attack − s after unlearning) / (s before − s after unlearning), s the mean
answer similarity on the forget patients' questions; empty (null) when unlearning removed less than 0.01.
Each share has a patient-bootstrap interval; the worst case over attacks a selection-aware one, and reads
"not distinguishable from no recovery" when that interval includes 0.
The folder holds attacks.json, attacks.md (the table), attacks.png (AFE against worst-case recovery) and
one evaluation folder per attack."""
)


def _steps_list(text: str) -> tuple[int, ...]:
    """``--relearn-steps 5,10,20``: step counts, each checked as a step count (:func:`step_count`)."""
    try:
        return tuple(step_count(part) for part in text.split(",") if part.strip())
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"comma-separated step counts: {error} (in {text!r})") from None


def _name_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _add_relearn_arguments(parser: argparse.ArgumentParser) -> None:
    """The relearning attack's options (``RelearnConfig`` fields, its defaults shown)."""
    parser.add_argument(
        "--relearn-steps",
        type=_steps_list,
        default=DEFAULT_STEPS,
        help=f"steps at which the relearned model is evaluated (default {','.join(map(str, DEFAULT_STEPS))})",
    )
    parser.add_argument(
        "--relearn-data",
        choices=RELEARN_DATA,
        default="forget-share",
        help="relearning data (default forget-share)",
    )
    defaults = RelearnConfig()
    parser.add_argument(
        "--relearn-share",
        type=fraction,
        default=defaults.share,
        help=f"share of the forget patients relearned (all their seen QA; default {defaults.share})",
    )
    parser.add_argument(
        "--relearn-learning-rate",
        type=positive_float,
        default=defaults.learning_rate,
        help=f"constant relearning learning rate (default {defaults.learning_rate}; a tiny demo model: 1e-3)",
    )
    parser.add_argument(
        "--relearn-batch-size",
        type=batch_size_int,
        default=defaults.batch_size,
        help="QA per relearning step",
    )


def build_parser(prog: str = "medunlearn attack") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Attack unlearned models: relearning, 8-bit / 4-bit quantization, paraphrased and "
        "holdout questions, a hidden-state probe and membership inference; report the recovered share of "
        "what unlearning removed, beside AFE and MU.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model", nargs="+", metavar="CKPT", help="unlearned model folder(s) (full weights or LoRA adapter)"
    )
    parser.add_argument("--before", metavar="CKPT", help="the model before unlearning (required)")
    parser.add_argument("--data", metavar="DIR", help="AMNESIA folder the models were unlearned on")
    parser.add_argument(
        "--forget-config",
        "--forget",
        dest="forget_config",
        metavar="CONFIG",
        help="the forget config unlearned",
    )
    parser.add_argument("--out", metavar="DIR", required=True, help="attack folder to write")
    parser.add_argument(
        "--retain-model", metavar="CKPT", help="a model never trained on the forget patients (reference MIA)"
    )
    parser.add_argument(
        "--attacks",
        type=_name_list,
        default=ATTACKS,
        help=f"comma-separated, default {','.join(ATTACKS)}",
    )
    _add_relearn_arguments(parser)
    parser.add_argument(
        "--quantize",
        type=_name_list,
        default=tuple(QUANTIZATIONS),
        help=f"quantization schemes (default {','.join(QUANTIZATIONS)})",
    )
    parser.add_argument("--name", nargs="+", help="display name per --model (default: folder names)")
    add_batch_size_arguments(parser)
    parser.add_argument(
        "--max-new-tokens",
        type=new_tokens,
        default=RunnerConfig.max_new_tokens,
        help=f"generation length limit (default {RunnerConfig.max_new_tokens})",
    )
    add_retained_sample_argument(parser)
    parser.add_argument(
        "--seed", type=seed_int, default=0, help="seeds samples, paraphrases, probe, relearning"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    parser.add_argument(
        "--write-card",
        action="store_true",
        help="also write each method's robustness section into its model's README.md (replacing an earlier "
        "one)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def arguments_from(args: argparse.Namespace) -> AttackArguments:
    """The :class:`AttackArguments` of the parsed options."""
    for flag in ("data", "forget_config"):
        if not getattr(args, flag):
            raise AttackInputError(f"--{flag.replace('_', '-')} is required")
    if args.max_new_tokens < 1:  # --batch-size: argparse checks it (batch_size_type)
        raise AttackInputError("--max-new-tokens must be at least 1")
    relearn = RelearnConfig(
        steps=args.relearn_steps,
        data=args.relearn_data,
        share=args.relearn_share,
        learning_rate=args.relearn_learning_rate,
        batch_size=args.relearn_batch_size,
        seed=args.seed,
    )
    return AttackArguments(
        models=list(args.model or []),
        before=args.before,
        data=args.data,
        forget_config=args.forget_config,
        out_dir=args.out,
        retain_model=args.retain_model,
        attacks=args.attacks,
        relearn=relearn,
        quantizations=args.quantize,
        names=args.name,
        seed=args.seed,
        max_retain_patients=args.max_retain_patients or None,
        runner=runner_config(args),
        overwrite=args.overwrite,
        write_card=args.write_card,
    )


def runner_config(args: argparse.Namespace) -> RunnerConfig:
    """The evaluations' ``RunnerConfig``: ``--batch-size``, ``--max-batch-size``, ``--max-new-tokens``."""
    return RunnerConfig(
        **batch_size_settings(args), max_new_tokens=args.max_new_tokens, progress=not args.no_progress
    )


def render_table(payload: dict):
    """A ``rich`` table of the attack rows, then the per-method summary."""
    from rich.table import Table

    from medunlearn.attacks.summary import RESULT_HEADERS, SUMMARY_HEADERS, result_cells, summary_cells

    table = Table(title=f"medunlearn attack: {payload['forget_config']}")
    table.add_column("method", no_wrap=True)
    for index, header in enumerate(RESULT_HEADERS):
        table.add_column(header, no_wrap=True, justify="left" if index < 3 else "right")
    for row in in_sections(table, payload["rows"], "method"):
        table.add_row(row["method"], *result_cells(row))
    summary = Table(title="robustness summary (worst case over attacks, selection-aware interval)")
    for index, header in enumerate(SUMMARY_HEADERS):
        numeric = 0 < index < 4 or header.endswith("(selection-aware)")
        summary.add_column(header, justify="right" if numeric else "left")
    for entry in payload["summaries"]:
        summary.add_row(*summary_cells(entry))
    return table, summary


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # piped or logged: rich would assume 80 columns and squeeze the numbers away
        console = Console(width=160)
    check_not_an_input(
        args.out, {"--model": list(args.model or []), "--before": args.before, "--data": args.data}
    )
    check_writable(args.out)  # an unwritable folder is named now, not after the attacks ran
    arguments = arguments_from(args)
    payload = run_attacks(arguments, log=lambda line: console.print(line, highlight=False))
    for table in render_table(payload):
        console.print(table)
    for line in section_lines(payload["methods"]):
        console.print(line, highlight=False)
    files = ["attacks.json", "attacks.md"] + ([payload["plot"]] if payload["plot"] else [])
    console.print(f"wrote {arguments.out_dir}/: {', '.join(files)}", highlight=False)
    for card in payload.get("cards", []):
        console.print(f"wrote the robustness section into {card}", highlight=False)
    return 0
