"""Run the doctests of every metric source file: the pure functions in ``src/medunlearn/metrics/*.py`` and the
``evaluate`` modules in ``metrics/*/*.py`` — discovered, so modules added later are covered too."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
PURE_MODULES = sorted((REPOSITORY / "src" / "medunlearn" / "metrics").glob("*.py"))
EVALUATE_MODULES = sorted(
    path for path in (REPOSITORY / "metrics").glob("*/*.py") if path.stem == path.parent.name
)


def _run_doctests(module) -> None:
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, module.__name__):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, (
        f"{results.failed} doctest example(s) failed in {module.__file__} (output above)"
    )


def test_discovery_finds_the_required_modules():
    names = {path.stem for path in EVALUATE_MODULES}
    assert {
        "disease_leakage",
        "degeneration",
        "answer_forgetting",
        "model_utility",
        "forget_quality",
    } <= names
    assert {"disease_leakage", "validation", "rouge"} <= {path.stem for path in PURE_MODULES}


@pytest.mark.parametrize("path", PURE_MODULES, ids=lambda path: path.stem)
def test_pure_function_doctests(path):
    if path.stem == "__init__":
        module = importlib.import_module("medunlearn.metrics")
    else:
        module = importlib.import_module(f"medunlearn.metrics.{path.stem}")
    _run_doctests(module)


@pytest.mark.parametrize("path", EVALUATE_MODULES, ids=lambda path: path.stem)
def test_evaluate_module_doctests(path):
    spec = importlib.util.spec_from_file_location(f"_medunlearn_metric_module_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _run_doctests(module)
