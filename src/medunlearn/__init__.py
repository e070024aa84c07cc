"""medunlearn: medical machine unlearning (AMNESIA) and biomedical contradiction analysis (BioDivergence).

The Python API (what every ``medunlearn`` command calls)::

    from medunlearn import build_amnesia, run_finetune, run_unlearning, evaluate_unlearning, report

- :func:`build_amnesia` / :func:`build_biodivergence`: benchmark folders that ``datasets.load_dataset`` reads;
- :func:`run_finetune` / :func:`run_unlearning`: the trainers, with :class:`ModelArguments`;
- :func:`evaluate_unlearning` (AMNESIA) / :func:`evaluate_tofu` (TOFU): evaluation folders;
- :func:`report`: table, JSON and plots from evaluation folders.

Names are imported on first use, so ``import medunlearn`` stays light (no torch).
"""

from __future__ import annotations

from medunlearn.utils.lazy import lazy_exports
from medunlearn.utils.logs import hold_back_bitsandbytes_kernel_warning

__version__ = "0.1.0.dev0"

# transformers imports peft, which imports bitsandbytes, which logs a missing optional CPU 4-bit kernel on
# every run; held back until a run asks for 4-bit weights (medunlearn/utils/logs.py). Logging only: imports
# nothing.
hold_back_bitsandbytes_kernel_warning()

_API = {
    "build_amnesia": "medunlearn.amnesia.pipeline",
    "build_amnesia_from_notes": "medunlearn.amnesia.pipeline",
    "ConstructionConfig": "medunlearn.amnesia.sources.llm_built",
    "build_biodivergence": "medunlearn.biodivergence.build",
    "PoolSource": "medunlearn.biodivergence.build",
    "evaluate_biodivergence": "medunlearn.biodivergence.evaluate",
    "ModelArguments": "medunlearn.models",
    "run_finetune": "medunlearn.unlearn.run",
    "run_unlearning": "medunlearn.unlearn.run",
    "FinetuneArguments": "medunlearn.unlearn.run",
    "UnlearningDataArguments": "medunlearn.unlearn.run",
    "make_method_config": "medunlearn.unlearn.run",
    "evaluate_unlearning": "medunlearn.evaluation.pipeline",
    "evaluate_tofu": "medunlearn.tofu.evaluate",
    "run_study": "medunlearn.study.run",
    "MedunlearnError": "medunlearn.errors",
    # Writes our modules into evaluate's cache so that evaluate.load("disease_leakage") works by name.
    "register_evaluate_modules": "medunlearn.metric_modules.evaluate_cache",
}


def report(eval_dirs, out_dir, **kwargs) -> dict:
    """Table, ``report.json`` and plots comparing evaluation folders (what ``medunlearn report`` writes)."""
    from medunlearn.evaluation.report import write_report

    return write_report(eval_dirs, out_dir, **kwargs)


def load_metric(name: str, **kwargs):
    """Load one of medunlearn's metrics as an ``evaluate`` module (works from an installed wheel).

    >>> import medunlearn
    >>> medunlearn.load_metric("disease_leakage")  # doctest: +SKIP
    """
    from medunlearn.metric_modules.loading import load_metric as _load

    return _load(name, **kwargs)


# `from medunlearn import *` and the API index (docs/api/index.md): the lazily imported API and the
# two functions defined here.
__all__ = sorted([*_API, "load_metric", "report"])


__getattr__, __dir__ = lazy_exports(__name__, _API)
