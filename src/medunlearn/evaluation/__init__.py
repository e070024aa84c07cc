"""Evaluation: populations of an AMNESIA forget config, the runner (model → per-example outputs, cached to
disk), scoring (outputs → metrics, no model needed) and the report (table, JSON, plots).

>>> from medunlearn.evaluation import evaluate_unlearning, RunnerConfig  # doctest: +SKIP
>>> evaluate_unlearning(  # doctest: +SKIP
...     "ckpt/grad_diff", "amnesia", "forget_10", "evals/grad_diff", before="ckpt/finetuned"
... )

Names are imported lazily: ``import medunlearn.evaluation.runner`` (``RunnerConfig``, which the commands'
parsers read) does not import pandas or the metric stack until an evaluation is asked for.
"""

from __future__ import annotations

import importlib

_MODULES = {
    "evaluate_unlearning": "medunlearn.evaluation.pipeline",
    "score_evaluation": "medunlearn.evaluation.pipeline",
    "PopulationConfig": "medunlearn.evaluation.populations",
    "build_populations": "medunlearn.evaluation.populations",
    "load_populations": "medunlearn.evaluation.populations",
    "write_report": "medunlearn.evaluation.report",
    "RunnerConfig": "medunlearn.evaluation.runner",
    "read_outputs": "medunlearn.evaluation.runner",
    "run_model": "medunlearn.evaluation.runner",
}

__all__ = sorted(_MODULES)


def __getattr__(name: str):
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'medunlearn.evaluation' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULES))
