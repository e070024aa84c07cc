"""Unlearning trainers: one file per method on a shared base, listed in ``methods.py``.

The base: ``config.py`` (``UnlearningConfig``), ``data.py`` (tokenising, pairing, collation), ``ops.py``
(log-probs and losses) and ``trainer.py`` (``UnlearningTrainer``).

>>> from medunlearn.unlearn import GradDiffTrainer, GradDiffConfig  # doctest: +SKIP

Classes are imported lazily: ``import medunlearn.unlearn`` does not import torch until a class is asked for.
"""

from __future__ import annotations

import importlib

_BASE_MODULES = {
    "UnlearningConfig": "medunlearn.unlearn.config",
    "UnlearningTrainer": "medunlearn.unlearn.trainer",
}
# The Python API of the training half (medunlearn.unlearn.run): what the CLI, the demo and notebooks call.
_RUN_NAMES = {
    "FinetuneArguments",
    "UnlearningDataArguments",
    "build_method_config",
    "default_sft_config",
    "make_method_config",
    "read_recipe",
    "run_finetune",
    "run_unlearning",
}
_ERROR_NAMES = {
    "UnlearningInputError",
    "EmptyForgetSetError",
    "MissingChatTemplateError",
    "NonFiniteLossError",
}
_TABLE_NAMES = {
    "METHODS",
    "MethodSpec",
    "UnknownMethodError",
    "available_methods",
    "get_method",
    "resolve_method",
}


def _class_index() -> dict[str, str]:
    from medunlearn.unlearn.methods import METHODS

    index = {}
    for spec in METHODS.values():
        index[spec.config_class] = spec.module
        index[spec.trainer_class] = spec.module
    return index


def __getattr__(name: str):
    if name in _ERROR_NAMES:
        return getattr(importlib.import_module("medunlearn.unlearn.errors"), name)
    if name in _BASE_MODULES:
        return getattr(importlib.import_module(_BASE_MODULES[name]), name)
    if name in _TABLE_NAMES:
        return getattr(importlib.import_module("medunlearn.unlearn.methods"), name)
    if name in _RUN_NAMES:
        return getattr(importlib.import_module("medunlearn.unlearn.run"), name)
    module = _class_index().get(name)
    if module is None:
        raise AttributeError(f"module 'medunlearn.unlearn' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# Every lazily imported name, the method table's config and trainer classes included (methods.py imports no
# torch).
__all__ = sorted(set(_BASE_MODULES) | _ERROR_NAMES | _TABLE_NAMES | _RUN_NAMES | set(_class_index()))
