"""Evaluation: populations of an AMNESIA forget config, the runner (model → per-example outputs, cached to
disk), scoring (outputs → metrics, no model needed) and the report (table, JSON, plots).

>>> from medunlearn.evaluation import evaluate_unlearning, RunnerConfig  # doctest: +SKIP
>>> evaluate_unlearning(  # doctest: +SKIP
...     "ckpt/grad_diff", "amnesia", "forget_10", "evals/grad_diff", before="ckpt/finetuned"
... )
"""

from medunlearn.evaluation.pipeline import evaluate_unlearning, score_evaluation
from medunlearn.evaluation.populations import PopulationConfig, build_populations, load_populations
from medunlearn.evaluation.report import write_report
from medunlearn.evaluation.runner import RunnerConfig, read_outputs, run_model

__all__ = [
    "PopulationConfig",
    "RunnerConfig",
    "build_populations",
    "evaluate_unlearning",
    "load_populations",
    "read_outputs",
    "run_model",
    "score_evaluation",
    "write_report",
]
