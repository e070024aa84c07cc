"""Options several commands share, defined once."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from medunlearn.errors import InputError
from medunlearn.models import ModelArguments

# ---------------------------------------------------------------------------------------------------------
# Numbers: every numeric option is checked when it is parsed (docs/cli.md, "Numeric options"). Each check is
# an argparse ``type=`` function (argparse names the option and exits 2), and the same function checks the
# fields of a trainer config however they were set (command line or recipe): :func:`check_config_numbers`.


def _number(value, kind: type) -> int | float:
    """``value`` (a command-line string or an already-parsed number) as ``kind``; a finite number only."""
    if isinstance(value, bool):
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}")
    try:
        number = kind(value.strip()) if isinstance(value, str) else value
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}") from None
    if kind is int and isinstance(number, float) and number.is_integer():
        number = int(number)
    if kind is int and not isinstance(number, int) or not math.isfinite(number):
        raise argparse.ArgumentTypeError(
            f"expected a finite {'whole ' if kind is int else ''}number, got {value!r}"
        )
    return number


def number_type(kind: type, description: str, accepts: Callable[[float], bool]) -> Callable:
    """An argparse ``type=`` function: the value as ``kind`` when ``accepts`` it, else an error saying it
    must be ``description``."""

    def parse(value):
        number = _number(value, kind)
        if not accepts(number):
            raise argparse.ArgumentTypeError(f"must be {description}, got {value!r}")
        return number

    parse.__name__ = description  # argparse names the type in some of its own messages
    return parse


positive_int = number_type(int, "a whole number of at least 1", lambda n: n >= 1)
non_negative_int = number_type(int, "a whole number of at least 0", lambda n: n >= 0)
positive_float = number_type(float, "a number above 0", lambda n: n > 0)
non_negative_float = number_type(float, "a number of at least 0", lambda n: n >= 0)
probability = number_type(float, "a number from 0 to 1", lambda n: 0 <= n <= 1)
# Trainer: -1 means "no step limit, the epochs decide"; 0 or below is not a step count.
steps_limit = number_type(
    int, "-1 (no limit: the epochs decide) or a whole number of at least 1", lambda n: n == -1 or n >= 1
)

# The numeric fields of TrainingArguments, SFTConfig and the method configs that have an impossible range,
# with their check; a field a config lacks is skipped, ``None`` (unset) passes.
CONFIG_NUMBERS: dict[str, Callable] = {
    "max_steps": steps_limit,
    "num_train_epochs": non_negative_float,
    "learning_rate": positive_float,
    "weight_decay": non_negative_float,
    "per_device_train_batch_size": positive_int,
    "per_device_eval_batch_size": positive_int,
    "gradient_accumulation_steps": positive_int,
    "logging_steps": positive_float,
    "save_steps": positive_float,
    "eval_steps": positive_float,
    "save_total_limit": positive_int,
    "warmup_ratio": probability,
    "warmup_steps": non_negative_float,
    "max_grad_norm": non_negative_float,
    "adam_beta1": probability,
    "adam_beta2": probability,
    "adam_epsilon": positive_float,
    "seed": non_negative_int,
    "data_seed": non_negative_int,
    "dataloader_num_workers": non_negative_int,
    "max_length": positive_int,
    "forget_weight": non_negative_float,
    "retain_weight": non_negative_float,
    "beta": positive_float,
    "eval_probe_steps": positive_int,
    "probe_patients": positive_int,
    "probe_max_new_tokens": positive_int,
    "max_retain_mu_drop": non_negative_float,
}


def check_config_numbers(config, where: str = "the command line") -> None:
    """Check every field of ``config`` that :data:`CONFIG_NUMBERS` names; an impossible value is an
    :class:`~medunlearn.errors.InputError` naming the option and ``where`` it may come from.

    >>> from types import SimpleNamespace
    >>> check_config_numbers(SimpleNamespace(max_steps=-5, learning_rate=1e-5))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    medunlearn.errors.InputError: --max_steps must be -1 (...) or a whole number ..., got -5 (from ...)
    """
    for name, check in CONFIG_NUMBERS.items():
        value = getattr(config, name, None)
        if value is None:
            continue
        try:
            check(value)
        except argparse.ArgumentTypeError as error:
            raise InputError(f"--{name} {error} (from {where})") from None


class OverridableParser(argparse.ArgumentParser):
    """Keeps unknown ``--field value`` pairs in ``args.overrides`` for a trainer config's own parser
    (TRL's)."""

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        namespace.overrides = extras
        return namespace


def add_model_arguments(parser: argparse.ArgumentParser, model_help: str) -> None:
    """``--model`` and the adaptation flags of :class:`~medunlearn.models.ModelArguments`."""
    defaults = ModelArguments("")
    parser.add_argument("--model", help=model_help)
    parser.add_argument("--lora", action="store_true", help="train a LoRA adapter instead of all weights")
    parser.add_argument(
        "--lora-r", type=positive_int, default=defaults.lora_r, help=f"LoRA rank (default {defaults.lora_r})"
    )
    parser.add_argument(
        "--lora-alpha",
        type=positive_int,
        default=defaults.lora_alpha,
        help=f"LoRA alpha (default {defaults.lora_alpha})",
    )
    parser.add_argument(
        "--load-in-4bit",
        action="store_true",
        help="QLoRA: load the model in 4-bit NF4 and train a LoRA adapter (bitsandbytes: the qlora extra)",
    )


def model_arguments(args: argparse.Namespace) -> ModelArguments:
    return ModelArguments(
        args.model,
        lora=args.lora,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
        load_in_4bit=args.load_in_4bit,
        tiny_vocab_size=getattr(args, "tiny_vocab_size", ModelArguments("").tiny_vocab_size),
    )


DTYPE_HELP = (
    "the precision: auto (the default: bf16 on a GPU that supports it, and on a CPU only where its flags say "
    "native bf16 and a short probe measures it at least 1.5x as fast as float32; float32 under the "
    "open-unlearning preset on CPU), float32 or bfloat16 (docs/scaling.md, Precision)"
)


def add_dtype_argument(
    parser: argparse.ArgumentParser, training: bool = False, default: str | None = "auto"
) -> None:
    """``--dtype auto|float32|bfloat16`` (:mod:`medunlearn.utils.precision`); ``default=None`` leaves the
    choice to the trainer config's own default."""
    from medunlearn.utils.precision import DTYPE_CHOICES

    how = (
        "; training keeps float32 weights and runs bf16 under autocast (TrainingArguments bf16: mixed "
        "precision)"
        if training
        else "; the model is evaluated in it"
    )
    parser.add_argument("--dtype", choices=DTYPE_CHOICES, default=default, help=DTYPE_HELP + how)


def reference_preset_name(conventions) -> str | None:
    """The name of ``conventions`` when they are a parity preset (``open-unlearning``): its CPU runs stay
    float32 under ``--dtype auto``."""
    from medunlearn.unlearn.reference_recipe import is_reference_preset

    return conventions.name if is_reference_preset(conventions) else None


def announce_precision(precision, config=None) -> None:
    """Print the resolved ``--dtype`` once, on stderr (not under ``--quiet``); with a trainer's ``config``,
    what it trains in (its ``bf16`` / ``fp16``)."""
    import sys

    from medunlearn.cli.verbosity import QUIET, output_level
    from medunlearn.utils.precision import describe_training

    if output_level() == QUIET:
        return
    line = precision.describe() if config is None else describe_training(config.bf16, config.fp16, precision)
    print(line, file=sys.stderr)


def missing_options(args: argparse.Namespace, *flags: str) -> list[str]:
    """The ``--flags`` among ``flags`` that were not given."""
    return [flag for flag in flags if not getattr(args, flag.lstrip("-").replace("-", "_"))]


PRESET_HELP = (
    "conventions preset, one per run for finetune, unlearn and evaluate alike: system prompt, chat template "
    "or tags, EOS handling, stop strings, generation length (open-unlearning: the reference's, system prompt "
    "'You are a helpful assistant.', 200 new tokens as OpenUnlearning's configs/generation/default.yaml at "
    "d3d7cf9, loss averaging of each method as the reference)"
)


def add_conventions_arguments(parser: argparse.ArgumentParser, default: str | None = "medunlearn") -> None:
    """``--preset`` and ``--system-prompt``: the run's :class:`~medunlearn.chat.Conventions`."""
    from medunlearn.chat import PRESETS

    where = f"default {default}" if default else "default: the model's recorded conventions, else medunlearn"
    parser.add_argument("--preset", default=default, choices=sorted(PRESETS), help=f"{PRESET_HELP} ({where})")
    parser.add_argument("--system-prompt", help="override the preset's system prompt")


def conventions_from_args(args: argparse.Namespace, model=None):
    """The preset of ``--preset`` (unset: ``model``'s recorded conventions, else ``medunlearn``) with
    ``--system-prompt`` over it."""
    from medunlearn.chat import preset, read_model_conventions

    if args.preset is not None:
        conventions = preset(args.preset)
    else:
        conventions = read_model_conventions(model) or preset("medunlearn")
    return conventions.with_options(system_prompt=args.system_prompt)


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--engine hf|vllm`` and where the vLLM server is: the runner's generation engine
    (:mod:`medunlearn.evaluation.engines`)."""
    group = parser.add_argument_group("generation engine (docs/evaluation.md, Generation engines)")
    group.add_argument(
        "--engine",
        choices=("hf", "vllm"),
        default=None,
        help="the greedy generation pass: hf (transformers' generate, the default) or vllm (a vLLM server: "
        "started for the model unless --vllm-url is given); the teacher-forced pass always runs on "
        "transformers",
    )
    group.add_argument(
        "--vllm-url",
        metavar="URL",
        help="a running vLLM server (http://HOST:PORT/v1) that serves each evaluated checkpoint (a model "
        "whose root is its folder; otherwise exit 2)",
    )
    group.add_argument(
        "--vllm-model",
        metavar="NAME",
        help="the model name to request at --vllm-url (default: the one whose root is the checkpoint)",
    )
    group.add_argument(
        "--vllm-python",
        metavar="PYTHON",
        help="the Python that runs a started vLLM server (default $MEDUNLEARN_VLLM_PYTHON, else "
        ".venv-vllm/bin/python)",
    )
    group.add_argument(
        "--vllm-arg",
        dest="vllm_args",
        action="append",
        default=None,
        metavar="ARG",
        help="one more argument of a started vLLM server (repeatable, e.g. --vllm-arg=--max-num-seqs=64)",
    )
    gpu = parser.add_argument_group("transformers engine on GPU (docs/evaluation.md, Decoding on GPU)")
    gpu.add_argument(
        "--decoding",
        choices=("dynamic", "static", "compiled", "auto"),
        default=None,
        help="the hf engine's KV cache: dynamic (the default), static (preallocated), compiled (static + "
        "torch.compile, mode reduce-overhead; CUDA only) or auto (compiled when the model is on CUDA, else "
        "dynamic); greedy tokens equal the dynamic cache's",
    )
    _add_max_batch_size(gpu)


def batch_size_type(value: str) -> int | str:
    """``--batch-size``: a positive number or ``auto`` (the largest that fits; see ``RunnerConfig``)."""
    if value == "auto":
        return value
    try:
        size = int(value)
    except ValueError:
        size = 0
    if size < 1:
        raise argparse.ArgumentTypeError(f"must be a positive number or 'auto', got {value!r}")
    return size


def _add_max_batch_size(container) -> None:
    container.add_argument(
        "--max-batch-size",
        type=positive_int,
        default=None,
        metavar="N",
        help="where --batch-size auto starts its out-of-memory search on CUDA (default 256)",
    )


def add_batch_size_arguments(
    parser: argparse.ArgumentParser, default: int = 16, *, max_batch_size: bool = True
) -> None:
    """``--batch-size N|auto`` and ``--max-batch-size N``: the runner's batch size (``RunnerConfig``), the
    same options for every evaluating command; :func:`batch_size_settings` reads them back.

    ``max_batch_size=False`` leaves ``--max-batch-size`` to :func:`add_engine_arguments`, which adds it with
    the GPU options (``medunlearn evaluate``, ``medunlearn study``).
    """
    parser.add_argument(
        "--batch-size",
        type=batch_size_type,
        default=default,
        help=f"sequences per batch (default {default}), or auto: the largest that fits the GPU, from "
        "--max-batch-size down by halving on out-of-memory (16 without CUDA); recorded in the manifest",
    )
    if max_batch_size:
        _add_max_batch_size(parser)


def _max_batch_size(args: argparse.Namespace) -> dict:
    from medunlearn.errors import InputError

    size = getattr(args, "max_batch_size", None)
    if size is not None and size < 1:
        raise InputError("--max-batch-size must be at least 1")
    return {} if size is None else {"max_batch_size": size}


def batch_size_settings(args: argparse.Namespace) -> dict:
    """The ``RunnerConfig`` fields of :func:`add_batch_size_arguments`' options: ``batch_size`` (a number or
    ``"auto"``), and ``max_batch_size`` when ``--max-batch-size`` was given (else the config's default)."""
    return {"batch_size": args.batch_size, **_max_batch_size(args)}


def engine_settings(args: argparse.Namespace) -> dict:
    """The ``RunnerConfig`` fields the engine options set (only those given, so a study file's stay)."""
    from medunlearn.errors import InputError

    given = {
        "engine": args.engine,
        "vllm_url": args.vllm_url,
        "vllm_model": args.vllm_model,
        "vllm_python": args.vllm_python,
        "vllm_args": tuple(args.vllm_args) if args.vllm_args else None,
    }
    given = {name: value for name, value in given.items() if value is not None}
    if given and given.get("engine", "vllm") != "vllm" and len(given) > 1:
        raise InputError("--vllm-url, --vllm-model, --vllm-python and --vllm-arg need --engine vllm")
    if "engine" not in given and given:
        given["engine"] = "vllm"  # a vLLM option given alone means the vLLM engine
    decoding = getattr(args, "decoding", None)
    return given | ({} if decoding is None else {"decoding": decoding}) | _max_batch_size(args)
