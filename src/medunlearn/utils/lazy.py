"""Names a package imports on first use (PEP 562), so that ``import medunlearn.<package>`` and a command's
``--help`` stay light (no torch, no pandas) until a name is asked for."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(package: str, homes: Mapping[str, str]) -> tuple[Callable, Callable]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``, importing each name of ``homes`` from
    its module when first asked for.

    ``homes`` maps a name to the module that defines it: absolute (``"medunlearn.models"``) or relative to
    ``package`` (``".data"``), as :func:`importlib.import_module` reads it.

    >>> __getattr__, __dir__ = lazy_exports("json", {"JSONEncoder": ".encoder"})
    >>> __getattr__("JSONEncoder").__module__
    'json.encoder'
    >>> __getattr__("nothing")
    Traceback (most recent call last):
    AttributeError: module 'json' has no attribute 'nothing'
    """

    def __getattr__(name: str):
        if name in homes:
            return getattr(importlib.import_module(homes[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__
