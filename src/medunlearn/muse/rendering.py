r"""How the evaluation runner sees MUSE's raw text, and how the reference decodes what it compares.

The runner (:mod:`medunlearn.evaluation.runner`) renders each example's ``(question, answer)`` through the
tokenizer's chat template and tokenises the result without special tokens (a template writes them). MUSE
has no chat template: the reference tokenises the raw strings with the tokenizer's special tokens added,
``tok(prefix + " " + text)`` and ``tok(prefix)`` for a completion (``open-unlearning@d3d7cf9
src/data/utils.py:166-169``, ``insert_space`` for verbmem only: ``configs/data/datasets/
MUSE_forget_verbmem.yaml:11``), ``tok(wrapped_prompt + answer)`` and ``tok(wrapped_prompt)`` for a knowmem
question (``src/data/utils.py:99-111``). :class:`RawTextRendering` answers the runner's calls that way: the
prompt is the question's text, the full sequence the question's text followed by the answer's, both
tokenised with the special tokens (the class lives in :mod:`medunlearn.evaluation.raw_text`, which AMNESIA's
notes memorization shares). The runner's answer then starts at ``len(tok(prompt))``, the reference's
``len_matched`` (``src/data/utils.py:116, 173``), and never at position 0, which nothing predicts
(``:174-175``; :func:`medunlearn.evaluation.encoding.encode_examples`).

What a MUSE row becomes (:func:`medunlearn.muse.evaluate.muse_runner_examples`):

==========================  ==============================  ==========================================
rows                        question (the prompt)           answer (scored after it)
==========================  ==============================  ==========================================
``knowmem`` questions       the few-shot prompt             ``""``: generated only
``verbmem/forget``          ``prompt``                      ``" " + gt``
``privleak`` forget/holdout ``""``                          ``text``
==========================  ==============================  ==========================================

The knowmem answer is left out because the runner checks that a prompt's tokens begin its full sequence's,
and the prompt's trailing ``"Answer: "`` space is a token of its own alone but part of the answer's first
word after it (byte-level BPE, SentencePiece): nothing is scored there, only generated.

**Decoding.** The reference decodes generations and labels with ``clean_up_tokenization_spaces=True``
(``src/evals/metrics/utils.py:271-277, 300-304``); under its pinned transformers 4.45.1
(``requirements.txt:2``) that applies ``clean_up_tokenization`` (:func:`clean_up_spaces`) to every decode,
where transformers 5 skips it for BPE tokenizers. :func:`reference_ground_truths` decodes the reference's
ROUGE ground truths that way.
"""

from __future__ import annotations

from collections.abc import Sequence

from medunlearn.evaluation.raw_text import RawTextRendering
from medunlearn.metrics.verbatim_memorization import reference_ground_truth

RENDERING_ID = "muse raw text v1"
"""Enters the outputs' fingerprint (through the model id): outputs of another rendering are never reused."""

# transformers' PreTrainedTokenizerBase.clean_up_tokenization: these replacements, in this order.
_SPACE_CLEAN_UP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


def clean_up_spaces(text: str) -> str:
    """transformers' ``clean_up_tokenization``: the spaces a decode leaves before punctuation and
    contractions removed.

    >>> clean_up_spaces("It is n't here , is it ?")
    "It isn't here, is it?"
    """
    for before, after in _SPACE_CLEAN_UP:
        text = text.replace(before, after)
    return text


def reference_ground_truths(
    tokenizer, prompts: Sequence[str], continuations: Sequence[str], whole_conversation: Sequence[bool]
) -> list[str]:
    """The reference's ROUGE ground truth of each row: its labels decoded, minus the decoded prompt
    (:func:`~medunlearn.metrics.verbatim_memorization.reference_ground_truth`), both decoded with special
    tokens skipped and spaces cleaned up (``src/evals/metrics/utils.py:271-281``).

    The labels are the whole ``prompt + continuation`` for a knowmem question (``predict_with_generate``,
    ``src/data/utils.py:119-121``; the EOS it appends, ``:113-114``, decodes to nothing) and the
    continuation's tokens after the prompt's for a completion (``:176``): ``whole_conversation`` says which.
    """
    rendering = RawTextRendering(tokenizer)
    prompt_ids = rendering(list(prompts))["input_ids"]
    full_ids = rendering([p + c for p, c in zip(prompts, continuations)])["input_ids"]

    def decoded(ids) -> str:
        return clean_up_spaces(
            tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        )

    return [
        reference_ground_truth(decoded(full if whole else full[len(prompt) :]), decoded(prompt))
        for prompt, full, whole in zip(prompt_ids, full_ids, whole_conversation)
    ]


__all__ = ["RENDERING_ID", "RawTextRendering", "clean_up_spaces", "reference_ground_truths"]
