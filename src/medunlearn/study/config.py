"""The study file (``STUDY.yaml``) as dataclasses, read and checked with errors naming the file and the key.

A study file::

    name: mini                                  # optional; defaults to the file's stem
    model:                                      # ModelArguments fields
      model_name_or_path: tiny-llama
      tiny_vocab_size: 600
    data:                                       # exactly one of `path` or `build`
      build: {source: synthetic, patients: 40, seed: 0}   # medunlearn.build_amnesia options
      # path: amnesia/                          # an AMNESIA folder (relative to the study file)
    finetune:
      notes_epochs: 1.0
      qa_epochs: 8.0
      sft: {learning_rate: 5.0e-3, per_device_train_batch_size: 16, seed: 0}   # SFTConfig fields
    methods:                                    # label -> config fields over the paper defaults
      grad_diff: {learning_rate: 5.0e-4, max_steps: 2}
      gd_fast: {method: grad_diff, learning_rate: 1.0e-3}   # `method:` when the label is not the method
    forget: [forget_5, forget_10, disease_cancer_forget_5]
    seeds: [0]                                  # each seed is the method config's `seed`
    evaluation:
      runner: {max_new_tokens: 8, batch_size: 16}           # RunnerConfig fields
      populations: {max_retain_patients: 10, seed: 0}       # PopulationConfig fields
      embedding_similarity: false
    slurm: {timeout_min: 240, gpus_per_node: 1}             # submitit parameters (--executor slurm)
    dtype: auto                                 # or float32, bfloat16: every stage's precision
    attacks:                                    # optional: an attack stage per cell (docs/attacks.md)
      attacks: [relearn, quantize, holdout, membership]
      relearn_steps: [5, 10]

``dtype`` is the precision of every stage that trains or evaluates (``medunlearn study --dtype`` overrides
it): resolved once, as ``medunlearn finetune`` / ``unlearn`` / ``evaluate`` resolve ``--dtype``, for the
device the stages run on (:func:`medunlearn.study.grid.study_precision`); the trainers' own ``bf16`` /
``fp16`` / ``dtype`` fields and ``evaluation.runner.dtype`` are refused in its favour.

``benchmark: muse`` with ``protocol: scalability`` or ``sustainability`` makes it a MUSE protocol study, whose
data, fine-tune, forget folds and evaluation sections are MUSE's (:mod:`medunlearn.study.muse_config`).

Only the shape is checked here (no torch import), and every number: a count, a rate, an epoch number or a seed
that cannot be (``-5``, ``0`` patients, ``.nan``, ``fast``) is named with the file and its key, by the checks
of the command-line options (:mod:`medunlearn.utils.numbers`). :func:`medunlearn.study.grid.validate_study`
also resolves every method config and checks the forget configs against the data.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medunlearn.config_names import is_forget_config
from medunlearn.errors import FileContentError, MedunlearnError, MissingInputError
from medunlearn.utils.numbers import (
    CONFIG_NUMBERS,
    batch_size_int,
    checked_numbers,
    epochs,
    fraction,
    lora_alpha,
    lora_rank,
    new_tokens,
    non_negative_int,
    number_type,
    patient_count,
    positive_float,
    positive_int,
    positive_int_or_auto,
    qa_per_type_count,
    seed_int,
    step_count,
    vocab_size,
)
from medunlearn.utils.user_files import read_yaml

if TYPE_CHECKING:
    from medunlearn.study.muse_config import MuseEvaluationSpec, MuseFinetuneSpec

TOP = "<top level>"
TOP_LEVEL = (
    "name",
    "model",
    "data",
    "finetune",
    "methods",
    "forget",
    "seeds",
    "evaluation",
    "slurm",
    "attacks",
    "benchmark",
    "protocol",
    "dtype",
)
# What a study runs: AMNESIA's grid (this module) or MUSE's protocols (medunlearn.study.muse_config).
BENCHMARKS = ("amnesia", "muse")
# The choices of the top-level ``dtype`` (as ``--dtype``'s: medunlearn.utils.precision.DTYPE_CHOICES).
DTYPES = ("auto", "float32", "bfloat16")
# Trainer and runner fields that set a precision: the study's ``dtype`` sets them for every stage.
PRECISION_FIELDS = ("dtype", "bf16", "fp16")


class StudyConfigError(MedunlearnError, ValueError):
    """A study file's key is missing, unknown or has a bad value; the message names the file and the key."""


