"""Unlearning trainers: one file per method on a shared base (``base.py``), listed in ``methods.py``.

>>> from medunlearn.unlearn import GradDiffTrainer, GradDiffConfig  # doctest: +SKIP

Classes are imported lazily: ``import medunlearn.unlearn`` does not import torch until a class is asked for.
"""

from __future__ import annotations

import importlib

_BASE_NAMES = {"UnlearningConfig", "UnlearningTrainer"}
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
    if name in _BASE_NAMES:
        return getattr(importlib.import_module("medunlearn.unlearn.base"), name)
    if name in _TABLE_NAMES:
        return getattr(importlib.import_module("medunlearn.unlearn.methods"), name)
    module = _class_index().get(name)
    if module is None:
        raise AttributeError(f"module 'medunlearn.unlearn' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | _BASE_NAMES | _ERROR_NAMES | _TABLE_NAMES | set(_class_index()))
