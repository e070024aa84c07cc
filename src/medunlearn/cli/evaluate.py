"""``medunlearn evaluate``: score a model on an AMNESIA (or TOFU) forget config, or a MUSE-format folder,
into an evaluation folder.

The work is :func:`medunlearn.evaluation.evaluate_unlearning` (AMNESIA),
:func:`medunlearn.tofu.evaluate_tofu` or :func:`medunlearn.muse.evaluate.evaluate_muse`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from medunlearn.chat import PRESETS
from medunlearn.cli.options import (
    BENCHMARKS,
    add_batch_size_arguments,
    add_dtype_argument,
    add_engine_arguments,
    add_retained_sample_argument,
    batch_size_settings,
    engine_settings,
    evaluation_dtype,
    missing_options,
    new_tokens,
    positive_int,
    seed_int,
)
from medunlearn.errors import InputError
from medunlearn.evaluation.runner import RunnerConfig
from medunlearn.utils.files import (
    check_not_an_input,
    check_resumable_folder,
    check_writable,
    no_empty_output_on_failure,
)

# The evaluation itself (pandas, the metric stack) is imported by run(): `medunlearn evaluate --help` and the
# parser need only RunnerConfig's defaults.

EPILOG = """example (a fictitious cohort, a fine-tuned model, then its evaluation on forget_10):
  medunlearn amnesia build --out amnesia --patients 40 --seed 0
  medunlearn finetune --model tiny-llama --data amnesia --out ckpt/finetuned --notes-epochs 1 --qa-epochs 2
  medunlearn evaluate --model ckpt/finetuned --data amnesia --forget forget_10 --out evals/finetuned

after unlearning it into ckpt/grad_diff (`medunlearn unlearn --help` has the example), pass the starting
model as --before so AFE compares against it (--before-outputs lets several methods share its one run):
  medunlearn evaluate --model ckpt/grad_diff --before ckpt/finetuned --data amnesia --forget forget_10 \\
      --out evals/grad_diff --before-outputs evals/before_forget_10

TOFU mode (--benchmark tofu): --data is a TOFU-format folder, \
--forget forget01/05/10, and --preset chooses the
conventions (system prompt, stop strings, generation length) \
unless --system-prompt, --stop or --max-new-tokens
are given:
  medunlearn tofu build --out tofu --authors 10
  medunlearn evaluate --benchmark tofu --preset open-unlearning --model ckpt/finetuned --data tofu \\
      --forget forget10 --out evals/tofu --max-new-tokens 4