# The numbers of each section and their checks (those of the matching command-line options); the method and
# ``sft`` fields are a trainer config's: :data:`medunlearn.utils.numbers.CONFIG_NUMBERS`.
MODEL_NUMBERS = {"lora_r": lora_rank, "lora_alpha": lora_alpha, "tiny_vocab_size": vocab_size}
BUILD_NUMBERS = {
    "patients": patient_count,
    "seed": seed_int,
    "qa_per_type": qa_per_type_count,
    "holdout_per_type": positive_int,
}
FINETUNE_NUMBERS = {"notes_epochs": epochs, "qa_epochs": epochs}
RUNNER_NUMBERS = {
    "batch_size": positive_int_or_auto,
    "max_new_tokens": new_tokens,
    "max_batch_size": batch_size_int,
}
POPULATION_NUMBERS = {"max_retain_patients": positive_int, "seed": seed_int}
ATTACK_NUMBERS = {
    "relearn_share": fraction,
    "relearn_learning_rate": positive_float,
    "relearn_batch_size": batch_size_int,
    "seed": seed_int,
    "max_retain_patients": non_negative_int,  # 0 keeps every retained patient (as --max-retain-patients)
}


@dataclass
class DataSpec:
    """Where the AMNESIA data comes from: an existing folder (``path``) or ``build_amnesia`` options
    (``build``)."""

    path: str | None = None
    build: dict[str, Any] | None = None


@dataclass
class FinetuneSpec:
    """The one fine-tune of the study: ``FinetuneArguments`` epochs and ``SFTConfig`` fields."""

    notes_epochs: float = 1.0
    qa_epochs: float = 3.0
    sft: dict[str, Any] = field(default_factory=dict)


@dataclass
class MethodSpec:
    """One row of the grid's method axis: a label, the method (stem or alias) and its config fields."""

    label: str
    method: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvaluationSpec:
    """``RunnerConfig`` and ``PopulationConfig`` fields and ``evaluate_unlearning``'s similarity option."""

    runner: dict[str, Any] = field(default_factory=dict)
    populations: dict[str, Any] = field(default_factory=dict)
    embedding_similarity: bool = False


@dataclass
class AttackSpec:
    """The attack stage of every cell (``medunlearn.attacks.run_attacks`` on the cell's unlearned model, the
    fine-tuned model as the before model); the evaluation's runner settings are reused.

    Parameters:
        attacks (`list[str]`, *optional*, defaults to every attack of `medunlearn.attacks.ATTACKS`):
            Which attacks to run.
        relearn_steps, relearn_data, relearn_share, relearn_learning_rate, relearn_batch_size (*optional*):
            The `RelearnConfig` fields (its defaults when absent; the seed is `seed`).
        quantizations (`list[str]`, *optional*, defaults to `["8bit", "nf4"]`):
            The quantization schemes.
        seed (`int`, *optional*, defaults to `0`):
            Seeds the attacks (`AttackArguments.seed` and `RelearnConfig.seed`).
        max_retain_patients (`int` or `None`, *optional*, defaults to the evaluation's
            `populations.max_retain_patients`):
            Seeded sample of retained patients per population.
    """

    attacks: list[str] | None = None
    relearn_steps: list[int] | None = None
    relearn_data: str | None = None
    relearn_share: float | None = None
    relearn_learning_rate: float | None = None
    relearn_batch_size: int | None = None
    quantizations: list[str] | None = None
    seed: int = 0
    max_retain_patients: int | None = None


ATTACK_KEYS = tuple(f.name for f in dataclasses.fields(AttackSpec))


@dataclass
class StudyConfig:
    """A parsed study file (see the module docstring for the format)."""

    name: str
    source: str  # the file it was read from (named in errors)
    model: dict[str, Any]
    data: DataSpec
    finetune: FinetuneSpec | MuseFinetuneSpec
    methods: list[MethodSpec]
    forget: list[str]
    seeds: list[int]
    evaluation: EvaluationSpec | MuseEvaluationSpec
    slurm: dict[str, Any] = field(default_factory=dict)
    attacks: AttackSpec | None = None  # None: no attack stage (and no change to any fingerprint)
    benchmark: str = "amnesia"  # or "muse": MUSE's protocols (docs/study.md, "MUSE protocols")
    protocol: str | None = None  # MUSE: "scalability" or "sustainability"
    dtype: str = "auto"  # every stage's precision: auto, float32 or bfloat16 (docs/study.md, "Precision")

    def error(self, key: str, message: str) -> StudyConfigError:
        return StudyConfigError(f"{self.source}: key '{key}': {message}")

    def data_path(self) -> Path | None:
        """``data.path`` resolved against the study file's folder (``None`` when the data is built)."""
        if self.data.path is None:
            return None
        path = Path(self.data.path).expanduser()
        return path if path.is_absolute() else (Path(self.source).resolve().parent / path)


