"""The demo's notes part [ours]: one method unlearns the disease-level forget patients' notes
(``--forget-on notes``, :mod:`medunlearn.unlearn.sources`), and its evaluation scores verbatim memorization of
the patients' notes (:mod:`medunlearn.evaluation.notes_memorization`) with the fine-tuned model as ``before``:
the forget patients' notes beside the retained same-disease and out-of-disease patients', before and after,
each change with its patient-cluster interval, and the notes membership AUC against the folder's
``holdout_notes``.

The pure pieces (:func:`notes_sentence`, :func:`notes_table`) read an evaluation summary's
``notes_memorization`` section and are tested on hand-made numbers.
"""

from __future__ import annotations

from pathlib import Path

from medunlearn.demo.settings import DISPLAY_NAMES, DemoContext, DemoMethod
from medunlearn.evaluation.notes_report import (
    POPULATION_LABELS,
    notes_rows,
    privleak_text,
    render_notes_table,
)
from medunlearn.models import ModelArguments
from medunlearn.unlearn.run import UnlearningDataArguments, make_method_config, run_unlearning
from medunlearn.unlearn.sources import corpus_format


def notes_run_name(method: DemoMethod, forget: str) -> str:
    """The name of the notes run in the tables: ``GradDiff (notes) [disease_cancer_forget_10]``."""
    return f"{DISPLAY_NAMES[method]} (notes) [{forget}]"


def unlearn_notes(context: DemoContext, model: Path, data_dir: Path, forget: str, out: Path) -> Path:
    """``settings.notes_method`` unlearning the forget patients' notes from the fine-tuned ``model``, at the
    method's demo learning rate and steps; quiet (its evaluation has the stage's bar)."""
    settings = context.settings
    method = settings.notes_method
    fields = {
        "learning_rate": settings.unlearn_learning_rates[method],
        "logging_steps": 100,
        "seed": context.seed,
        "disable_tqdm": True,
        "data_format": corpus_format("amnesia", "notes"),  # raw text, as fine-tuning's notes stage read it
    }
    if method == "rmu":  # as unlearn_model: the last layer of the small model
        fields["layer"] = settings.num_hidden_layers - 1
    if settings.unlearn_max_steps is not None:
        fields["max_steps"] = settings.unlearn_max_steps
    config = make_method_config(method, out, **fields)
    data_args = UnlearningDataArguments(str(data_dir), forget, forget_on="notes")
    return run_unlearning(config, ModelArguments(str(model)), data_args, overwrite=True)


# ours: below this verbmem before unlearning, the fine-tuned model reproduced too little of the notes for a
# fall to mean anything (a tiny model trained for minutes learns the QA, not the notes' wording).
LITTLE_MEMORIZED = 0.1


def _change_text(interval: dict | None) -> str:
    if interval is None:
        return "Δ –"
    return f"Δ {interval['estimate']:+.3f} [{interval['low']:+.3f}, {interval['high']:+.3f}]"


def notes_sentence(name: str, section: dict) -> str:
    """What the notes table says, in one sentence: the forget patients' notes verbmem before → after with the
    change's interval, the retained populations' changes beside it, the membership AUC, and the intervals'
    resampling."""
    populations = section.get("populations", {})
    forget = populations.get("forget") or {}
    if not forget.get("n") or forget.get("verbmem_before") is None:
        return f"{name}: no forget patient's note was scored before and after unlearning."
    before, after = forget["verbmem_before"]["estimate"], forget["verbmem"]["estimate"]
    direction = "fell" if after < before else "did not fall"
    retained = "; ".join(
        f"{POPULATION_LABELS[key]} {_change_text(populations[key].get('verbmem_change'))}"
        for key in ("retain_same_disease", "retain_out_of_disease")
        if (populations.get(key) or {}).get("n")
    )
    bootstrap = section.get("bootstrap") or {}
    sentence = (
        f"{name}: the forget patients' notes verbmem (ROUGE-L F1 of the greedy continuation) {direction} "
        f"from {before:.3f} to {after:.3f} ({_change_text(forget.get('verbmem_change'))}); "
        f"{retained or 'no retained patient scored'}. {privleak_text(section.get('privleak', {}))}. "
        f"Intervals: {bootstrap.get('level', 0.95):.0%} patient-cluster bootstrap, "
        f"{bootstrap.get('n_resamples')} resamples."
    )
    if before < LITTLE_MEMORIZED:
        sentence += (
            f" Caution: before unlearning the model reproduced little of these notes (verbmem < "
            f"{LITTLE_MEMORIZED}), so there was little verbatim memory to forget at this model size."
        )
    return sentence


def notes_table(name: str, section: dict):
    """The notes verbmem table of one evaluation (:func:`~medunlearn.evaluation.notes_report.notes_rows`)."""
    level = (section.get("bootstrap") or {}).get("level", 0.95)
    return render_notes_table(notes_rows(name, section), level)


__all__ = [
    "LITTLE_MEMORIZED",
    "notes_run_name",
    "notes_sentence",
    "notes_table",
    "unlearn_notes",
]
