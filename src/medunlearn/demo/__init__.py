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

from medunlearn.utils.lazy import lazy_exports

# Imported on first use (PEP 562): `medunlearn demo --help` reads only the settings, not the stages (pandas,
# the evaluation, the BioDivergence builder).
_HOMES = {
    **dict.fromkeys(
        (
            "DEGENERATE_SHARE",
            "ForgetEvaluation",
            "build_base_model",
            "collateral_finding",
            "comparison_row",
            "comparison_table",
            "evaluate_model",
            "finding_sentence",
            "finetune_model",
            "forget_cell",
            "model_utility",
            "unlearn_model",
        ),
        ".amnesia",
    ),
    **dict.fromkeys(
        ("BIODIVERGENCE_METRICS", "biodivergence_table", "gap_sentence", "run_biodivergence", "split_gap"),
        ".biodivergence",
    ),
    "run_demo": ".run",
    **dict.fromkeys(
        (
            "BEFORE_NAME",
            "DISEASE_FORGET",
            "DISPLAY_NAMES",
            "FULL",
            "QUICK",
            "RANDOM_FORGET",
            "RANDOM_METHODS",
            "DemoContext",
            "DemoError",
            "DemoSettings",
        ),
        ".settings",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)

__all__ = sorted(_HOMES)
