"""Every ``evaluate`` module in ``metrics/`` follows evaluate's own module conventions.

What evaluate 0.4.6's common test (``tests/test_metric_common.py``, ``LocalModuleTest.test_load``) checks of
each module: it loads through ``evaluate.loading.evaluation_module_factory`` and ``import_main_class``, its
``_compute`` takes no ``**kwargs``, and its doctests run with more than one example (run here by
``test_doctests.py``). Plus what evaluate's module template (``evaluate-cli create``; ``metrics/rouge``) lays
out: ``_DESCRIPTION``, ``_KWARGS_DESCRIPTION`` (Args / Returns / Examples) and ``_CITATION``, the class
docstring made from them, an ``_info()`` with description, citation, inputs description and typed
``features``, a ``requirements.txt`` and a metric card ``README.md`` with YAML metadata. Discovered, so a
module added later is checked too.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
from pathlib import Path

import pytest
import yaml

REPOSITORY = Path(__file__).resolve().parents[2]
MODULE_FILES = sorted(
    path for path in (REPOSITORY / "metrics").glob("*/*.py") if path.stem == path.parent.name
)


def load_module_and_class(path: Path):
    """As evaluate's common test does: the factory's importable module, then its main class."""
    import evaluate

    importable = evaluate.loading.evaluation_module_factory(str(path.parent), module_type="metric")
    module = importlib.import_module(importable.module_path)
    return module, evaluate.loading.import_main_class(module.__name__)


def test_all_nine_modules_are_discovered():
    assert len(MODULE_FILES) == 9, [path.stem for path in MODULE_FILES]


@pytest.mark.parametrize("path", MODULE_FILES, ids=lambda path: path.stem)
def test_compute_names_its_parameters(path):
    _, metric_class = load_module_and_class(path)
    parameters = inspect.signature(metric_class._compute).parameters
    variadic = [p.name for p in parameters.values() if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    assert not variadic, (
        f"{path.stem}._compute takes *{variadic}: name each parameter (evaluate's convention)"
    )
    # evaluate calls _compute(**inputs, **compute_kwargs): every feature is a parameter, the rest are
    # optional.
    features = metric_class()._feature_names()
    assert set(features) <= set(parameters), (
        f"{path.stem}: features {features}, parameters {list(parameters)}"
    )
    required = [
        name
        for name, p in parameters.items()
        if name not in ("self", *features) and p.default is inspect.Parameter.empty
    ]
    assert not required, f"{path.stem}._compute: arguments beyond the inputs need a default: {required}"


@pytest.mark.parametrize("path", MODULE_FILES, ids=lambda path: path.stem)
def test_module_layout_and_info(path):
    import datasets
    import evaluate

    module, metric_class = load_module_and_class(path)
    assert metric_class is not None and issubclass(metric_class, evaluate.Metric)
    for constant in ("_DESCRIPTION", "_KWARGS_DESCRIPTION", "_CITATION"):
        assert isinstance(getattr(module, constant, None), str) and getattr(module, constant).strip(), (
            constant
        )
    for section in ("Args:", "Returns:", "Examples:"):
        assert section in module._KWARGS_DESCRIPTION, f"{path.stem}: _KWARGS_DESCRIPTION lacks {section}"
    assert module._DESCRIPTION in metric_class.__doc__  # evaluate.utils.file_utils.add_start_docstrings

    metric = metric_class()
    assert metric.name == path.stem
    assert metric.description and metric.citation and metric.inputs_description
    features = metric.features if isinstance(metric.features, list) else [metric.features]
    assert features and all(isinstance(f, datasets.Features) and f for f in features), (
        f"{path.stem}: features"
    )

    examples = sum(len(test.examples) for test in doctest.DocTestFinder().find(module))
    assert examples > 1, f"{path.stem}: evaluate's common test wants more than one doctest example"


@pytest.mark.parametrize("path", MODULE_FILES, ids=lambda path: path.stem)
def test_requirements_and_metric_card(path):
    requirements = (path.parent / "requirements.txt").read_text()
    assert any(line.startswith("evaluate") for line in requirements.splitlines())
    card = (path.parent / "README.md").read_text()
    assert card.startswith("---\n"), f"{path.stem}: the metric card starts with YAML metadata"
    metadata = yaml.safe_load(card.split("---\n")[1])
    assert metadata["title"] and metadata["description"]
    assert {"evaluate", "metric"} <= set(metadata["tags"])
