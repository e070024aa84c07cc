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

from medunlearn.utils.lazy import lazy_exports

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
__getattr__, __dir__ = lazy_exports(__name__, _MODULES)
