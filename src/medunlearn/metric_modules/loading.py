"""``load_metric(name)``: medunlearn's ``evaluate`` modules from an installed wheel or from the repository.

Where a module is looked up, first match wins:

1. inside the installed package, ``medunlearn/_metric_modules/<name>/<name>.py`` (the wheel ships the
   repository's ``metrics/`` folder there through hatch's ``force-include``);
2. in the repository checkout, ``<repo>/metrics/<name>/<name>.py`` (editable installs and the test suite).

The folder is handed to ``evaluate.load(folder)``, evaluate's documented way to load a local module, which
works offline. ``evaluate`` is imported only here, lazily, because importing it takes seconds.

A bare ``evaluate.load("disease_leakage")`` works offline from any folder once the modules are in evaluate's
module cache: ``medunlearn metrics install`` or
:func:`medunlearn.metric_modules.evaluate_cache.register_evaluate_modules`
(evaluate looks for ``./disease_leakage/disease_leakage.py``, then asks the Hub for
``evaluate-metric/disease_leakage``, then takes its cached copy). Once a module is pushed to a Hub Space it
also loads as ``evaluate.load("<owner>/disease_leakage")``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from medunlearn.errors import MedunlearnError

__all__ = ["available_metrics", "load_metric", "metric_module_path"]

_PACKAGED_FOLDER = "_metric_modules"
_REPOSITORY_FOLDER = Path(__file__).resolve().parents[3] / "metrics"


class UnknownMetricError(MedunlearnError, ValueError):
    """No medunlearn metric module has this name."""


def _search_roots() -> list[Path]:
    roots = []
    packaged = resources.files("medunlearn") / _PACKAGED_FOLDER
    if packaged.is_dir():
        roots.append(Path(str(packaged)))
    if _REPOSITORY_FOLDER.is_dir():
        roots.append(_REPOSITORY_FOLDER)
    return roots


def available_metrics() -> list[str]:
    """Names of the metric modules that :func:`load_metric` can find.

    >>> {"disease_leakage", "degeneration", "forget_quality"} <= set(available_metrics())
    True
    """
    names = {
        folder.name
        for root in _search_roots()
        for folder in root.iterdir()
        if (folder / f"{folder.name}.py").is_file()
    }
    return sorted(names)


def metric_module_path(name: str) -> Path:
    """Folder of the ``evaluate`` module ``name`` (see the module docstring for the search order)."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise UnknownMetricError(f"metric name must be a plain module name, got {name!r}")
    for root in _search_roots():
        folder = root / name
        if (folder / f"{name}.py").is_file():
            return folder
    raise UnknownMetricError(
        f"unknown metric {name!r}; available: {', '.join(available_metrics()) or 'none'}"
    )


def load_metric(name: str, **kwargs):
    """``evaluate.load`` of medunlearn's module ``name``; ``kwargs`` go to ``evaluate.load``.

    >>> metric = load_metric("disease_leakage")
    >>> metric.compute(predictions=["It was melanoma."], references=[["melanoma"]])["leakage_score"]
    1.0
    """
    folder = metric_module_path(name)
    import evaluate

    return evaluate.load(str(folder), **kwargs)
