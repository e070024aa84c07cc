"""Numbers a user gives, checked where they are read: finite, of the right kind, in range (docs/cli.md,
"Numeric options").

Each check is a function of one value (a command-line string or an already-parsed number) that returns the
number or raises :class:`argparse.ArgumentTypeError`: argparse uses it as an option's ``type=`` (it names the
option and exits 2), and the same function checks a config's fields however they were set (command line,
recipe, study file): :func:`check_config_numbers`, :func:`checked_numbers`.

>>> positive_int("3"), probability(0.5)
(3, 0.5)
>>> positive_float("inf")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: expected a finite number, got 'inf'
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from typing import Any

from medunlearn.errors import InputError, shown


def finite_number(value: Any) -> int | float | None:
    """``value`` when it is a finite int or float (a bool is not a number here), else ``None``: what a results
    table's cell holds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _number(value, kind: type) -> int | float:
    """``value`` (a command-line string or an already-parsed number) as ``kind``; a finite number only."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise argparse.ArgumentTypeError(f"expected a number, got {shown(value)}")
    try:
        number = kind(value.strip()) if isinstance(value, str) else value
    except ValueError:  # also a whole number of more than 4300 digits (Python's int() limit)
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {shown(value)}") from None
    if kind is int and isinstance(number, float) and number.is_integer():
        number = int(number)
    # A Python int is always finite: math.isfinite() would convert it to a float, which overflows past 1e308.
    if kind is int and not isinstance(number, int) or isinstance(number, float) and not math.isfinite(number):
        raise argparse.ArgumentTypeError(
            f"expected a finite {'whole ' if kind is int else ''}number, got {shown(value)}"
        )
    return kind(number)


def number_type(
    kind: type, description: str, accepts: Callable[[float], bool], at_most: int | None = None
) -> Callable:
    """An argparse ``type=`` function: the value as ``kind`` when ``accepts`` it, else an error saying it
    must be ``description``; past ``at_most``, an error saying so."""

    def parse(value):
        number = _number(value, kind)
        if not accepts(number):
            raise argparse.ArgumentTypeError(f"must be {description}, got {shown(value)}")
        if at_most is not None and number > at_most:
            raise argparse.ArgumentTypeError(f"must be at most {at_most:,}, got {shown(value)}")
        return number

    parse.__name__ = description  # argparse names the type in some of its own messages
    return parse


def whole_number_from(low: int, high: int) -> Callable:
    """An argparse ``type=`` function: a whole number from ``low`` to ``high``, both included.

    >>> whole_number_from(1, 5)("99999999999999999999")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a whole number from 1 to 5, got '99999999999999999999'
    """
    return number_type(int, f"a whole number from {low:,} to {high:,}", lambda n: low <= n <= high)


# Every count without a bound of its own below (notes sampled, characters shown, pairs scored, neighbours,
# words of a prompt, epochs of patience, patients kept): a billion is past every corpus here (PubMed holds
# about 37 million abstracts, PMC-Patients 167,034 notes) and past what one process holds at a byte each.
# 2**63 - 1, the old bound (the largest integer numpy and torch hold), passed such a count on to an
# allocation or a loop that ran out of memory or never ended.
MAX_COUNT = 1_000_000_000
positive_int = number_type(int, "a whole number of at least 1", lambda n: n >= 1, MAX_COUNT)
non_negative_int = number_type(int, "a whole number of at least 0", lambda n: n >= 0, MAX_COUNT)
positive_float = number_type(float, "a number above 0", lambda n: n > 0)
non_negative_float = number_type(float, "a number of at least 0", lambda n: n >= 0)
probability = number_type(float, "a number from 0 to 1", lambda n: 0 <= n <= 1)
fraction = number_type(float, "a number between 0 and 1, both excluded", lambda n: 0 < n < 1)
# A seed is at most 2**32 - 1: numpy's legacy seeding (np.random.seed, which transformers' set_seed and the
# MinHash / ANN index of the BioDivergence mining call) refuses more with a bare ValueError.
MAX_SEED = 2**32 - 1
seed_int = whole_number_from(0, MAX_SEED)
# Cohort sizes: the generator holds the whole cohort in memory (about 11 KB a patient, 1 ms a patient measured
# on one CPU core), so 100,000 patients (over 11x the paper's 8,820) take about 1 GB and two minutes; a size
# past that is a typo far more often than a study, and 10**20 overflowed numpy's int64 (docs/cli.md).
MAX_PATIENTS = 100_000
patient_count = whole_number_from(1, MAX_PATIENTS)
# Counts that size a run's memory or time have a bound past which a value is a typo far more often than a
# study (docs/cli.md, "Numeric options"); each bound is far above any setting in the papers we reproduce.


def count_up_to(high: int, low: int = 1) -> Callable:
    """An argparse ``type=`` function: a whole number of at least ``low`` and at most ``high``.

    >>> count_up_to(10)("11")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be at most 10, got '11'
    """
    return number_type(int, f"a whole number of at least {low}", lambda n: n >= low, high)


# Trainer: -1 means "no step limit, the epochs decide"; 0 or below is not a step count; 10 million steps (the
# unlearning recipes take tens to hundreds) is months of a GPU, and 10**20 ran without end.
MAX_STEPS = 10_000_000
steps_limit = number_type(
    int,
    "-1 (no limit: the epochs decide) or a whole number of at least 1",
    lambda n: n == -1 or n >= 1,
    MAX_STEPS,
)
step_count = count_up_to(MAX_STEPS)
# Epochs (fractions allowed): the recipes take at most tens.
MAX_EPOCHS = 10_000
epochs = number_type(float, "a number of at least 0", lambda n: n >= 0, MAX_EPOCHS)
epoch_count = count_up_to(MAX_EPOCHS)
# Sequences per batch (and gradient accumulation steps): a batch of 65,536 sequences fills no GPU's memory
# for a language model; 10**20 overflowed the data loader (islice past sys.maxsize).
MAX_BATCH_SIZE = 65_536
batch_size_int = count_up_to(MAX_BATCH_SIZE)
# Tokens: a generation of at most 32,768 new tokens (the references generate 128 to 200; a longer one runs for
# hours on a small model), and a sequence of at most 2**20 tokens (the longest context of open models).
MAX_NEW_TOKENS = 32_768
new_tokens = count_up_to(MAX_NEW_TOKENS)
MAX_SEQUENCE_TOKENS = 2**20
sequence_tokens = count_up_to(MAX_SEQUENCE_TOKENS)
# LoRA: a rank past the largest hidden size of open models (16,384) adapts nothing more; torch overflowed on
# 10**20. Its alpha is a scale, conventionally one to four times the rank.
MAX_LORA_RANK = 16_384
lora_rank = count_up_to(MAX_LORA_RANK)
lora_alpha = count_up_to(4 * MAX_LORA_RANK)
# Bootstrap resamples: each interval holds a resamples x clusters matrix (16 bytes a cell), so 10,000 (five
# times the default, the usual count for a percentile interval) over 8,000 patients is 1.3 GB; 10**8 ran out
# of memory.
MAX_RESAMPLES = 10_000
resample_count = count_up_to(MAX_RESAMPLES)
# BioDivergence's synthetic pool: 200,000 pairs (four times the paper's 50,000-pair cap) take about 1 GB and
# ten seconds; 120,000,000 asked numpy for 7 GB at once, 10**20 overflowed it.
MAX_PAIRS = 200_000
pair_count = count_up_to(MAX_PAIRS)
# A tokenizer's vocabulary: the largest of open models hold about 256,000 tokens; 1,000,000 leaves room and
# costs the tiny model's embedding tens of megabytes, where 10**12 asked the Rust tokenizer trainer for 72 TB
# at once and aborted the process (no Python error to name). The least is the byte-level alphabet (256) and
# the tiny tokenizer's 5 special tokens (models.SPECIAL_TOKENS): the trainer silently raised less to 261.
MIN_VOCAB_SIZE = 261
MAX_VOCAB_SIZE = 1_000_000
vocab_size = count_up_to(MAX_VOCAB_SIZE, low=MIN_VOCAB_SIZE)
# Work at once (LLM requests in flight, a study's parallel stages, torch threads): each request in flight
# holds a socket, and a Linux process may open 1,024 files by default; a server batches a few hundred
# sequences (vLLM's max_num_seqs: 256) and the largest machines have a few hundred cores. More is a typo.
MAX_CONCURRENCY = 1_024
concurrency_count = count_up_to(MAX_CONCURRENCY)
# QA per type per patient: one of each type is held out (never trained on), so at least 2 keep one seen; the
# paper writes 4, and each one is an LLM call under --generate, so 1,000 is a typo rather than a study.
MAX_QA_PER_TYPE = 1_000
qa_per_type_count = number_type(
    int,
    "a whole number of at least 2 (one QA of each type per patient is held out, so at least one other is "
    "trained on)",
    lambda n: n >= 2,
    MAX_QA_PER_TYPE,
)


def positive_int_or_auto(value):
    """A batch size: ``auto`` (the runner searches for the largest that fits) or a whole number from 1 to
    :data:`MAX_BATCH_SIZE`.

    >>> positive_int_or_auto("auto"), positive_int_or_auto("8")
    ('auto', 8)
    """
    return value if value == "auto" else batch_size_int(value)


# The numeric fields of TrainingArguments, SFTConfig and the method configs that have an impossible range,
# with their check; a field a config lacks is skipped, ``None`` (unset) passes.
CONFIG_NUMBERS: dict[str, Callable] = {
    "max_steps": steps_limit,
    "num_train_epochs": epochs,
    "learning_rate": positive_float,
    "weight_decay": non_negative_float,
    "per_device_train_batch_size": batch_size_int,
    "per_device_eval_batch_size": batch_size_int,
    "gradient_accumulation_steps": batch_size_int,
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
    "seed": seed_int,
    "data_seed": seed_int,
    "dataloader_num_workers": non_negative_int,
    "max_length": sequence_tokens,
    "forget_weight": non_negative_float,
    "retain_weight": non_negative_float,
    "beta": positive_float,
    "eval_probe_steps": positive_int,
    "probe_patients": positive_int,
    "probe_max_new_tokens": new_tokens,
    "max_retain_mu_drop": non_negative_float,
}


def checked_numbers(
    values: Mapping[str, Any],
    checks: Mapping[str, Callable],
    name: Callable[[str], str],
    error: type[Exception] = InputError,
) -> dict[str, Any]:
    """``values`` with each field that ``checks`` names checked; a string is replaced by the number it parses
    to (``"2e-5"`` becomes ``2e-05``), a number is kept as given (so a fingerprint of the values does not
    change); ``None`` (unset) passes. An impossible value is an ``error`` (an
    :class:`~medunlearn.errors.InputError` or a subclass) whose message starts with ``name(field)``.

    >>> checked_numbers({"patients": "40", "label": "x"}, {"patients": positive_int}, lambda f: f"key {f!r}")
    {'patients': 40, 'label': 'x'}
    >>> checked_numbers({"patients": -5}, {"patients": positive_int}, lambda f: f"s.yaml: key {f!r}")
    Traceback (most recent call last):
    ...
    medunlearn.errors.InputError: s.yaml: key 'patients': must be a whole number of at least 1, got -5
    """
    checked = dict(values)
    for field, check in checks.items():
        if checked.get(field) is None:
            continue
        try:
            number = check(checked[field])
        except argparse.ArgumentTypeError as problem:
            raise error(f"{name(field)}: {problem}") from None
        if isinstance(checked[field], str):
            checked[field] = number
    return checked


def check_config_numbers(config, where: str = "the command line") -> None:
    """Check every field of ``config`` (a dataclass or a namespace) that :data:`CONFIG_NUMBERS` names; an
    impossible value is an :class:`~medunlearn.errors.InputError` naming the option and ``where`` it may come
    from.

    >>> from types import SimpleNamespace
    >>> check_config_numbers(SimpleNamespace(max_steps=-5, learning_rate=1e-5))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    medunlearn.errors.InputError: --max_steps must be -1 (...) or a whole number ..., got -5 (from ...)
    """
    for field, check in CONFIG_NUMBERS.items():
        value = getattr(config, field, None)
        if value is None:
            continue
        try:
            check(value)
        except argparse.ArgumentTypeError as error:
            raise InputError(f"--{field} {error} (from {where})") from None


def parse_config_arguments(parser, args: list[str], where: str):
    """``parser.parse_args_into_dataclasses(args, return_remaining_strings=True)`` of a transformers / TRL
    parser (``HfArgumentParser``), with the numbers checked first: a config's ``__post_init__`` raises a bare
    ``ValueError`` on an impossible value (``warmup_steps = -0.5``), and lets ``inf`` or ``nan`` through. A
    cross-field check of ``__post_init__`` (two options that contradict) is named as the config's complaint.
    ``where`` says where the values may come from (``the command line or recipe X``). A value argparse itself
    refuses (``--learning_rate abc``, a ``Literal`` field's unknown choice) is an
    :class:`~medunlearn.errors.InputError` too, which the command prints as its own error line, instead of
    the parser's usage text under the parser's program name."""

    def refuse(message: str):
        raise InputError(f"{message} (from {where})")

    parser.error = refuse  # argparse's error() prints the usage and exits; a named error instead
    namespace, _ = parser.parse_known_args(args=list(args))
    check_config_numbers(namespace, where)
    try:
        return parser.parse_args_into_dataclasses(args=list(args), return_remaining_strings=True)
    except ValueError as error:  # TrainingArguments.__post_init__: settings that contradict each other
        classes = ", ".join(kind.__name__ for kind in parser.dataclass_types)
        raise InputError(f"{classes} refuses these settings (from {where}): {error}") from error


def refuse_set_fields(parser, args: list[str], fields: dict[str, str], command: str) -> None:
    """Refuse an option of ``args`` (a transformers / TRL parser's overrides, already parsed by
    :func:`parse_config_arguments`) that sets one of ``fields``, which ``command`` sets itself and would
    silently ignore: in any spelling argparse takes (``--num-train-epochs``, ``--num_train_epochs=1``, an
    abbreviation). ``fields``: ``{field: why, and the option to use}``."""
    unset = object()
    defaults = {name: parser.get_default(name) for name in fields}
    parser.set_defaults(**dict.fromkeys(fields, unset))
    try:
        namespace, _ = parser.parse_known_args(args=list(args))
    finally:
        parser.set_defaults(**defaults)
    for name, why in fields.items():
        if getattr(namespace, name, unset) is not unset:
            raise InputError(f"--{name} is not an option of {command}: {why}")


__all__ = [
    "CONFIG_NUMBERS",
    "MAX_BATCH_SIZE",
    "MAX_CONCURRENCY",
    "MAX_EPOCHS",
    "MAX_COUNT",
    "MAX_LORA_RANK",
    "MAX_NEW_TOKENS",
    "MAX_PAIRS",
    "MAX_PATIENTS",
    "MAX_QA_PER_TYPE",
    "MAX_RESAMPLES",
    "MAX_SEED",
    "MAX_SEQUENCE_TOKENS",
    "MAX_STEPS",
    "MAX_VOCAB_SIZE",
    "MIN_VOCAB_SIZE",
    "batch_size_int",
    "check_config_numbers",
    "checked_numbers",
    "concurrency_count",
    "count_up_to",
    "epoch_count",
    "epochs",
    "fraction",
    "lora_alpha",
    "lora_rank",
    "new_tokens",
    "non_negative_float",
    "non_negative_int",
    "number_type",
    "pair_count",
    "parse_config_arguments",
    "refuse_set_fields",
    "patient_count",
    "positive_float",
    "positive_int",
    "positive_int_or_auto",
    "probability",
    "qa_per_type_count",
    "resample_count",
    "seed_int",
    "sequence_tokens",
    "step_count",
    "steps_limit",
    "vocab_size",
    "whole_number_from",
]