def _study_name(source: str, raw: dict) -> str:
    """The study's ``name`` key, the study file's stem when absent."""
    name = raw.get("name") or Path(source).stem
    if not isinstance(name, str):
        raise _fail(source, "name", "must be a string")
    return name


def _fail(source: str, key: str, message: str) -> StudyConfigError:
    return StudyConfigError(f"{source}: key '{key}': {message}")


def _mapping(source: str, key: str, value, allowed: tuple[str, ...] | None = None) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(source, key, f"must be a mapping, got {type(value).__name__}")
    if allowed is not None:
        unknown = sorted(set(value) - set(allowed))
        if unknown:
            where = unknown[0] if key == TOP else f"{key}.{unknown[0]}"
            raise _fail(source, where, f"unknown key; allowed: {', '.join(allowed)}")
    return dict(value)


def _numbers(source: str, key: str, values: dict, checks: dict) -> dict:
    """``values`` with the numbers ``checks`` names parsed and checked; a bad one names the file and key."""
    return checked_numbers(values, checks, lambda name: f"{source}: key '{key}.{name}'", StudyConfigError)


def _number_list(source: str, key: str, values, check) -> list:
    """``values`` (a list, or one number alone) with each item checked by ``check``; a bad one names the file
    and ``key[index]``."""
    items = values if isinstance(values, list) else [values]
    if not items or any(item is None for item in items):
        raise _fail(source, key, f"must be a non-empty list of numbers, got {values!r}")
    checks = dict.fromkeys(range(len(items)), check)
    name = lambda index: f"{source}: key '{key}[{index}]'"  # noqa: E731 - one line, named for reading
    return list(checked_numbers(dict(enumerate(items)), checks, name, StudyConfigError).values())


def _dataclass_fields(source: str, key: str, values: dict, cls) -> dict:
    """Check that ``values`` are fields of the dataclass ``cls``; returns them."""
    names = [f.name for f in dataclasses.fields(cls)]
    for name in values:
        if name not in names:
            raise _fail(source, f"{key}.{name}", f"not a field of {cls.__name__}; fields: {', '.join(names)}")
    return values


def parse_study(raw: dict, source: str = "<study>") -> StudyConfig:
    """A :class:`StudyConfig` from a loaded YAML mapping; ``source`` names the file in errors."""
    raw = _mapping(source, TOP, raw, TOP_LEVEL)
    benchmark = raw.get("benchmark", "amnesia")
    if benchmark not in BENCHMARKS:
        raise _fail(source, "benchmark", f"must be one of {', '.join(BENCHMARKS)}, got {benchmark!r}")
    if benchmark == "muse":
        from medunlearn.study.muse_config import parse_muse_study

        return parse_muse_study(raw, source)
    if raw.get("protocol") is not None:
        raise _fail(source, "protocol", "only a MUSE study (benchmark: muse) has a protocol")
    for required in ("model", "data", "methods", "forget"):
        if raw.get(required) is None:
            raise _fail(source, required, "is required")
    # Sections are checked in file order, so the first error named is the first one a reader meets.
    model = _parse_model(source, raw["model"])
    data = _parse_data(source, raw["data"])
    finetune = _parse_finetune(source, raw.get("finetune"))
    methods = _parse_methods(source, raw["methods"])
    forget = _parse_forget(source, raw["forget"])
    seeds = _parse_seeds(source, raw.get("seeds", [0]))
    evaluation = _parse_evaluation(source, raw.get("evaluation"))
    attacks = _attack_spec(source, raw["attacks"]) if raw.get("attacks") is not None else None
    dtype = parse_dtype(source, raw.get("dtype"))

    return StudyConfig(
        name=_study_name(source, raw),
        source=source,
        model=model,
        data=data,
        finetune=finetune,
        methods=methods,
        forget=forget,
        seeds=seeds,
        evaluation=evaluation,
        slurm=_mapping(source, "slurm", raw.get("slurm")),
        attacks=attacks,
        dtype=dtype,
    )


def parse_dtype(source: str, value) -> str:
    """``dtype:``: ``auto`` (absent or empty: the default), ``float32`` or ``bfloat16``."""
    if value is None:
        return "auto"
    if value not in DTYPES:
        raise _fail(source, "dtype", f"must be one of {', '.join(DTYPES)}, got {value!r}")
    return value


