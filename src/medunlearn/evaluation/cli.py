"""``medunlearn evaluate``: score a model on an AMNESIA forget config into an evaluation folder."""

from __future__ import annotations

import argparse
import os
import sys

EPILOG = """example (a fictitious cohort, a fine-tuned model, then its evaluation on forget_10):
  medunlearn amnesia build --out amnesia --patients 40 --seed 0
  medunlearn finetune --model tiny-llama --data amnesia --out ckpt/finetuned --notes-epochs 1 --qa-epochs 2
  medunlearn evaluate --model ckpt/finetuned --data amnesia --forget forget_10 --out evals/finetuned

after unlearning it into ckpt/grad_diff (`medunlearn unlearn --help` has the example), pass the starting
model as --before so AFE compares against it (--before-outputs lets several methods share its one run):
  medunlearn evaluate --model ckpt/grad_diff --before ckpt/finetuned --data amnesia --forget forget_10 \\
      --out evals/grad_diff --before-outputs evals/before_forget_10

The folder holds per-example outputs (parquet), summary.json and run.json. An interrupted run resumes
when rerun with the same arguments; --rescore recomputes summary.json from the stored outputs, no model needed."""


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Score a model on an AMNESIA forget config: forget (seen and holdout QA), retained same-disease and "
            "out-of-disease patients, by QA type (MU, AFE, LS, DS, ROUGE-L, Prob, MIA)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", metavar="CKPT", help="model folder (or Hub id) to evaluate")
    parser.add_argument("--data", metavar="DIR", help="AMNESIA folder (as written by `medunlearn amnesia build`)")
    parser.add_argument("--forget", metavar="CONFIG", help="forget config, e.g. forget_10 or disease_cancer_forget_5")
    parser.add_argument("--out", metavar="EVALDIR", required=True, help="evaluation folder to write (EVALDIR)")
    parser.add_argument("--before", metavar="CKPT", help="the model before unlearning: AFE compares against its answers")
    parser.add_argument("--retain-model", metavar="CKPT", help="a model never trained on the forget patients: MIA privleak")
    parser.add_argument(
        "--before-outputs",
        metavar="DIR",
        help="folder for the --before model's outputs (default EVALDIR/outputs/before); share it between "
        "evaluations with the same --before, data and settings so the before model runs once",
    )
    parser.add_argument(
        "--embedding-similarity", action="store_true",
        help="answer similarity = mean of ROUGE-L F1 and the offline MiniLM embedding cosine (default: ROUGE-L F1)",
    )
    parser.add_argument("--name", help="method name shown in reports (default: the model folder's name)")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per batch (default 16)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="generation length limit (default 64)")
    parser.add_argument(
        "--max-retain-patients", type=int, default=100,
        help="seeded sample of retained patients per population (default 100; 0 keeps all)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the retained-patient sample (default 0)")
    parser.add_argument("--overwrite", action="store_true", help="discard outputs already in --out (a --before-outputs folder only if stale)")
    parser.add_argument("--rescore", action="store_true", help="only recompute summary.json from --out's outputs")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "--benchmark", choices=("amnesia", "tofu"), default="amnesia",
        help="tofu: --data is a TOFU-format folder or Hub id, --forget forget01/05/10; TOFU metric set",
    )
    parser.add_argument(
        "--tofu-preset", default="medunlearn", choices=("medunlearn", "open-unlearning", "open-unlearning-llama3"),
        help="TOFU conventions (open-unlearning: the reference implementation's)",
    )
    return parser


class UsageError(ValueError):
    """A missing or inconsistent option."""


def run(args) -> int:
    from medunlearn.evaluation.pipeline import score_evaluation

    if args.benchmark == "tofu":
        from medunlearn.tofu.cli import evaluate_from_evaluate_args

        return evaluate_from_evaluate_args(args)
    try:
        if args.rescore:
            summary = score_evaluation(args.out)
        else:
            summary = _evaluate(args)
    except (ValueError, FileNotFoundError, OSError) as error:
        print(f"medunlearn evaluate: error: {error}", file=sys.stderr)
        return 2
    if summary:
        _print_headline(summary, args.out)
    elif int(os.environ.get("RANK", "0")) == 0:
        print(f"stopped before every batch was done; rerun the same command to resume ({args.out})")
    return 0


def _evaluate(args) -> dict:
    from pathlib import Path

    from medunlearn.evaluation.pipeline import evaluate_unlearning
    from medunlearn.evaluation.populations import PopulationConfig
    from medunlearn.evaluation.runner import RunnerConfig

    missing = [flag for flag, value in (("--model", args.model), ("--data", args.data), ("--forget", args.forget)) if not value]
    if missing:
        raise UsageError(f"{', '.join(missing)} required (or --rescore to rescore an existing --out)")
    from medunlearn.models import BUILTIN_MODELS

    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    for flag, value in (("--model", args.model), ("--before", args.before), ("--retain-model", args.retain_model)):
        if value == "tiny-llama":
            raise UsageError(f"{flag} tiny-llama is an untrained model built from data: fine-tune it first")
        # Offline, a name that is not a folder can only fail later with a long Hub error: say it plainly now.
        if value and offline and value not in BUILTIN_MODELS and not Path(value).is_dir():
            raise FileNotFoundError(f"{flag} {value}: no such model folder (HF_HUB_OFFLINE=1, so no Hub download)")
    if args.batch_size < 1 or args.max_new_tokens < 1:
        raise UsageError("--batch-size and --max-new-tokens must be at least 1")
    return evaluate_unlearning(
        args.model,
        args.data,
        args.forget,
        args.out,
        before=args.before,
        retain_model=args.retain_model,
        before_outputs=args.before_outputs,
        embedding_similarity=args.embedding_similarity,
        name=args.name,
        runner_config=RunnerConfig(
            batch_size=args.batch_size, max_new_tokens=args.max_new_tokens, progress=not args.no_progress
        ),
        population_config=PopulationConfig(max_retain_patients=args.max_retain_patients or None, seed=args.seed),
        overwrite=args.overwrite,
    )


def _print_headline(summary: dict, out: str) -> None:
    populations = summary.get("populations", {})

    def cell(population, key):
        value = populations.get(population, {}).get("all", {}).get(key)
        return "–" if value is None else f"{value:.3f}"

    print(
        f"{summary.get('name')}: AFE {cell('forget_seen', 'answer_forgetting')}"
        f" · LS {cell('forget_seen', 'leakage_score')} · DS {cell('forget_seen', 'degeneration_score')}"
        f" · MU same-disease {cell('retain_same_disease', 'model_utility')}"
        f" · MU out-of-disease {cell('retain_out_of_disease', 'model_utility')}"
    )
    print(f"wrote {out}/summary.json (`medunlearn report {out}` for the full table)")
