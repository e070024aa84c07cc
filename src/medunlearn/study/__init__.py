"""``medunlearn study``: a grid of unlearning runs (method × forget config × seed) from one study file.

The study fine-tunes once, evaluates the fine-tuned model on every forget config, then unlearns and
evaluates every cell, through the Python API (:func:`medunlearn.run_finetune`,
:func:`medunlearn.run_unlearning`, :func:`medunlearn.evaluate_unlearning`). Every stage is fingerprinted:
finished stages are skipped, a killed study resumes, a changed setting reruns only the cells it affects::

    from medunlearn.study import run_study
    result = run_study("recipes/studies/mini.yaml", "runs/mini", jobs=2)
"""

from __future__ import annotations

from medunlearn.study.collect import collect_results
from medunlearn.study.config import StudyConfig, StudyConfigError, load_study, parse_study
from medunlearn.study.run import run_study

__all__ = ["StudyConfig", "StudyConfigError", "collect_results", "load_study", "parse_study", "run_study"]
