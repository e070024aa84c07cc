"""``medunlearn tofu``: build a fictitious TOFU-format folder, evaluate a model with the TOFU metric set."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EPILOG = """examples:
  medunlearn tofu build --out /tmp/tofu --authors 20 --seed 0
  medunlearn tofu evaluate --model tiny-llama --data /tmp/tofu --forget forget10 --out /tmp/tofu-eval \\
      --preset open-unlearning --max-new-tokens 16
  medunlearn tofu compare /tmp/tofu-eval/summary.json /tmp/tofu-eval/TOFU_SUMMARY.json

--data is a local folder of the locuslab/TOFU layout or a Hub id (locuslab/TOFU). The summary JSON holds
our metric names under "metrics" and OpenUnlearning's names under "open_unlearning"; --preset open-unlearning
selects the reference's conventions (system prompt, 64 new tokens, EOS dropped from token-wise metrics, ...)."""


def build_parser(prog: str = "medunlearn tofu") -> argparse.ArgumentParser:
    from medunlearn.tofu.conventions import PRESETS
    from medunlearn.tofu.data import FORGET_CONFIGS

    parser = argparse.ArgumentParser(
        prog=prog,
        description="TOFU-compatible benchmark mode: TOFU-format data and the TOFU metric set through the runner.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = commands.add_parser("build", help="write a small fictitious TOFU-format folder")
    build.add_argument("--out", required=True, type=Path, help="folder to write")
    build.add_argument("--authors", type=int, default=20, help="fictitious authors in `full` (default 20)")
    build.add_argument("--qa-per-author", type=int, default=4, help="questions per author, 1-5 (default 4)")
    build.add_argument("--perturbed", type=int, default=3, help="perturbed answers per question, 1-5 (default 3)")
    build.add_argument("--seed", type=int, default=0, help="random seed (default 0)")

    evaluate = commands.add_parser("evaluate", help="score a model with the TOFU metric set")
    evaluate.add_argument("--model", required=True, help="model folder, Hub id, tiny-llama or smollm2-135m")
    evaluate.add_argument("--data", required=True, help="TOFU-format folder or Hub id (locuslab/TOFU)")
    evaluate.add_argument("--forget", default="forget10", choices=FORGET_CONFIGS, help="forget config")
    evaluate.add_argument("--out", required=True, type=Path, help="evaluation folder to write")
    evaluate.add_argument("--retain-model", help="model fine-tuned without the forget set: forget quality, privleak")
    evaluate.add_argument("--preset", default="medunlearn", choices=sorted(PRESETS), help="conventions preset")
    evaluate.add_argument("--max-new-tokens", type=int, help="override the preset's generation length")
    evaluate.add_argument("--stop", action="append", help="stop string cutting generations (repeatable)")
    evaluate.add_argument("--system-prompt", help="override the preset's system prompt")
    evaluate.add_argument("--batch-size", type=int, default=16, help="sequences per forward pass (default 16)")
    evaluate.add_argument("--overwrite", action="store_true", help="discard outputs of another run in --out")

    compare = commands.add_parser("compare", help="our summary vs a reference TOFU_SUMMARY.json, metric by metric")
    compare.add_argument("ours", type=Path, help="our summary.json (or TOFU_SUMMARY.json)")
    compare.add_argument("reference", type=Path, help="OpenUnlearning's TOFU_SUMMARY.json (or TOFU_EVAL.json)")
    compare.add_argument("--tolerance", type=float, default=None,
                         help="exit 1 if any shared metric differs by more than this")
    return parser


def _read_json(path: Path) -> dict:
    from medunlearn.tofu.data import TofuInputError

    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise TofuInputError(f"{path}: not JSON ({error})") from error


def _compare(args) -> int:
    from medunlearn.tofu.scoring import compare_summaries

    rows = compare_summaries(_read_json(args.ours), _read_json(args.reference))

    def show(value):
        return "-" if value is None else f"{value:.6g}"

    print(f"{'metric':<26}{'ours':>14}{'reference':>14}{'|diff|':>12}")
    for row in rows:
        print(f"{row['metric']:<26}{show(row['ours']):>14}{show(row['reference']):>14}{show(row['abs_difference']):>12}")
    differences = [row["abs_difference"] for row in rows if row["abs_difference"] is not None]
    if args.tolerance is not None and differences and max(differences) > args.tolerance:
        print(f"largest difference {max(differences):.3g} exceeds --tolerance {args.tolerance}")
        return 1
    return 0


def _load_model(name: str, texts: list[str]):
    if name == "tiny-llama":  # a fresh tiny model on a tokenizer of the benchmark's text: smoke runs only
        from medunlearn.models import build_tiny_llama_for_texts

        return build_tiny_llama_for_texts(texts)
    if os.environ.get("HF_HUB_OFFLINE") == "1" and name != "smollm2-135m" and not Path(name).is_dir():
        # Offline, a name that is not a folder can only fail later with a long Hub error: say it plainly now.
        raise FileNotFoundError(f"model {name}: no such model folder (HF_HUB_OFFLINE=1, so no Hub download)")
    from medunlearn.models import load_model_and_tokenizer

    return load_model_and_tokenizer(name)


def run(args) -> int:
    from medunlearn.evaluation.runner import StaleOutputsError
    from medunlearn.tofu.data import TofuInputError

    try:
        if args.action == "build":
            from medunlearn.tofu.synthetic import build_tofu_folder

            folder = build_tofu_folder(args.out, authors=args.authors, qa_per_author=args.qa_per_author,
                                       perturbed=args.perturbed, seed=args.seed)
            print(f"wrote TOFU-format folder {folder}")
            return 0
        if args.action == "compare":
            return _compare(args)
        return _evaluate(args)
    except (TofuInputError, StaleOutputsError, FileNotFoundError, ValueError, OSError) as error:
        print(f"medunlearn tofu: error: {error}", file=sys.stderr)
        return 2


def _evaluate(args) -> int:
    from medunlearn.evaluation.runner import RunnerConfig
    from medunlearn.tofu.conventions import preset
    from medunlearn.tofu.evaluate import evaluate_tofu, tofu_examples

    conventions = preset(args.preset).with_options(
        max_new_tokens=args.max_new_tokens,
        stop_strings=tuple(args.stop) if args.stop else None,
        system_prompt=args.system_prompt,
    )
    examples = tofu_examples(args.data, args.forget)  # validates the data before any model loads
    texts = examples["question"].tolist() + examples["answer"].tolist()
    model, tokenizer = _load_model(args.model, texts)
    retain = _load_model(args.retain_model, texts) if args.retain_model else None
    summary = evaluate_tofu(model, args.data, args.forget, args.out, tokenizer=tokenizer, retain_model=retain,
                            conventions=conventions, runner_config=RunnerConfig(batch_size=args.batch_size),
                            overwrite=args.overwrite)
    if not summary:
        print(f"stopped before every batch was done; rerun the same command to resume ({args.out})")
        return 0
    print(json.dumps(summary["open_unlearning"], indent=2))
    print(f"summary: {args.out / 'summary.json'}")
    return 0


EVALUATE_DEFAULT_MAX_NEW_TOKENS = 64  # `medunlearn evaluate --max-new-tokens` default: then the preset decides


def evaluate_from_evaluate_args(args) -> int:
    """``medunlearn evaluate --benchmark tofu [--tofu-preset NAME]``: the TOFU evaluation with that command's flags.

    Reads ``model, data, forget, out, retain_model, batch_size, max_new_tokens, overwrite, rescore`` and
    ``tofu_preset`` from ``args``; ``--max-new-tokens`` left at its default keeps the preset's value.
    """
    from medunlearn.evaluation.runner import StaleOutputsError
    from medunlearn.tofu.data import TofuInputError
    from medunlearn.tofu.evaluate import score_tofu

    try:
        if getattr(args, "rescore", False):
            summary = score_tofu(args.out)
            print(json.dumps(summary["open_unlearning"], indent=2))
            return 0
        missing = [flag for flag, value in (("--model", args.model), ("--data", args.data)) if not value]
        if missing:
            raise TofuInputError(f"{', '.join(missing)} required")
        max_new_tokens = args.max_new_tokens
        namespace = argparse.Namespace(
            model=args.model, data=args.data, forget=args.forget or "forget10", out=Path(args.out),
            retain_model=args.retain_model, preset=getattr(args, "tofu_preset", None) or "medunlearn",
            max_new_tokens=None if max_new_tokens == EVALUATE_DEFAULT_MAX_NEW_TOKENS else max_new_tokens,
            stop=None, system_prompt=None, batch_size=args.batch_size, overwrite=getattr(args, "overwrite", False),
        )
        return _evaluate(namespace)
    except (TofuInputError, StaleOutputsError, FileNotFoundError, ValueError, OSError) as error:
        print(f"medunlearn evaluate: error: {error}", file=sys.stderr)
        return 2


__all__ = ["build_parser", "evaluate_from_evaluate_args", "run"]