def refuse_precision_fields(source: str, key: str, fields: dict) -> None:
    """A trainer's or the runner's own precision field (``dtype``, ``bf16``, ``fp16``) under ``key`` is
    refused: the study's top-level ``dtype`` sets every stage's."""
    for name in PRECISION_FIELDS:
        if name in fields:
            raise _fail(
                source,
                f"{key}.{name}",
                f"is set by the study's top-level `dtype` ({', '.join(DTYPES)}) for every stage",
            )


def _parse_model(source: str, value) -> dict[str, Any]:
    """``model:``: ``ModelArguments`` fields, or just the model's name."""
    from medunlearn.models import ModelArguments, check_local_model

    if isinstance(value, str):
        value = {"model_name_or_path": value}
    model = _dataclass_fields(source, "model", _mapping(source, "model", value), ModelArguments)
    model = _numbers(source, "model", model, MODEL_NUMBERS)
    if not isinstance(model.get("model_name_or_path"), str):
        raise _fail(source, "model.model_name_or_path", "is required (a folder, Hub id or built-in name)")
    # A folder that is no model (/etc) is named now, not when the fine-tuning stage loads it; a Hub id is
    # checked when it is loaded (online or not is the machine's, not the file's, question).
    check_local_model(model["model_name_or_path"], f"{source}: key 'model.model_name_or_path':")
    return model


def _parse_data(source: str, value) -> DataSpec:
    """``data:``: exactly one of an AMNESIA folder's ``path`` or ``build`` options of ``build_amnesia``."""
    data_raw = _mapping(source, "data", value, ("path", "build"))
    if ("path" in data_raw) == ("build" in data_raw):
        raise _fail(source, "data", "give exactly one of 'path' (an AMNESIA folder) or 'build' (its options)")
    if "path" in data_raw and not isinstance(data_raw["path"], str):
        raise _fail(source, "data.path", "must be a string")
    data = DataSpec(
        path=data_raw.get("path"),
        build=_mapping(source, "data.build", data_raw["build"]) if "build" in data_raw else None,
    )
    if data.build is not None:
        from medunlearn.amnesia.pipeline import BuildOptions

        options = [f.name for f in dataclasses.fields(BuildOptions)]
        for name in data.build:
            if name not in options:
                raise _fail(source, f"data.build.{name}", f"not a build_amnesia option; options: {options}")
        data.build = _numbers(source, "data.build", data.build, BUILD_NUMBERS)
        if "forget_percentages" in data.build:
            percent = number_type(int, "a whole percentage from 1 to 99", lambda n: 1 <= n <= 99)
            data.build["forget_percentages"] = _number_list(
                source, "data.build.forget_percentages", data.build["forget_percentages"], percent
            )
    return data


def _parse_finetune(source: str, value) -> FinetuneSpec:
    """``finetune:``: the two epoch counts (numbers >= 0) and ``SFTConfig`` fields."""
    ft_raw = _mapping(source, "finetune", value, ("notes_epochs", "qa_epochs", "sft"))
    sft = _numbers(
        source, "finetune.sft", _mapping(source, "finetune.sft", ft_raw.get("sft")), CONFIG_NUMBERS
    )
    refuse_precision_fields(source, "finetune.sft", sft)
    epochs = _numbers(source, "finetune", ft_raw, FINETUNE_NUMBERS)
    return FinetuneSpec(
        **{key: float(epochs[key]) for key in FINETUNE_NUMBERS if epochs.get(key) is not None}, sft=sft
    )


