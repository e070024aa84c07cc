"""``medunlearn unlearn``: run an unlearning method on a model with an AMNESIA (TOFU, MUSE) forget set.

Options of the method's config (learning rate, β, layer, …) come from a recipe YAML (``--config``) and/or the
command line (``--learning_rate 1e-5``), as with TRL's ``TrlParser``: command line over recipe over paper
default. The work is :func:`medunlearn.unlearn.run_unlearning`.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from medunlearn.cli.options import (
    BENCHMARKS,
    OverridableParser,
    add_conventions_arguments,
    add_dtype_argument,
    add_model_arguments,
    add_training_overwrite_argument,
    announce_precision,
    conventions_from_args,
    missing_options,
    model_arguments,
    reference_preset_name,
)
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.methods import METHODS, resolve_method
from medunlearn.unlearn.run import UnlearningDataArguments, build_method_config, read_recipe, run_unlearning
from medunlearn.unlearn.sources import FORGET_ON, MUSE_DEFAULTS
from medunlearn.utils.files import check_not_an_input

EPILOG = """example (a tiny end-to-end run on CPU):
  medunlearn amnesia build --out /tmp/amnesia --patients 40 --seed 0
  medunlearn finetune --model tiny-llama --data /tmp/amnesia --out /tmp/ft --notes-epochs 1 --qa-epochs 1
  medunlearn unlearn --method GradDiff --model /tmp/ft --data /tmp/amnesia --forget forget_10 --out /tmp/gd \\
      --config recipes/grad_diff.yaml --max_steps 5

  medunlearn unlearn --list                     # the methods, one line each
  medunlearn unlearn --method npo --help-method # every option of the method's config

Any field of the method's config can be given as --field value (recipe values are overridden).
Retain config: derived from the forget config (forget_10 -> retain_90) unless --retain is given.
AMNESIA notes: --forget-on notes unlearns the forget patients' notes (raw text; retain: the other patients'
notes), --forget-on both their notes and QA (docs/methods/index.md, "What is forgotten"):
  medunlearn unlearn --method GradDiff --model /tmp/ft --data /tmp/amnesia --forget forget_10 \\
      --out /tmp/gd-notes --forget-on notes --max_steps 2
MUSE: --benchmark muse reads a MUSE-format folder (docs/muse.md); forget raw/forget (or scal/forget_k,
sust/forget_k), retain raw/retain1 (or raw/retain2), trained as raw text:
  medunlearn muse build --out /tmp/muse --articles 8 --seed 0
  medunlearn unlearn --benchmark muse --method GradDiff --model /tmp/ft --data /tmp/muse \\
      --out /tmp/m-gd --forget sust/forget_2 --max_steps 2