MUSE mode (--benchmark muse): --data is a MUSE-format folder (docs/muse.md); --preset medunlearn or
open-unlearning (the reference's conventions); --retain-model CKPT normalises PrivLeak; --max-new-tokens
shortens both generation lengths (knowmem 32, verbmem 128) for smoke runs:
  medunlearn muse build --out muse-tiny --articles 5 --seed 0
  medunlearn evaluate --benchmark muse --preset open-unlearning --model ckpt/finetuned --data muse-tiny \\
      --out evals/muse --max-new-tokens 4

--notes-memorization also scores the patients' notes, MUSE-style: the first 32 words of each note → the
model's greedy continuation, ROUGE-L F1 against the next 64 words (and extraction strength), for the forget,
retained same-disease and out-of-disease patients, and a Min-K% membership AUC of the forget notes against
the folder's holdout_notes; --write-card puts AFE, MU and these into the --model's README.md:
  medunlearn evaluate --model ckpt/grad_diff --before ckpt/finetuned --data amnesia --forget forget_10 \\
      --out evals/grad_diff --notes-memorization --write-card

--engine vllm sends the greedy generations to a vLLM server (the same prompt token ids; started from
.venv-vllm for the model, or --vllm-url for a running one); a LoRA adapter folder is served as base + adapter:
  medunlearn evaluate --model ckpt/grad_diff --data amnesia --forget forget_10 --out evals/grad_diff \\
      --engine vllm

The folder holds per-example outputs (parquet), summary.json and run.json. An interrupted run resumes
when rerun with the same arguments; \
--rescore recomputes summary.json from the stored outputs, no model needed."""


def _add_shared_outputs_options(parser: argparse.ArgumentParser) -> None:
    """Where the --before and --retain-model outputs go: folders several evaluations can share."""
    parser.add_argument(
        "--before-outputs",
        metavar="DIR",
        help="folder for the --before model's outputs (default EVALDIR/outputs/before); share it between "
        "evaluations with the same --before, data and settings so the before model runs once",
    )
    parser.add_argument(
        "--retain-outputs",
        metavar="DIR",
        help="folder for the --retain-model's outputs (default inside EVALDIR); share it between evaluations "
        "with the same --retain-model, data and settings so the retain model is scored once",
    )


def build_parser(prog: str = "medunlearn evaluate") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Score a model on an AMNESIA forget config: forget (seen and holdout QA), retained same-disease "
            "and out-of-disease patients, by QA type (MU, AFE, LS, DS, ROUGE-L, Prob, MIA); or, with "
            "--benchmark tofu, on a TOFU forget config with the TOFU metric set; or, with --benchmark muse, "
            "on a MUSE-format folder with the MUSE metric set."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", metavar="CKPT", help="model folder (or Hub id) to evaluate")
    parser.add_argument(
        "--data", metavar="DIR", help="AMNESIA folder (as written by `medunlearn amnesia build`)"
    )
    parser.add_argument(
        "--forget", metavar="CONFIG", help="forget config, e.g. forget_10 or disease_cancer_forget_5"
    )
    parser.add_argument(
        "--out", metavar="EVALDIR", required=True, help="evaluation folder to write (EVALDIR)"
    )
    parser.add_argument(
        "--before", metavar="CKPT", help="the model before unlearning: AFE compares against its answers"
    )
    parser.add_argument(
        "--retain-model", metavar="CKPT", help="a model never trained on the forget patients: MIA privleak"
    )
    _add_shared_outputs_options(parser)
    parser.add_argument(
        "--embedding-similarity",
        action="store_true",
        help="answer similarity = mean of ROUGE-L F1 and the offline MiniLM embedding cosine "
        "(default: ROUGE-L F1)",
    )
    parser.add_argument("--name", help="method name shown in reports (default: the model folder's name)")
    add_batch_size_arguments(parser, max_batch_size=False)  # --max-batch-size: with the GPU options below
    parser.add_argument(
        "--max-new-tokens",
        type=new_tokens,
        default=None,
        help=f"generation length limit (default {RunnerConfig.max_new_tokens}; TOFU: the preset's)",
    )
    add_retained_sample_argument(parser)
    parser.add_argument(
        "--seed", type=seed_int, default=0, help="seed of the retained-patient sample (default 0)"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="discard outputs already in --out (a --before-outputs / --retain-outputs folder only if stale)",
    )
    parser.add_argument(
        "--rescore", action="store_true", help="only recompute summary.json from --out's outputs"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "--benchmark",
        choices=BENCHMARKS,
        default="amnesia",
        help="tofu: --data is a TOFU-format folder or Hub id, --forget forget01/05/10; TOFU metric set. "
        "muse: --data is a MUSE-format folder; MUSE metric set (docs/muse.md)",
    )
    add_dtype_argument(parser)
    _add_notes_options(parser)
    _add_tofu_options(parser)
    add_engine_arguments(parser)
    return parser


def _add_notes_options(parser: argparse.ArgumentParser) -> None:
    """Notes memorization of an AMNESIA evaluation (:mod:`medunlearn.evaluation.notes_memorization`)."""
    from medunlearn.evaluation.notes_settings import NotesMemorizationConfig

    defaults = NotesMemorizationConfig()
    notes = parser.add_argument_group("AMNESIA notes memorization (off by default: it costs generations)")
    notes.add_argument(
        "--notes-memorization",
        action="store_true",
        help="also score verbatim memorization of the patients' notes (first P words -> greedy continuation, "
        "ROUGE-L F1 against the next C words, extraction strength) for forget, retained same-disease and "
        "out-of-disease patients, before vs after, with patient-cluster intervals, and the Min-K%% AUC of "
        "the forget notes against the folder's holdout_notes (privleak with --retain-model). Off by default: "
        "it adds one greedy generation of up to 2*C tokens per scored note and a teacher-forced pass per "
        "forget and held-out note, for each model",
    )
    notes.add_argument(
        "--notes-prefix-words",
        type=positive_int,
        default=defaults.prefix_words,
        metavar="P",
        help=f"words of a note given as the prompt (default {defaults.prefix_words})",
    )
    notes.add_argument(
        "--notes-continuation-words",
        type=positive_int,
        default=defaults.continuation_words,
        metavar="C",
        help="words after the prompt scored against the continuation "
        f"(default {defaults.continuation_words})",
    )
    notes.add_argument(
        "--notes-max-new-tokens",
        type=new_tokens,
        default=None,
        metavar="T",
        help="tokens of the greedy continuation (default 2*C)",
    )
    notes.add_argument(
        "--write-card",
        action="store_true",
        help="after the evaluation, put AFE, MU (and the notes memorization) into --model's README.md, "
        "replacing the section an earlier run wrote",
    )


def _add_tofu_options(parser: argparse.ArgumentParser) -> None:
    """The TOFU conventions of ``--benchmark tofu`` (the same options as ``medunlearn tofu evaluate``)."""
    tofu = parser.add_argument_group("TOFU conventions (--benchmark tofu)")
    tofu.add_argument(
        "--preset",
        "--tofu-preset",
        dest="preset",
        default="medunlearn",
        choices=sorted(PRESETS),
        help="conventions preset; use the one the model was fine-tuned with (open-unlearning: the reference "
        "implementation's, system prompt and 200 new tokens as OpenUnlearning's configs/generation/"
        "default.yaml at d3d7cf9)",
    )
    tofu.add_argument("--system-prompt", help="override the preset's system prompt")
    tofu.add_argument("--stop", action="append", help="stop string cutting generations (repeatable)")


def run(args) -> int:
    from medunlearn.evaluation.pipeline import score_evaluation

    # --rescore reads --out's run (run.json, named if missing); else --out is a folder of ours or new
    overwrite = args.overwrite or args.rescore
    check_resumable_folder(args.out, overwrite=overwrite, inputs=_evaluation_inputs(args))
    _check_amnesia_options(args)
    for flag in ("--before-outputs", "--retain-outputs"):  # shared output folders: never in an input either
        if getattr(args, flag[2:].replace("-", "_"), None):
            check_not_an_input(getattr(args, flag[2:].replace("-", "_")), _evaluation_inputs(args), flag)
            check_writable(getattr(args, flag[2:].replace("-", "_")), flag)
    _check_shared_outputs(args)
    if args.benchmark == "tofu":
        with no_empty_output_on_failure(args.out):
            return _run_tofu(args)
    if args.benchmark == "muse":
        with no_empty_output_on_failure(args.out):
            return _run_muse(args)
    if args.rescore:
        summary = score_evaluation(args.out)
    else:
        with no_empty_output_on_failure(args.out):
            summary = _evaluate_amnesia(args)
    if summary:
        _print_headline(summary, args.out)
        if args.write_card:
            _write_card(args, summary)
    elif summary is not None:
        print(f"stopped before every batch was done; rerun the same command to resume ({args.out})")
    return 0


def _check_shared_outputs(args) -> None:
    """--before-outputs and --retain-outputs hold two models' outputs: one folder for both would mix them
    (with --overwrite, the retain model's would replace the before model's, which AFE then reads)."""
    before, retain = getattr(args, "before_outputs", None), getattr(args, "retain_outputs", None)
    if before and retain and Path(before).expanduser().resolve() == Path(retain).expanduser().resolve():
        raise InputError(
            f"--retain-outputs {retain} is --before-outputs {before}: the before model's and the retain "
            "model's outputs need a folder each"
        )


def _evaluation_inputs(args) -> dict:
    """What an evaluation reads: its --out (resumable: it may exist) is never one of them or inside one."""
    inputs = {"--model": args.model, "--before": args.before, "--retain-model": args.retain_model}
    return inputs | {"--data": args.data}


def _runner_config(args, **values) -> RunnerConfig:
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise InputError("--max-new-tokens must be at least 1")
    if args.max_new_tokens is not None:
        values["max_new_tokens"] = args.max_new_tokens
    values.update(engine_settings(args))
    values.update(batch_size_settings(args))
    values["dtype"] = evaluation_dtype(args.dtype, args.preset, parity=args.benchmark in ("tofu", "muse"))
    return RunnerConfig(progress=not args.no_progress, **values)


def _evaluate_amnesia(args) -> dict | None:
    """The summary; ``{}`` when batches are left, ``None`` on a launched process that does not write it."""
    from medunlearn.evaluation.pipeline import evaluate_unlearning
    from medunlearn.evaluation.populations import PopulationConfig
    from medunlearn.utils.distributed import launched_processes

    missing = missing_options(args, "--model", "--data", "--forget")
    if missing:
        raise InputError(f"{', '.join(missing)} required (or --rescore to rescore an existing --out)")
    summary = evaluate_unlearning(
        args.model,
        args.data,
        args.forget,
        args.out,
        before=args.before,
        retain_model=args.retain_model,
        before_outputs=args.before_outputs,
        retain_outputs=args.retain_outputs,
        embedding_similarity=args.embedding_similarity,
        name=args.name,
        runner_config=_runner_config(args),
        population_config=PopulationConfig(
            max_retain_patients=args.max_retain_patients or None, seed=args.seed
        ),
        overwrite=args.overwrite,
        notes_memorization=_notes_config(args),
    )
    return summary if summary or launched_processes().is_main else None


def _notes_config(args):
    """``--notes-memorization``'s settings, or ``None`` without it."""
    from medunlearn.evaluation.notes_settings import NotesMemorizationConfig

    if not args.notes_memorization:
        return None
    return NotesMemorizationConfig(
        prefix_words=args.notes_prefix_words,
        continuation_words=args.notes_continuation_words,
        max_new_tokens=args.notes_max_new_tokens,
    )


def _check_amnesia_options(args) -> None:
    """Before any work: the notes options belong to AMNESIA, and ``--write-card`` needs a --model folder it
    may write."""
    if args.benchmark != "amnesia":
        given = [
            flag
            for flag in ("--notes-memorization", "--write-card")
            if getattr(args, flag[2:].replace("-", "_"))
        ]
        if given:
            raise InputError(f"{', '.join(given)}: AMNESIA options, not of --benchmark {args.benchmark}")
    if not args.write_card:
        return
    if args.rescore:
        raise InputError("--write-card: give the evaluation's --model (not --rescore) to write its card")
    if not (args.model and Path(args.model).is_dir() and os.access(args.model, os.W_OK)):
        raise InputError(
            f"--write-card: {args.model} is not a writable model folder (its README.md is the card)"
        )


def _write_card(args, summary: dict) -> None:
    """The evaluation section of --model's card
    (:func:`medunlearn.evaluation.notes_report.notes_card_section`), replacing an earlier one; written last,
    so a failed run leaves the card as it was."""
    from medunlearn.evaluation.notes_report import notes_card_section
    from medunlearn.unlearn.card import replace_card_section

    path = replace_card_section(args.model, "evaluation", notes_card_section(summary))
    print(f"wrote the evaluation section of {path}")


def _rescored(args, rescore) -> bool:
    """Under ``--rescore``, the summary recomputed from ``--out``'s stored outputs (no model) and printed;
    otherwise the check that a run has its ``--model`` and ``--data``. Returns whether it rescored."""
    from medunlearn.cli.tofu import print_tofu_summary

    if args.rescore:
        print_tofu_summary(rescore(args.out), Path(args.out))
        return True
    missing = missing_options(args, "--model", "--data")
    if missing:
        raise InputError(f"{', '.join(missing)} required")
    return False


def _run_tofu(args) -> int:
    from medunlearn.cli.tofu import print_tofu_summary, tofu_conventions
    from medunlearn.tofu.evaluate import evaluate_tofu, score_tofu

    if _rescored(args, score_tofu):
        return 0
    summary = evaluate_tofu(
        args.model,
        args.data,
        args.forget or "forget10",
        Path(args.out),
        retain_model=args.retain_model,
        retain_outputs=args.retain_outputs,
        conventions=tofu_conventions(args),
        runner_config=_runner_config(args),
        overwrite=args.overwrite,
    )
    print_tofu_summary(summary, Path(args.out))
    return 0


def _run_muse(args) -> int:
    from medunlearn.cli.tofu import print_tofu_summary
    from medunlearn.muse.conventions import muse_preset
    from medunlearn.muse.evaluate import evaluate_muse, score_muse_folder

    if _rescored(args, score_muse_folder):
        return 0
    # Options of the other modes: refused rather than silently ignored.
    unused = [
        flag
        for flag in ("--forget", "--before", "--stop", "--system-prompt")
        if not missing_options(args, flag)
    ]
    if unused:
        raise InputError(f"{', '.join(unused)}: not an option of --benchmark muse (docs/muse.md)")
    lengths = {"knowmem_max_new_tokens": args.max_new_tokens, "verbmem_max_new_tokens": args.max_new_tokens}
    summary = evaluate_muse(
        args.model,
        args.data,
        Path(args.out),
        retain_model=args.retain_model,
        retain_outputs=args.retain_outputs,
        conventions=muse_preset(args.preset, **lengths),
        runner_config=_runner_config(args),
        overwrite=args.overwrite,
    )
    print_tofu_summary(summary, Path(args.out))
    return 0


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
    if summary.get("notes_memorization"):
        from medunlearn.evaluation.notes_report import notes_headline

        print(notes_headline(summary["notes_memorization"]))
    print(f"wrote {out}/summary.json (`medunlearn report {out}` for the full table)")
