"""The study file of a MUSE protocol study (``benchmark: muse``), read and checked with errors naming the file
and the key, as an AMNESIA study's (docs/study.md, "MUSE protocols")::

    name: muse-scalability
    benchmark: muse
    protocol: scalability                     # or sustainability
    model: {model_name_or_path: tiny-llama, tiny_vocab_size: 600}
    data:                                     # exactly one of `path` or `build`
      build: {articles: 8, seed: 0}           # medunlearn.muse.build_muse_folder options
      # path: MUSE-News/                      # a MUSE-format folder with scal, sust and train configs
    finetune:                                 # the target and retain models (medunlearn.muse.finetune)
      epochs: 40.0
      sft: {learning_rate: 5.0e-3, per_device_train_batch_size: 8, seed: 0}   # SFTConfig fields
    methods:                                  # as an AMNESIA study's
      grad_diff: {learning_rate: 1.0e-2, max_steps: 4}
    forget: [forget_1, forget_2, forget_3, forget_4]   # the folds (default: all four)
    seeds: [0, 1]
    evaluation:
      runner: {batch_size: 16}                # RunnerConfig fields
      preset: medunlearn                      # or open-unlearning (docs/muse.md, "Presets")
      knowmem_max_new_tokens: 8               # default: the preset's (32)
      verbmem_max_new_tokens: 16              # default: the preset's (128)
    dtype: auto                               # or float32, bfloat16: every stage's precision

The protocols [MUSE, Shi et al. 2024, criteria C5 and C6]:

* ``scalability``: each fold ``scal/forget_k`` (the first k ``sust`` folds together, so it grows with k) is
  unlearned from the target model, once per method and seed;
* ``sustainability``: request k unlearns ``sust/forget_k`` from the model request k - 1 produced (request 1:
  the target model); the folds must be ``forget_1`` … ``forget_n`` in order, request k being fold k.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from medunlearn.config_names import MUSE_FOLDS
from medunlearn.study.config import (
    DataSpec,
    StudyConfig,
    _fail,
    _mapping,
    _numbers,
    _parse_methods,
    _parse_model,
    _parse_runner,
    _parse_seeds,
    _study_name,
    parse_dtype,
    refuse_precision_fields,
)
from medunlearn.utils.numbers import (
    CONFIG_NUMBERS,
    new_tokens,
    positive_float,
    positive_int,
    seed_int,
    whole_number_from,
)

# protocol -> the MUSE config whose folds it unlearns.
PROTOCOLS = {"scalability": "scal", "sustainability": "sust"}
BUILD_OPTIONS = ("articles", "prompt_words", "continuation_words", "seed")


def _build_numbers() -> dict:
    from medunlearn.muse.build import MAX_ARTICLES, MIN_ARTICLES

    return {
        "articles": whole_number_from(MIN_ARTICLES, MAX_ARTICLES),
        "prompt_words": positive_int,
        "continuation_words": positive_int,
        "seed": seed_int,
    }


@dataclass
class MuseFinetuneSpec:
    """The study's two fine-tunes from its model (:func:`medunlearn.muse.finetune.run_muse_finetune`): the
    target (``train``: forget, retain1, retain2) and the retain model (retain1, retain2), with the same
    ``epochs`` and ``SFTConfig`` fields."""

    epochs: float = 3.0
    sft: dict[str, Any] = field(default_factory=dict)


@dataclass
class MuseEvaluationSpec:
    """``RunnerConfig`` fields and the MUSE conventions (a preset, and its two generation lengths when
    given)."""

    runner: dict[str, Any] = field(default_factory=dict)
    preset: str = "medunlearn"
    knowmem_max_new_tokens: int | None = None
    verbmem_max_new_tokens: int | None = None


def muse_conventions(evaluation: dict):
    """The :class:`~medunlearn.muse.conventions.MuseConventions` of a MUSE study's evaluation settings (the
    ``asdict`` of a :class:`MuseEvaluationSpec`)."""
    from medunlearn.muse.conventions import muse_preset

    return muse_preset(
        evaluation["preset"],
        knowmem_max_new_tokens=evaluation.get("knowmem_max_new_tokens"),
        verbmem_max_new_tokens=evaluation.get("verbmem_max_new_tokens"),
    )


def parse_muse_study(raw: dict, source: str) -> StudyConfig:
    """A :class:`StudyConfig` of a MUSE protocol study from the file's top-level mapping (keys checked)."""
    if raw.get("protocol") is None:
        raise _fail(source, "protocol", f"is required in a MUSE study: {' or '.join(PROTOCOLS)}")
    for required in ("model", "data", "methods"):
        if raw.get(required) is None:
            raise _fail(source, required, "is required")
    protocol = raw["protocol"]
    if protocol not in PROTOCOLS:
        raise _fail(source, "protocol", f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if raw.get("attacks") is not None:
        raise _fail(source, "attacks", "the attack stage reads AMNESIA folders; a MUSE study has none")
    model = _parse_model(source, raw["model"])
    data = _parse_muse_data(source, raw["data"])
    finetune = _parse_muse_finetune(source, raw.get("finetune"))
    methods = _parse_methods(source, raw["methods"])
    forget = _parse_folds(source, raw.get("forget", list(MUSE_FOLDS)), protocol)
    seeds = _parse_seeds(source, raw.get("seeds", [0]))
    evaluation = _parse_muse_evaluation(source, raw.get("evaluation"))
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
        benchmark="muse",
        protocol=protocol,
        dtype=parse_dtype(source, raw.get("dtype")),
    )


