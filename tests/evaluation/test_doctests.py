"""The doctest examples in ``src/medunlearn/evaluation/*.py`` run (discovered, so new modules are covered)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

MODULES = sorted((Path(__file__).resolve().parents[2] / "src" / "medunlearn" / "evaluation").glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_module_doctests(path):
    name = "medunlearn.evaluation" if path.stem == "__init__" else f"medunlearn.evaluation.{path.stem}"
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, module.__name__):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
