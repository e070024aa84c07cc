"""``medunlearn demo``: the whole AMNESIA study, then a BioDivergence split comparison, on a laptop CPU.

AMNESIA part (:mod:`medunlearn.demo.amnesia`): build the fictitious cohort's folder and audit it → fine-tune
a ``tiny-llama`` sized to memorise the cohort (notes pretraining, then QA SFT) → unlearn the random
``forget_10`` split with the paper's four methods (GradDiff, KL-Min, SimNPO, RMU) and the disease-level
``disease_cancer_forget_10`` split with GradDiff (and SimNPO in the full run) → evaluate every model, with
the fine-tuned model as ``before`` for AFE, and the fine-tuned model itself as the "no unlearning" row →
print the comparison table, write the report folder and say, from the numbers, whether the paper's
collateral-damage finding shows up in this run.

BioDivergence part (:mod:`medunlearn.demo.biodivergence`): fictitious pair pool → v1.0 (article-disjoint) and
v1.0-pairlevel splits → audit → majority and lexical baselines → metric table with the pair-level minus
article-disjoint gap.

:mod:`medunlearn.demo.settings` holds the sizes of a run (``FULL``, ``QUICK``) and the context every stage
shares; :mod:`medunlearn.demo.run` runs the stages in order (:func:`run_demo`).
"""

from __future__ import annotations

from medunlearn.demo.amnesia import (
    DEGENERATE_SHARE,
    ForgetEvaluation,
    build_base_model,
    collateral_finding,
    comparison_row,
    comparison_table,
    evaluate_model,
    finding_sentence,
    finetune_model,
    forget_cell,
    model_utility,
    unlearn_model,
)
from medunlearn.demo.biodivergence import (
    BIODIVERGENCE_METRICS,
    biodivergence_table,
    gap_sentence,
    run_biodivergence,
    split_gap,
)
from medunlearn.demo.run import run_demo
from medunlearn.demo.settings import (
    BEFORE_NAME,
    DISEASE_FORGET,
    DISPLAY_NAMES,
    FULL,
    QUICK,
    RANDOM_FORGET,
    RANDOM_METHODS,
    DemoContext,
    DemoError,
    DemoSettings,
)

__all__ = [
    "BEFORE_NAME",
    "BIODIVERGENCE_METRICS",
    "DEGENERATE_SHARE",
    "DISEASE_FORGET",
    "DISPLAY_NAMES",
    "FULL",
    "QUICK",
    "RANDOM_FORGET",
    "RANDOM_METHODS",
    "DemoContext",
    "DemoError",
    "DemoSettings",
    "ForgetEvaluation",
    "biodivergence_table",
    "build_base_model",
    "collateral_finding",
    "comparison_row",
    "comparison_table",
    "evaluate_model",
    "finding_sentence",
    "finetune_model",
    "forget_cell",
    "gap_sentence",
    "model_utility",
    "run_biodivergence",
    "run_demo",
    "split_gap",
    "unlearn_model",
]