def _parse_muse_data(source: str, value) -> DataSpec:
    """``data:``: exactly one of a MUSE-format folder's ``path`` or ``build_muse_folder`` options."""
    data_raw = _mapping(source, "data", value, ("path", "build"))
    if ("path" in data_raw) == ("build" in data_raw):
        raise _fail(
            source, "data", "give exactly one of 'path' (a MUSE-format folder) or 'build' (its options)"
        )
    if "path" in data_raw:
        if not isinstance(data_raw["path"], str):
            raise _fail(source, "data.path", "must be a string")
        return DataSpec(path=data_raw["path"])
    build = _mapping(source, "data.build", data_raw["build"], BUILD_OPTIONS)
    return DataSpec(build=_numbers(source, "data.build", build, _build_numbers()))


def _parse_muse_finetune(source: str, value) -> MuseFinetuneSpec:
    """``finetune:``: the epochs (above 0) and ``SFTConfig`` fields of both fine-tunes."""
    ft_raw = _mapping(source, "finetune", value, ("epochs", "sft"))
    sft = _numbers(
        source, "finetune.sft", _mapping(source, "finetune.sft", ft_raw.get("sft")), CONFIG_NUMBERS
    )
    refuse_precision_fields(source, "finetune.sft", sft)
    epochs = _numbers(source, "finetune", ft_raw, {"epochs": positive_float}).get("epochs")
    return MuseFinetuneSpec(sft=sft) if epochs is None else MuseFinetuneSpec(float(epochs), sft)


def _parse_folds(source: str, value, protocol: str) -> list[str]:
    """``forget:``: distinct MUSE folds; under sustainability ``forget_1`` … ``forget_n`` in order (request k
    is fold k, and each request starts from the one before)."""
    folds = [value] if isinstance(value, str) else value
    if not isinstance(folds, list) or not folds:
        raise _fail(source, "forget", f"must be a non-empty list of MUSE folds ({', '.join(MUSE_FOLDS)})")
    for index, fold in enumerate(folds):
        if fold not in MUSE_FOLDS:
            raise _fail(source, f"forget[{index}]", f"{fold!r} is not a MUSE fold ({', '.join(MUSE_FOLDS)})")
    if len(set(folds)) != len(folds):
        raise _fail(source, "forget", "lists a fold twice")
    if protocol == "sustainability" and folds != list(MUSE_FOLDS[: len(folds)]):
        raise _fail(
            source,
            "forget",
            f"sustainability requests are the folds in order, request k unlearning fold k: "
            f"{', '.join(MUSE_FOLDS[: len(folds)])}, got {', '.join(folds)}",
        )
    return list(folds)


def _parse_muse_evaluation(source: str, value) -> MuseEvaluationSpec:
    """``evaluation:``: ``RunnerConfig`` fields, the MUSE preset and its generation lengths."""
    from medunlearn.muse.conventions import MUSE_PRESETS

    keys = tuple(f.name for f in dataclasses.fields(MuseEvaluationSpec))
    ev_raw = _mapping(source, "evaluation", value, keys)
    runner = _parse_runner(source, ev_raw.pop("runner", None))
    if runner.get("max_new_tokens") is not None:
        raise _fail(
            source,
            "evaluation.runner.max_new_tokens",
            "MUSE generates two lengths: set evaluation.knowmem_max_new_tokens and verbmem_max_new_tokens",
        )
    preset = ev_raw.pop("preset", "medunlearn")
    if preset not in MUSE_PRESETS:
        raise _fail(source, "evaluation.preset", f"must be one of {', '.join(MUSE_PRESETS)}, got {preset!r}")
    lengths = dict.fromkeys(ev_raw, new_tokens)
    return MuseEvaluationSpec(runner, preset, **_numbers(source, "evaluation", ev_raw, lengths))


__all__ = [
    "PROTOCOLS",
    "MuseEvaluationSpec",
    "MuseFinetuneSpec",
    "muse_conventions",
    "parse_muse_study",
]
