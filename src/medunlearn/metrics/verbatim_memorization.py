"""MUSE C1, verbatim memorization: ROUGE-L F1 of the greedy continuation of a forget-text prefix, and the
extraction strength of the forget continuation [ref: Shi et al. 2024, MUSE; OpenUnlearning at d3d7cf9].

Metric card
-----------
**Description.** ``verbmem/forget`` holds a ``prompt`` (a prefix of a forget document) and ``gt`` (its true
continuation). The model continues the prompt greedily for 128 new tokens
(``open-unlearning@d3d7cf9 configs/eval/muse_metrics/forget_verbmem_ROUGE.yaml:19-20``; greedy from
``configs/generation/default.yaml:1``);
the continuation is cut at the first stop string and stripped, then scored against ``gt`` with ROUGE-L F1,
Porter stemming on (``src/evals/metrics/utils.py:254-266``, ``rouge_scorer.RougeScorer(["rouge1", "rougeL"],
use_stemmer=True)``, ``score(gt, gen)["rougeL"].fmeasure``). ``forget_verbmem_ROUGE`` is the mean over rows
(``src/evals/metrics/memorization.py:93-104``). The same ROUGE and cut serve knowmem
(:mod:`medunlearn.metrics.knowledge_memorization`).

**Inputs.** ``generations`` (the decoded new tokens, special tokens skipped), ``ground_truths`` (strings);
for extraction strength the runner's teacher-forced ``argmax_match`` and ``mask`` over the completion tokens
(:mod:`medunlearn.metrics.probability`'s convention).

**Outputs.** Per-row float arrays; ROUGE-L F1 and extraction strength are in [0, 1], higher = more
memorized (an unlearned model should come near the retain model's value, not 0).

**Formulas.**

* cut: with ``stops = [eos_text] + stop_strings``, for each ``s`` in that order, ``text = text.split(s)[0]``
  when ``s`` occurs; then ``text.strip()`` (``src/evals/metrics/utils.py:306-316``).
* ROUGE-L F1: ``2PR / (P + R)`` with ``P = LCS / |gen|``, ``R = LCS / |gt|`` over stemmed word tokens.
* Extraction strength: ``ES = 1 - k/|y|``, ``k`` the smallest index with ``argmax[k:] == y[k:]``
  (``src/evals/metrics/memorization.py:222-269``). **Quirk [ref]:** the loop ``for k in range(|y|)`` ends at
  ``k = |y| - 1`` when no suffix matches, so the reference's ES is never below ``1/|y|``
  (``memorization.py:237-253``); with ``floor_at_one_token=False`` (ours) ES is 0 when even the last token
  is wrong. Which tokens count: :mod:`medunlearn.metrics.completion_tokens`.
* Ground truth: ours is the dataset's ``gt`` stripped. The reference decodes the labels and removes the
  decoded prompt with ``str.replace`` (``src/evals/metrics/utils.py:271-281``):
  :func:`reference_ground_truth` reproduces it from the runner's decodes.

**Limitations.** ROUGE counts surface overlap: a paraphrase scores low, a memorized fragment in other order
scores partly. Token-wise values depend on the tokenizer. 128 tokens bound how much of ``gt`` can be matched.

**Citation.** Shi, Lee, Huang, Malladi, Zhao, Holtzman, Liu, Zettlemoyer, Smith, Zhang. *MUSE: Machine
Unlearning Six-Way Evaluation for Language Models.* arXiv:2407.06460, 2024.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from medunlearn.metrics import probability
from medunlearn.metrics.completion_tokens import scored_token_mask
from medunlearn.metrics.rouge import rouge_l
from medunlearn.metrics.validation import check_same_length, check_sequence

__all__ = [
    "VERBMEM_MAX_NEW_TOKENS",
    "cut_generation",
    "extraction_strength_scores",
    "reference_ground_truth",
    "rouge_l_f1",
    "verbmem_scores",
]

VERBMEM_MAX_NEW_TOKENS = 128  # open-unlearning@d3d7cf9 configs/eval/muse_metrics/forget_verbmem_ROUGE.yaml:20


def cut_generation(text: str, stop_strings: Sequence[str] = (), eos_text: str | None = None) -> str:
    r"""The generation up to its first stop string (EOS text first, then ``stop_strings`` in order), stripped.

    >>> cut_generation(" Paris\n\nQuestion: Who", ["\n\n", "\nQuestion", "Question:"], eos_text="</s>")
    'Paris'
    >>> cut_generation("no stop here ")
    'no stop here'
    """
    for stop in [eos_text, *stop_strings]:
        if stop and stop in text:
            text = text.split(stop)[0]
    return text.strip()


def reference_ground_truth(decoded_labels: str, decoded_prompt: str) -> str:
    r"""The reference's ROUGE ground truth: the decoded labels with the decoded prompt removed, stripped.

    >>> reference_ground_truth("Question: Who?\nAnswer: Ada", "Question: Who?\nAnswer: ")
    'Ada'
    """
    return decoded_labels.replace(decoded_prompt, "").strip()


def rouge_l_f1(generations, ground_truths) -> np.ndarray:
    """Per-row ROUGE-L F1 with Porter stemming (``rouge_score``), generation against ground truth.

    >>> rouge_l_f1(["the cats sat"], ["the cat sat down"]).round(4).tolist()
    [0.8571]
    """
    return rouge_l(generations, ground_truths, use_stemmer=True)["f1"]


def verbmem_scores(generations, ground_truths, *, eos_text: str | None = None) -> np.ndarray:
    """Per-row verbmem ROUGE-L F1: each generation cut (:func:`cut_generation`, no stop strings in the verbmem
    config, only the EOS text), then :func:`rouge_l_f1` against its ``gt``.

    >>> verbmem_scores(["plans for a bridge</s>junk"], ["plans for a bridge"], eos_text="</s>").tolist()
    [1.0]
    """
    check_sequence("generations", generations)
    check_sequence("ground_truths", ground_truths)
    check_same_length(generations=generations, ground_truths=ground_truths)
    cut = [cut_generation(str(text), (), eos_text) for text in generations]
    return rouge_l_f1(cut, [str(truth).strip() for truth in ground_truths])


def extraction_strength_scores(
    argmax_match, mask, *, drop_last_token: bool = False, floor_at_one_token: bool = False
) -> np.ndarray:
    """Per-row extraction strength over the scored completion tokens.

    ``drop_last_token`` and ``floor_at_one_token`` are the reference's two quirks (both True under the
    ``open-unlearning`` preset); a row left without tokens scores 0, as the reference's.

    >>> match = [[False, True, True, False], [True, True, True, True]]
    >>> extraction_strength_scores(match, [[True] * 4] * 2).tolist()
    [0.0, 1.0]
    >>> reference = {"drop_last_token": True, "floor_at_one_token": True}
    >>> extraction_strength_scores(match, [[True] * 4] * 2, **reference).round(4).tolist()
    [0.6667, 1.0]
    """
    matches = np.asarray(argmax_match, dtype=bool)
    scored = scored_token_mask(mask, drop_last_token=drop_last_token)
    if matches.shape != scored.shape:
        raise ValueError(f"`argmax_match` has shape {matches.shape} but `mask` has shape {scored.shape}")
    lengths = scored.sum(axis=1)
    strength = np.zeros(len(scored), dtype=np.float64)
    rows = lengths > 0
    if rows.any():
        strength[rows] = probability.extraction_strength(matches[rows] & scored[rows], scored[rows])
        if floor_at_one_token:
            strength[rows] = np.maximum(strength[rows], 1.0 / lengths[rows])
    return strength