--preset (default: the conventions recorded beside the model's weights, conventions.json) renders the
examples as fine-tuning and evaluation do, and selects the loss averaging (open-unlearning: the reference's
per method); --loss_averaging token (one token mean over the batch) or sequence (the default) overrides it:
  medunlearn unlearn --method GradDiff --model /tmp/ft --data /tmp/amnesia --forget forget_10 \
      --out /tmp/gd-token --loss_averaging token --max_steps 2
Evaluation during unlearning: --eval-probe-steps N scores a small probe (forget AFE, retain MU) every N steps,
logs it, and keeps in OUT/best/ the step with the highest probe AFE whose retain-MU drop from step 0 is at
most --max-retain-mu-drop (default 0.05); the model card names the rule and the step:
  medunlearn unlearn --method GradDiff --model /tmp/ft --data /tmp/amnesia --forget forget_10 \\
      --out /tmp/gd-probe --eval-probe-steps 2 --max-retain-mu-drop 0.05 --max_steps 6"""


def build_parser(prog: str = "medunlearn unlearn") -> argparse.ArgumentParser:
    parser = OverridableParser(
        prog=prog,
        description="Run an unlearning method (GradDiff, KL-Min, NPO, SimNPO, RMU, …) on a model and save "
        "the unlearned model (safetensors, or the LoRA adapter) with a model card.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--list", action="store_true", help="list the methods and exit")
    parser.add_argument("--method", help="method stem or paper spelling (grad_diff, GradDiff, KL-Min, …)")
    parser.add_argument("--config", type=Path, help="recipe YAML (recipes/<method>.yaml); may set `method:`")
    add_model_arguments(parser, "checkpoint folder, Hub id, or smollm2-135m")
    parser.add_argument("--data", help="AMNESIA folder (or Hub id) readable by datasets.load_dataset")
    parser.add_argument(
        "--forget", help="forget config, e.g. forget_10 or disease_cancer_forget_5 (MUSE: default raw/forget)"
    )
    parser.add_argument("--retain", help="retain config (default: derived from --forget; MUSE: raw/retain1)")
    parser.add_argument("--out", type=Path, help="output folder for the unlearned model")
    add_training_overwrite_argument(parser)
    parser.add_argument(
        "--help-method", action="store_true", help="print the method config's options and exit"
    )
    parser.add_argument(
        "--benchmark",
        choices=BENCHMARKS,
        default="amnesia",
        help="tofu: --data is a TOFU-format folder or Hub id (--forget forget10 -> retain90); muse: a "
        "MUSE-format folder, unlearned as raw text (--forget raw/forget | scal/forget_k | sust/forget_k)",
    )
    parser.add_argument(
        "--forget-on",
        choices=FORGET_ON,
        default="qa",
        help="AMNESIA: unlearn the forget patients' seen QA (default), their notes, or both",
    )
    add_conventions_arguments(parser, default=None)
    add_dtype_argument(parser, training=True, default=None)
    return parser


def list_methods() -> str:
    # find_spec only: listing must not import torch and every method module.
    lines = []
    for stem, spec in METHODS.items():
        status = "" if importlib.util.find_spec(spec.module) is not None else "  (not installed)"
        lines.append(f"  {stem:<12} {spec.summary} [aliases: {', '.join(spec.aliases)}]{status}")
    return "unlearning methods (--method accepts the name or an alias, any case):\n" + "\n".join(lines)


def _precision_said(config, asked: str | None, conventions):
    """The resolved ``dtype`` of ``config`` with its reason: the parity preset's pin when it chose it."""
    parity = reference_preset_name(conventions)
    if asked is None and parity and config.dtype == "float32" and config.use_cpu:
        from medunlearn.utils.precision import resolve_precision

        return resolve_precision("auto", "cpu", parity)
    return config.precision()


def run(args) -> int:
    if args.list:
        print(list_methods())
        return 0
    if args.help_method:
        if not args.method:
            raise UnlearningInputError("--help-method needs --method")
        from trl import TrlParser

        TrlParser(dataclass_types=[resolve_method(args.method).load()[0]]).print_help()
        return 0
    recipe = read_recipe(args.config) if args.config else {}
    method_name = args.method or recipe.get("method")
    recipe.pop("method", None)
    if not method_name:
        raise UnlearningInputError("--method is required (or `method:` in the recipe); see --list")
    config_class, _ = resolve_method(method_name).load()
    if args.benchmark == "muse":
        args.forget = args.forget or MUSE_DEFAULTS["forget"]
    missing = missing_options(args, "--model", "--data", "--forget", "--out")
    if missing:
        raise UnlearningInputError(f"missing {', '.join(missing)}")
    check_not_an_input(args.out, {"--config": args.config})  # --out holding the recipe would delete it
    if args.benchmark == "muse":
        from medunlearn.muse.data import open_muse_folder

        open_muse_folder(args.data)  # a missing split or an older layout is named before any work
    conventions = conventions_from_args(args, args.model)
    dtype = ["--dtype", args.dtype] if args.dtype else []  # unset: the config's default (the preset's)
    config = build_method_config(
        config_class,
        recipe,
        [*dtype, *args.overrides],
        str(args.out),
        args.config,
        conventions=conventions,
        benchmark=args.benchmark,
        forget_on=args.forget_on,
    )
    announce_precision(_precision_said(config, args.dtype, conventions), config)
    data_args = UnlearningDataArguments(
        args.data, args.forget, args.retain, args.benchmark, conventions=conventions, forget_on=args.forget_on
    )
    out = run_unlearning(config, model_arguments(args), data_args, overwrite=args.overwrite)
    if out is not None:  # under accelerate launch, only the process that wrote the folder says so
        print(f"unlearned model written to {out}")
    return 0
