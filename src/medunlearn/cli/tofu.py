"""``medunlearn tofu``: build a fictitious TOFU-format folder, evaluate a model with the TOFU metric set.

``tofu evaluate`` is ``medunlearn evaluate --benchmark tofu`` with TOFU's defaults; both call
:func:`medunlearn.tofu.evaluate_tofu`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from medunlearn.cli.options import (
    add_batch_size_arguments,
    add_dtype_argument,
    batch_size_settings,
    evaluation_dtype,
    new_tokens,
    non_negative_float,
    seed_int,
    whole_number_from,
)
from medunlearn.errors import MissingInputError
from medunlearn.evaluation.runner import RunnerConfig
from medunlearn.tofu.conventions import PRESETS, TofuConventions, preset
from medunlearn.tofu.data import FORGET_CONFIGS
from medunlearn.tofu.synthetic import MAX_AUTHORS, MAX_PERTURBED, MAX_QA_PER_AUTHOR, MIN_AUTHORS
from medunlearn.utils.files import (
    check_not_an_input,
    check_resumable_folder,
    check_writable,
    no_empty_output_on_failure,
)

EPILOG = """examples:
  medunlearn tofu build --out /tmp/tofu --authors 20 --seed 0
  medunlearn tofu evaluate --model tiny-llama --data /tmp/tofu --forget forget10 --out /tmp/tofu-eval \\
      --preset open-unlearning --max-new-tokens 16
  medunlearn tofu compare /tmp/tofu-eval/summary.json /tmp/tofu-eval/TOFU_SUMMARY.json

