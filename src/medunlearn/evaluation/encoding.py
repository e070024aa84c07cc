"""Encoding: the chat template rendered and tokenised once for every example and answer variant.

The runner's two passes share these token ids: the teacher-forced pass scores the full sequences
(``chat(user=question, assistant=answer)``), the generation pass continues the prompts
(``chat(user=question)``). :func:`locate_answers` finds each answer's tokens in its full sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from medunlearn.chat import render_conversations, render_prompts
from medunlearn.errors import InputError
from medunlearn.generation import eos_token_ids

if TYPE_CHECKING:  # pandas is imported where a table is made
    import pandas as pd

ANSWER = "answer"
# Optional example columns holding more answers to score (TOFU layout): one paraphrase, a list of wrong
# answers.
VARIANT_COLUMNS = {"paraphrased_answer": "paraphrased", "perturbed_answers": "perturbed"}


@dataclass
class EncodedExamples:
    """Token ids of every example, made once and shared by both passes.

    Scored sequences are the examples' answers (the first ``len(prompt_ids)``, in example order) followed by
    the answer variants; ``sequence_example`` / ``sequence_variant`` say which example and variant each is.
    """

    prompt_ids: list[list[int]]  # per example: chat(user=question) + generation prompt
    full_ids: list[list[int]]  # per scored sequence: chat(user=question, assistant=answer)
    answer_start: np.ndarray  # index in full_ids of the first answer token (len of the prompt, at least 1)
    answer_end: np.ndarray  # one past the last answer token (the end-of-turn token included)
    sequence_example: np.ndarray
    sequence_variant: np.ndarray


def answer_variants(examples: pd.DataFrame) -> pd.DataFrame:
    """Extra answers to score, one row each: ``example`` (row position), ``variant``, ``answer``.

    ``paraphrased_answer`` gives variant ``paraphrased``; each item j of ``perturbed_answers`` gives
    ``perturbed_j``. Missing columns or empty values give no rows.
    """
    import pandas as pd

    frames = []
    positions = pd.Series(np.arange(len(examples)), index=examples.index)
    if "paraphrased_answer" in examples:
        texts = examples["paraphrased_answer"]
        keep = texts.notna() & (texts.astype(str) != "")
        frames.append(
            pd.DataFrame({"example": positions[keep], "variant": "paraphrased", "answer": texts[keep]})
        )
    if "perturbed_answers" in examples:
        exploded = examples["perturbed_answers"].explode().dropna()
        exploded = exploded[exploded.astype(str) != ""]
        rank = exploded.groupby(level=0).cumcount()
        frames.append(
            pd.DataFrame(
                {
                    "example": positions[exploded.index].to_numpy(),
                    "variant": "perturbed_" + rank.astype(str).to_numpy(),
                    "answer": exploded.astype(str).to_numpy(),
                }
            )
        )
    if not frames:
        return pd.DataFrame({"example": np.zeros(0, dtype=np.int64), "variant": [], "answer": []})
    return pd.concat(frames, ignore_index=True).astype({"example": np.int64})


def encode_examples(
    tokenizer, questions: Sequence[str], answers: Sequence[str], variants: pd.DataFrame | None = None
) -> EncodedExamples:
    """Render the chat template for all examples and tokenise them in one batched call per view.

    Prompts are tokenised once per example; full sequences once per scored answer (``variants`` from
    ``answer_variants`` add sequences). The answer tokens are those after the generation prompt, up to and
    including the first end-of-sequence token: what the model must emit when it answers. Anything the
    template adds after it (a newline) is not scored.
    """
    questions, answers = list(questions), list(answers)
    sequence_example = np.arange(len(questions))
    sequence_variant = np.full(len(questions), ANSWER, dtype=object)
    if variants is not None and len(variants):
        sequence_example = np.concatenate([sequence_example, variants["example"].to_numpy()])
        sequence_variant = np.concatenate([sequence_variant, variants["variant"].to_numpy(dtype=object)])
        answers = answers + variants["answer"].astype(str).tolist()
    prompt_ids = tokenizer(render_prompts(tokenizer, questions), add_special_tokens=False)["input_ids"]
    sequence_questions = [questions[i] for i in sequence_example]
    full_ids = tokenizer(
        render_conversations(tokenizer, sequence_questions, answers), add_special_tokens=False
    )["input_ids"]
    starts, ends = locate_answers(
        [prompt_ids[i] for i in sequence_example], full_ids, eos_token_ids(tokenizer)
    )
    # No logits predict a sequence's first token: a raw-text prompt that tokenizes to nothing (a MUSE privleak
    # text, a tokenizer without BOS) is scored from its second token, as the reference scores it
    # (docs/muse.md, "Evaluation"). A chat template's prompt is never empty: nothing changes there.
    starts = np.minimum(np.maximum(starts, 1), ends)
    return EncodedExamples(prompt_ids, full_ids, starts, ends, sequence_example, sequence_variant)


def locate_answers(prompt_ids: list[list[int]], full_ids: list[list[int]], eos_ids: set[int]):
    """Answer span of every example, for all examples at once on the flattened token ids.

    start = len(prompt); end = one past the first EOS at or after start (the sequence end if there is none).
    Raises if a prompt is not a prefix of its full sequence (the template then renders the question
    differently with an answer, and the answer tokens cannot be located).
    """
    if not full_ids:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    full_lengths = np.fromiter((len(ids) for ids in full_ids), dtype=np.int64, count=len(full_ids))
    starts = np.fromiter((len(ids) for ids in prompt_ids), dtype=np.int64, count=len(prompt_ids))
    offsets = np.concatenate([[0], np.cumsum(full_lengths)[:-1]])
    flat = np.fromiter((t for ids in full_ids for t in ids), dtype=np.int64, count=int(full_lengths.sum()))
    flat_prompts = np.fromiter(
        (t for ids in prompt_ids for t in ids), dtype=np.int64, count=int(starts.sum())
    )
    too_long = np.flatnonzero(starts > full_lengths)
    # Position of every prompt token inside the flat full sequences.
    prompt_positions = (
        np.repeat(offsets, starts)
        + np.arange(len(flat_prompts))
        - np.repeat(np.cumsum(starts) - starts, starts)
    )
    mismatch = np.zeros(len(full_ids), dtype=bool)
    if len(too_long) == 0:
        differs = flat[prompt_positions] != flat_prompts
        mismatch = (
            np.bincount(np.repeat(np.arange(len(full_ids)), starts), weights=differs, minlength=len(full_ids))
            > 0
        )
    bad = too_long if len(too_long) else np.flatnonzero(mismatch)
    if len(bad):
        raise InputError(
            f"example {int(bad[0])}: the chat template renders the question differently with and without the "
            "answer; the answer tokens cannot be located"
        )
    # First EOS at or after each start: the next EOS position seen from every token, read at the start
    # (a sentinel past the end answers for a start at the very end). An EOS found beyond the sequence's own
    # end belongs to the next sequence: then the answer runs to the end.
    is_eos = np.isin(flat, list(eos_ids))
    next_eos = np.where(is_eos, np.arange(len(flat)), len(flat))
    next_eos = np.append(np.minimum.accumulate(next_eos[::-1])[::-1], len(flat))
    sequence_end = offsets + full_lengths
    first_eos = next_eos[offsets + starts]
    ends = np.where(first_eos < sequence_end, first_eos + 1, sequence_end) - offsets
    return starts, ends
