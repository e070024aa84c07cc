r"""MUSE C2 / C4, knowledge memorization: ROUGE-L F1 of the greedy answer to a question about the forget
(``knowmem_f``) or retain (``knowmem_r``) documents, asked after in-context QA pairs [ref: Shi et al. 2024,
MUSE; OpenUnlearning at d3d7cf9].

Metric card
-----------
**Description.** Each ``knowmem/forget_qa`` (``retain_qa``) question is asked after every pair of
``forget_qa_icl`` (``retain_qa_icl``; ten on the Hub), rendered with the literal tags of the MUSE target's
model config (``open-unlearning@d3d7cf9 configs/model/Llama-2-7b-hf.yaml:7-12``: no chat template,
``"Question: "``, ``"\n"``, ``"Answer: "``, ``"\n\n"``) by the non-chat branch of
``src/data/utils.py:71-98`` (the few-shot pairs are the whole ICL split, ``src/data/qa.py:38-43``). The model
answers greedily, at most 32 new tokens, stopping at ``"\n\n"``, ``"\nQuestion"``, ``"Question:"``
(``configs/eval/muse_metrics/forget_knowmem_ROUGE.yaml:21-23``, ``retain_knowmem_ROUGE.yaml:21-23``); the
answer is cut at the first stop string and stripped, then scored with ROUGE-L F1, stemming on, against the
gold answer (:mod:`medunlearn.metrics.verbatim_memorization`). ``forget_knowmem_ROUGE`` /
``retain_knowmem_ROUGE`` are the means over questions (``src/evals/metrics/memorization.py:93-104``).

**Inputs.** ``generations`` (decoded new tokens), ``answers`` (gold answers).

**Outputs.** Per-question ROUGE-L F1 in [0, 1]. knowmem_f: lower after unlearning, towards the retain
model's; knowmem_r: utility, should stay.

**Formula.**

``prompt = Σ_i ("Question: " + q_i + "\n" + "Answer: " + a_i + "\n\n") + "Question: " + q + "\n" +
"Answer: "`` (note the trailing space after ``Answer:``: the reference's tag, kept);
``knowmem = mean_q ROUGE-L-F1(cut(generate(prompt)), a)``.

**Limitations.** The reference truncates the tokenized prompt to 512 tokens (``MUSE_forget_knowmem.yaml:14``,
``src/data/utils.py:106-111``, truncation at the end): a prompt longer than that loses its question; the
runner must report such rows rather than score them silently. ROUGE rewards surface overlap only.

**Citation.** Shi et al., *MUSE: Machine Unlearning Six-Way Evaluation for Language Models*,
arXiv:2407.06460, 2024.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from medunlearn.metrics.validation import check_same_length, check_sequence
from medunlearn.metrics.verbatim_memorization import cut_generation, rouge_l_f1

__all__ = [
    "KNOWMEM_MAX_NEW_TOKENS",
    "KNOWMEM_STOP_STRINGS",
    "few_shot_prompt",
    "knowmem_scores",
]

KNOWMEM_MAX_NEW_TOKENS = 32  # open-unlearning@d3d7cf9 configs/eval/muse_metrics/forget_knowmem_ROUGE.yaml:22
KNOWMEM_STOP_STRINGS = ("\n\n", "\nQuestion", "Question:")  # forget_knowmem_ROUGE.yaml:23
# open-unlearning@d3d7cf9 configs/model/Llama-2-7b-hf.yaml:9-12
USER_START, USER_END, ASSISTANT_START, ASSISTANT_END = "Question: ", "\n", "Answer: ", "\n\n"


def few_shot_prompt(icl_pairs: Iterable[Mapping[str, str]], question: str) -> str:
    r"""The knowmem prompt: every in-context pair, then the question and an open ``Answer: ``.

    >>> few_shot_prompt([{"question": "Q1?", "answer": "A1"}], "Q2?")
    'Question: Q1?\nAnswer: A1\n\nQuestion: Q2?\nAnswer: '
    """
    shots = "".join(
        USER_START + pair["question"] + USER_END + ASSISTANT_START + pair["answer"] + ASSISTANT_END
        for pair in icl_pairs
    )
    return shots + USER_START + question + USER_END + ASSISTANT_START


def knowmem_scores(
    generations, answers, *, stop_strings=KNOWMEM_STOP_STRINGS, eos_text: str | None = None
) -> np.ndarray:
    r"""Per-question ROUGE-L F1 of the cut generation against the gold answer.

    >>> knowmem_scores([" Gideon Okonkwo\nQuestion: next"], ["Gideon Okonkwo"]).tolist()
    [1.0]
    """
    check_sequence("generations", generations)
    check_sequence("answers", answers)
    check_same_length(generations=generations, answers=answers)
    cut = [cut_generation(str(text), stop_strings, eos_text) for text in generations]
    return rouge_l_f1(cut, [str(answer).strip() for answer in answers])