--data is a local folder of the locuslab/TOFU layout or a Hub id (locuslab/TOFU). The summary JSON holds
our metric names under "metrics" and OpenUnlearning's names under "open_unlearning"; --preset open-unlearning
selects the reference's conventions (system prompt, 200 new tokens as OpenUnlearning's
configs/generation/default.yaml at d3d7cf9, EOS dropped from token-wise metrics, ...). Fine-tune and
unlearn with the same --preset: `medunlearn finetune --preset ...`, `medunlearn unlearn --preset ...`."""


def build_parser(prog: str = "medunlearn tofu") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="TOFU-compatible benchmark mode: TOFU-format data and the TOFU metric set "
        "through the runner.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = commands.add_parser("build", help="write a small fictitious TOFU-format folder")
    build.add_argument("--out", required=True, type=Path, help="folder to write")
    build.add_argument(
        "--authors",
        type=whole_number_from(MIN_AUTHORS, MAX_AUTHORS),
        default=20,
        help=f"fictitious authors in `full`, {MIN_AUTHORS}-{MAX_AUTHORS} (default 20)",
    )
    build.add_argument(
        "--qa-per-author",
        type=whole_number_from(1, MAX_QA_PER_AUTHOR),
        default=4,
        help=f"questions per author, 1-{MAX_QA_PER_AUTHOR} (default 4)",
    )
    build.add_argument(
        "--perturbed",
        type=whole_number_from(1, MAX_PERTURBED),
        default=3,
        help=f"perturbed answers per question, 1-{MAX_PERTURBED} (default 3)",
    )
    build.add_argument("--seed", type=seed_int, default=0, help="random seed (default 0)")
    build.add_argument("--overwrite", action="store_true", help="replace --out if it exists")

    evaluate = commands.add_parser("evaluate", help="score a model with the TOFU metric set")
    evaluate.add_argument("--model", required=True, help="model folder, Hub id, tiny-llama or smollm2-135m")
    evaluate.add_argument("--data", required=True, help="TOFU-format folder or Hub id (locuslab/TOFU)")
    evaluate.add_argument("--forget", default="forget10", choices=FORGET_CONFIGS, help="forget config")
    evaluate.add_argument("--out", required=True, type=Path, help="evaluation folder to write")
    evaluate.add_argument(
        "--retain-model", help="model fine-tuned without the forget set: forget quality, privleak"
    )
    evaluate.add_argument(
        "--retain-outputs",
        metavar="DIR",
        help="folder for the --retain-model's outputs (default inside --out); share it between evaluations "
        "with the same --retain-model, data and conventions so the retain model is scored once (as the "
        "reference reads its retain logs)",
    )
    evaluate.add_argument(
        "--preset",
        "--tofu-preset",
        dest="preset",
        default="medunlearn",
        choices=sorted(PRESETS),
        help="conventions preset; use the one the model was fine-tuned with (open-unlearning: 200 new "
        "tokens, as OpenUnlearning's configs/generation/default.yaml at d3d7cf9)",
    )
    evaluate.add_argument("--max-new-tokens", type=new_tokens, help="override the preset's generation length")
    evaluate.add_argument("--stop", action="append", help="stop string cutting generations (repeatable)")
    evaluate.add_argument("--system-prompt", help="override the preset's system prompt")
    add_batch_size_arguments(evaluate)
    add_dtype_argument(evaluate)
    evaluate.add_argument("--no-progress", action="store_true", help="no progress bars")
    evaluate.add_argument("--overwrite", action="store_true", help="discard outputs of another run in --out")

    compare = commands.add_parser(
        "compare", help="our summary vs a reference TOFU_SUMMARY.json, metric by metric"
    )
    compare.add_argument("ours", type=Path, help="our summary.json (or TOFU_SUMMARY.json)")
    compare.add_argument(
        "reference", type=Path, help="OpenUnlearning's TOFU_SUMMARY.json (or TOFU_EVAL.json)"
    )
    compare.add_argument(
        "--tolerance",
        type=non_negative_float,
        default=None,
        help="exit 1 if any shared metric differs by more than this",
    )
    return parser


def _read_json(path: Path) -> dict:
    from medunlearn.utils.user_files import not_a_file, read_json

    if not path.is_file():
        raise MissingInputError(f"{path} {not_a_file(path)}")
    return read_json(path, expect=dict)  # the shared reader: encoding, syntax, NaN and a list named


def _compare(args) -> int:

    from medunlearn.tofu.scoring import compare_summaries  # pandas: imported by the work, not by --help

    sources = (str(args.ours), str(args.reference))
    rows = compare_summaries(_read_json(args.ours), _read_json(args.reference), sources)

    def show(value):
        return "-" if value is None else f"{value:.6g}"

    print(f"{'metric':<26}{'ours':>14}{'reference':>14}{'|diff|':>12}")
    for row in rows:
        print(
            f"{row['metric']:<26}{show(row['ours']):>14}{show(row['reference']):>14}{show(row['abs_difference']):>12}"
        )
    differences = [row["abs_difference"] for row in rows if row["abs_difference"] is not None]
    if args.tolerance is not None and differences and max(differences) > args.tolerance:
        print(f"largest difference {max(differences):.3g} exceeds --tolerance {args.tolerance}")
        return 1
    return 0


def tofu_conventions(args) -> TofuConventions:
    """The preset of ``--preset``, with ``--max-new-tokens``, ``--stop`` and ``--system-prompt`` over it
    (shared with ``medunlearn evaluate --benchmark tofu``: one set of options)."""
    return preset(args.preset).with_options(
        max_new_tokens=args.max_new_tokens,
        stop_strings=tuple(args.stop) if args.stop else None,
        system_prompt=args.system_prompt,
    )


def print_tofu_summary(summary: dict, out: Path) -> None:
    if not summary:
        print(f"stopped before every batch was done; rerun the same command to resume ({out})")
        return
    print(json.dumps(summary["open_unlearning"], indent=2))
    print(f"summary: {out / 'summary.json'}")


def runner_config(args: argparse.Namespace) -> RunnerConfig:
    """The ``RunnerConfig`` of ``tofu evaluate``'s options (``--batch-size N|auto``, ``--max-batch-size``,
    ``--dtype``: resolved as ``evaluate --benchmark tofu`` resolves it)."""
    dtype = evaluation_dtype(args.dtype, args.preset, parity=True)
    return RunnerConfig(**batch_size_settings(args), dtype=dtype, progress=not args.no_progress)


def run(args) -> int:
    # The work (pandas, the model stack) is imported when it runs, not for --help.
    from medunlearn.tofu.evaluate import evaluate_tofu
    from medunlearn.tofu.synthetic import build_tofu_folder

    if args.action == "build":
        folder = build_tofu_folder(
            args.out,
            authors=args.authors,
            qa_per_author=args.qa_per_author,
            perturbed=args.perturbed,
            seed=args.seed,
            overwrite=args.overwrite,
        )
        print(f"wrote TOFU-format folder {folder}")
        return 0
    if args.action == "compare":
        return _compare(args)
    inputs = {"--model": args.model, "--retain-model": args.retain_model, "--data": args.data}
    check_resumable_folder(args.out, overwrite=args.overwrite, inputs=inputs)  # a run of ours, or new
    if args.retain_outputs:  # a shared output folder: never in an input either
        check_not_an_input(args.retain_outputs, inputs, "--retain-outputs")
        check_writable(args.retain_outputs, "--retain-outputs")
    with no_empty_output_on_failure(args.out):
        summary = evaluate_tofu(
            args.model,
            args.data,
            args.forget,
            args.out,
            retain_model=args.retain_model,
            retain_outputs=args.retain_outputs,
            conventions=tofu_conventions(args),
            runner_config=runner_config(args),
            overwrite=args.overwrite,
        )
    print_tofu_summary(summary, args.out)
    return 0