def _parse_methods(source: str, value) -> list[MethodSpec]:
    """``methods:``: label -> config fields; ``method:`` names the method when the label does not."""
    methods_raw = _mapping(source, "methods", value)
    if not methods_raw:
        raise _fail(source, "methods", "names no method")
    methods = []
    for label, fields in methods_raw.items():
        if not isinstance(label, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
            raise _fail(source, f"methods.{label}", "a label is letters, digits, '_', '.' and '-' only")
        fields = _numbers(
            source, f"methods.{label}", _mapping(source, f"methods.{label}", fields), CONFIG_NUMBERS
        )
        method = fields.pop("method", label)
        if not isinstance(method, str):
            raise _fail(source, f"methods.{label}.method", "must be a method name")
        for reserved in ("output_dir", "seed"):
            if reserved in fields:
                raise _fail(
                    source, f"methods.{label}.{reserved}", "is set by the study (cells folder, `seeds`)"
                )
        refuse_precision_fields(source, f"methods.{label}", fields)
        methods.append(MethodSpec(label, method, fields))
    return methods


def _parse_forget(source: str, value) -> list[str]:
    """``forget:``: distinct AMNESIA forget config names (one name alone is a list of one)."""
    forget = [value] if isinstance(value, str) else value
    if not isinstance(forget, list) or not forget:
        raise _fail(source, "forget", "must be a non-empty list of forget configs")
    for index, name in enumerate(forget):
        if not isinstance(name, str) or not is_forget_config(name, "amnesia"):
            raise _fail(
                source, f"forget[{index}]", f"{name!r} is not a forget config (forget_X, disease_D_forget_X)"
            )
    if len(set(forget)) != len(forget):
        raise _fail(source, "forget", "lists a config twice")
    return list(forget)


def _parse_seeds(source: str, value) -> list[int]:
    """``seeds:``: distinct integers (one integer alone is a list of one)."""
    seeds = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise _fail(source, "seeds", f"must be a non-empty list of integers, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise _fail(source, "seeds", "lists a seed twice")
    return _number_list(source, "seeds", seeds, seed_int)


def _parse_evaluation(source: str, value) -> EvaluationSpec:
    """``evaluation:``: ``RunnerConfig`` and ``PopulationConfig`` fields and the similarity switch."""
    from medunlearn.evaluation.populations import PopulationConfig

    ev_raw = _mapping(source, "evaluation", value, ("runner", "populations", "embedding_similarity"))
    runner = _parse_runner(source, ev_raw.get("runner"))
    populations = _dataclass_fields(
        source,
        "evaluation.populations",
        _mapping(source, "evaluation.populations", ev_raw.get("populations")),
        PopulationConfig,
    )
    populations = _numbers(source, "evaluation.populations", populations, POPULATION_NUMBERS)
    embedding = ev_raw.get("embedding_similarity", False)
    if not isinstance(embedding, bool):
        raise _fail(source, "evaluation.embedding_similarity", "must be true or false")
    return EvaluationSpec(runner, populations, embedding)


def _parse_runner(source: str, value) -> dict[str, Any]:
    """``evaluation.runner:``: ``RunnerConfig`` fields, without the display option and with every batch."""
    from medunlearn.evaluation.runner import RunnerConfig

    runner = _dataclass_fields(
        source, "evaluation.runner", _mapping(source, "evaluation.runner", value), RunnerConfig
    )
    runner = _numbers(source, "evaluation.runner", runner, RUNNER_NUMBERS)
    runner.pop("progress", None)  # a display option: never part of a result
    refuse_precision_fields(source, "evaluation.runner", runner)
    if runner.get("stop_after_batches") is not None:
        raise _fail(source, "evaluation.runner.stop_after_batches", "a study evaluates every batch")
    return runner


def _attack_spec(source: str, value) -> AttackSpec:
    """The ``attacks:`` mapping's shape (the attack and scheme names are checked by ``validate_study``)."""
    raw = _mapping(source, "attacks", value, ATTACK_KEYS)
    for key in ("attacks", "quantizations", "relearn_steps"):
        if key in raw:
            items = (
                [raw[key]]
                if isinstance(raw[key], (str, int)) and not isinstance(raw[key], bool)
                else raw[key]
            )
            kind = int if key == "relearn_steps" else str
            if (
                not isinstance(items, list)
                or not items
                or not all(isinstance(i, kind) and not isinstance(i, bool) for i in items)
            ):
                raise _fail(source, f"attacks.{key}", f"must be a non-empty list of {kind.__name__}s")
            raw[key] = list(items)
    if raw.get("relearn_data") is not None and not isinstance(raw["relearn_data"], str):
        raise _fail(source, "attacks.relearn_data", "must be a str")
    if "relearn_steps" in raw:
        raw["relearn_steps"] = _number_list(source, "attacks.relearn_steps", raw["relearn_steps"], step_count)
    return AttackSpec(**_numbers(source, "attacks", raw, ATTACK_NUMBERS))


def load_study(path: str | Path) -> StudyConfig:
    """Read and check a study file (shape only; see :func:`medunlearn.study.grid.validate_study`)."""
    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"study file {path} does not exist")
    if not path.is_file():
        raise FileContentError(f"study file {path}", None, None, "is a folder, not a file")
    # The shared reader: encodings, YAML syntax and a key given twice are named with their line.
    return parse_study(read_yaml(path, expect=None), str(path))
