"""The MUSE metric set from the runner's outputs: which prompts and texts to run, and how their outputs
become ``knowmem_f``, ``knowmem_r``, ``verbmem_f``, ``privleak`` and extraction strength.

What the runner does (and nothing else): for :func:`muse_examples`' rows,

* ``knowmem_forget`` / ``knowmem_retain``: generate greedily from ``prompt`` (``max_new_tokens`` and stop
  strings from :class:`~medunlearn.muse.conventions.MuseConventions`), decode the new tokens with special
  tokens skipped;
* ``verbmem``: generate greedily from ``prompt`` (128 new tokens), decode likewise; and one teacher-forced
  pass over ``prompt + " " + gt`` (the reference's ``insert_space``,
  ``open-unlearning@d3d7cf9 configs/data/datasets/MUSE_forget_verbmem.yaml:11``) giving, per ``gt`` token,
  whether the argmax prediction equals it;
* ``privleak_forget`` / ``privleak_holdout``: one teacher-forced pass over ``text`` giving each token's
  log-prob (all tokens after the first: the reference never scores position 0,
  ``src/data/utils.py:173-176``).

:func:`score_muse` turns those into the summary, under a preset's conventions; the retain model's AUC comes
from the same pass on the retain model (:func:`privleak_auc`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from medunlearn.errors import InputError
from medunlearn.metrics import knowledge_memorization as knowmem
from medunlearn.metrics import privleak as leak
from medunlearn.metrics import verbatim_memorization as verbmem
from medunlearn.metrics.probability import pad_token_values
from medunlearn.muse.conventions import MuseConventions
from medunlearn.muse.data import MuseFolder, load_muse_split, open_muse_folder

# Our metric name -> OpenUnlearning's (open-unlearning@d3d7cf9 configs/eval/muse.yaml:6-10).
REFERENCE_NAMES = {
    "knowmem_f": "forget_knowmem_ROUGE",
    "knowmem_r": "retain_knowmem_ROUGE",
    "verbmem_f": "forget_verbmem_ROUGE",
    "privleak": "privleak",
    "extraction_strength": "extraction_strength",
}


def muse_examples(folder) -> dict[str, list[dict]]:
    """The rows the runner runs, by role (``prompt``/``reference`` for generation, ``text`` for scoring)."""
    muse = folder if isinstance(folder, MuseFolder) else open_muse_folder(folder)

    def qa_rows(questions: str, icl: str) -> list[dict]:
        shots = load_muse_split(muse, "knowmem", icl)
        return [
            {"prompt": knowmem.few_shot_prompt(shots, row["question"]), "reference": row["answer"]}
            for row in load_muse_split(muse, "knowmem", questions)
        ]

    return {
        "knowmem_forget": qa_rows("forget_qa", "forget_qa_icl"),
        "knowmem_retain": qa_rows("retain_qa", "retain_qa_icl"),
        "verbmem": [
            {"prompt": row["prompt"], "reference": row["gt"]}
            for row in load_muse_split(muse, "verbmem", "forget")
        ],
        "privleak_forget": load_muse_split(muse, "privleak", "forget"),
        "privleak_holdout": load_muse_split(muse, "privleak", "holdout"),
    }


@dataclass
class MuseOutputs:
    """What the runner produced for one model (row order as :func:`muse_examples`).

    ``*_references`` are the texts ROUGE compares with: the rows' ``reference`` (ours) or, under
    ``reference_ground_truth``, :func:`~medunlearn.metrics.verbatim_memorization.reference_ground_truth` of
    the runner's decodes. ``verbmem_argmax_match`` has one bool per ``gt`` token; ``privleak_*_logprobs`` one
    log-prob per scored text token.
    """

    knowmem_forget_generations: list[str]
    knowmem_forget_references: list[str]
    knowmem_retain_generations: list[str]
    knowmem_retain_references: list[str]
    verbmem_generations: list[str]
    verbmem_references: list[str]
    verbmem_argmax_match: list[list[bool]]
    privleak_forget_logprobs: list[list[float]]
    privleak_holdout_logprobs: list[list[float]]
    eos_text: str | None = field(default=None)


def _padded(rows, name: str, dtype) -> tuple[np.ndarray, np.ndarray]:
    if not rows:
        raise InputError(f"MUSE outputs: {name} is empty")
    return pad_token_values(rows, dtype=dtype)


def min_k_row_scores(rows, conventions: MuseConventions, name: str = "privleak logprobs") -> np.ndarray:
    """Each text's Min-K% score (higher: less likely a member) from its scored tokens' log-probs."""
    values, mask = _padded(rows, name, np.float64)
    return leak.min_k_scores(
        values,
        mask,
        k=conventions.min_k,
        count=conventions.min_k_count,
        drop_last_token=conventions.drop_last_token,
    )


def privleak_auc(forget_logprobs, holdout_logprobs, conventions: MuseConventions) -> float:
    """The Min-K% AUC of forget (members) vs holdout texts: also what a retain model contributes."""
    forget = min_k_row_scores(forget_logprobs, conventions, "privleak_forget_logprobs")
    holdout = min_k_row_scores(holdout_logprobs, conventions, "privleak_holdout_logprobs")
    return leak.privleak_summary(forget, holdout)["auc"]


def score_muse(outputs: MuseOutputs, conventions: MuseConventions, retain_auc: float | None = None) -> dict:
    """The MUSE summary: ``metrics`` (our names), ``open_unlearning`` (the reference's), ``per_example``."""
    eos = outputs.eos_text
    per_example = {
        "knowmem_f": knowmem.knowmem_scores(
            outputs.knowmem_forget_generations,
            outputs.knowmem_forget_references,
            stop_strings=conventions.knowmem_stop_strings,
            eos_text=eos,
        ),
        "knowmem_r": knowmem.knowmem_scores(
            outputs.knowmem_retain_generations,
            outputs.knowmem_retain_references,
            stop_strings=conventions.knowmem_stop_strings,
            eos_text=eos,
        ),
        "verbmem_f": verbmem.verbmem_scores(
            outputs.verbmem_generations, outputs.verbmem_references, eos_text=eos
        ),
    }
    matches, mask = _padded(outputs.verbmem_argmax_match, "verbmem_argmax_match", bool)
    per_example["extraction_strength"] = verbmem.extraction_strength_scores(
        matches,
        mask,
        drop_last_token=conventions.drop_last_token,
        floor_at_one_token=conventions.es_floor_at_one_token,
    )
    auc = privleak_auc(outputs.privleak_forget_logprobs, outputs.privleak_holdout_logprobs, conventions)
    reference = retain_auc if retain_auc is not None else conventions.default_retain_auc
    leak_value = None
    if reference is not None:
        leak_value = leak.privleak_percent(auc, reference, epsilon=conventions.privleak_epsilon)
    metrics = {name: float(np.mean(values)) for name, values in per_example.items()}
    metrics.update(mia_min_k_auc=auc, retain_auc=reference, privleak=leak_value)
    return {
        "conventions": conventions.to_dict(),
        "metrics": metrics,
        "open_unlearning": {theirs: metrics[ours] for ours, theirs in REFERENCE_NAMES.items()},
        "per_example": {name: values.tolist() for name, values in per_example.items()},
    }


__all__ = [
    "REFERENCE_NAMES",
    "MuseOutputs",
    "min_k_row_scores",
    "muse_examples",
    "privleak_auc",
    "score_muse",
]
