"""Options several commands share, defined once."""

from __future__ import annotations

import argparse

from medunlearn.models import ModelArguments

# Numbers: every numeric option is checked when it is parsed (docs/cli.md, "Numeric options"). The checks live
# in medunlearn.utils.numbers, below the layers that check a config's or a study file's numbers with them too;
# they are re-exported here, where the commands import them.
from medunlearn.utils.numbers import CONFIG_NUMBERS as CONFIG_NUMBERS
from medunlearn.utils.numbers import MAX_BATCH_SIZE, MAX_LORA_RANK
from medunlearn.utils.numbers import batch_size_int as batch_size_int
from medunlearn.utils.numbers import check_config_numbers as check_config_numbers
from medunlearn.utils.numbers import concurrency_count as concurrency_count
from medunlearn.utils.numbers import epoch_count as epoch_count
from medunlearn.utils.numbers import epochs as epochs
from medunlearn.utils.numbers import fraction as fraction
from medunlearn.utils.numbers import lora_alpha as lora_alpha
from medunlearn.utils.numbers import lora_rank as lora_rank
from medunlearn.utils.numbers import new_tokens as new_tokens
from medunlearn.utils.numbers import non_negative_float as non_negative_float
from medunlearn.utils.numbers import non_negative_int as non_negative_int
from medunlearn.utils.numbers import number_type as number_type
from medunlearn.utils.numbers import pair_count as pair_count
from medunlearn.utils.numbers import patient_count as patient_count
from medunlearn.utils.numbers import positive_float as positive_float
from medunlearn.utils.numbers import positive_int as positive_int
from medunlearn.utils.numbers import probability as probability
from medunlearn.utils.numbers import qa_per_type_count as qa_per_type_count
from medunlearn.utils.numbers import resample_count as resample_count
from medunlearn.utils.numbers import seed_int as seed_int
from medunlearn.utils.numbers import sequence_tokens as sequence_tokens
from medunlearn.utils.numbers import step_count as step_count
from medunlearn.utils.numbers import steps_limit as steps_limit
from medunlearn.utils.numbers import vocab_size as vocab_size
from medunlearn.utils.numbers import whole_number_from as whole_number_from

# The benchmarks `evaluate` and `unlearn` read (`unlearn.run.Benchmark` types the same three names).
BENCHMARKS = ("amnesia", "tofu", "muse")


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
        "--lora-r",
        type=lora_rank,
        default=defaults.lora_r,
        help=f"LoRA rank (default {defaults.lora_r}; at most {MAX_LORA_RANK:,})",
    )
    parser.add_argument(
        "--lora-alpha",
        type=lora_alpha,
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


def add_training_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    """``--overwrite`` of the commands that train a model into ``--out`` (finetune, unlearn); the rule is
    :func:`medunlearn.unlearn.run.check_training_output`'s."""
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace --out if it exists and is not empty (never when it is, holds or lies inside --model or "
        "--data)",
    )


def add_retained_sample_argument(parser: argparse.ArgumentParser) -> None:
    """``--max-retain-patients`` of the commands that build the AMNESIA populations (evaluate, attack): the
    seeded sample of ``PopulationConfig.max_retain_patients``, 0 for all (``None`` there)."""
    parser.add_argument(
        "--max-retain-patients",
        type=non_negative_int,
        default=100,
        help="seeded sample of retained patients per population (default 100; 0 keeps all)",
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


def evaluation_dtype(dtype: str, preset_name: str, parity: bool) -> str:
    """``--dtype`` resolved for the device an evaluation runs on, said once. Under a parity preset of a
    reference benchmark (``parity``: TOFU or MUSE, with ``--preset open-unlearning``) ``auto`` stays float32
    on CPU, as the reference runs."""
    from medunlearn.chat import preset
    from medunlearn.utils.precision import default_device, resolve_precision

    pinned = reference_preset_name(preset(preset_name)) if parity else None
    precision = resolve_precision(dtype, default_device(), pinned)
    announce_precision(precision)
    return precision.dtype


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


def server_url(value: str) -> str:
    """An argparse ``type=`` for a server's base URL (``--vllm-url``): checked as an LLM spec's URL is
    (:func:`medunlearn.llm.spec.server_url_problem`); the error names no password."""
    from medunlearn.llm.spec import server_url_problem

    problem = server_url_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def llm_spec(value: str) -> str:
    """An argparse ``type=`` for an LLM's ``BACKEND:MODEL`` spec (``--generate``, ``--judge``,
    ``--labeller``): parsed, its URL checked, when the command line is
    (:func:`medunlearn.llm.spec.parse_spec`); kept as text."""
    from medunlearn.llm.spec import BackendSpecError, parse_spec

    try:
        parse_spec(value)
    except BackendSpecError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


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
        type=server_url,
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
    if size > MAX_BATCH_SIZE:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_BATCH_SIZE:,} or 'auto', got {value!r}")
    return size


def _add_max_batch_size(container) -> None:
    container.add_argument(
        "--max-batch-size",
        type=batch_size_int,
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
