"""From QA rows to the batches a method sees: tokenising, forget/retain pairing, collation.

The batch a method sees
-----------------------
Every training step receives ``inputs = {"forget": ForgetBatch, "retain": RetainBatch}`` (``"retain"`` only
when ``uses_retain``). Each is a dict of right-padded tensors::

    input_ids       LongTensor [B, T]   prompt + completion tokens (chat template of the model)
    attention_mask  LongTensor [B, T]   1 on real tokens, 0 on padding
    labels          LongTensor [B, T]   completion tokens; −100 on prompt and padding (completion-only)
    <extra>         any column a subclass adds in ``prepare_forget_dataset`` / ``prepare_retain_dataset``:
                    token lists ending in ``input_ids`` / ``attention_mask`` / ``labels`` are padded with the
                    pad id / 0 / −100; scalars (e.g. ``reference_logps``) are stacked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from transformers import TrainerCallback
from trl.trainer.utils import pad

from medunlearn.chat import render_conversations, render_prompts, require_chat_template
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.ops import IGNORE_INDEX

if TYPE_CHECKING:
    from medunlearn.unlearn.config import UnlearningConfig


# ------------------------------------------------------------------------------------------------------------
# Tokenisation: prompt/completion with the model's chat template, completion-only labels
# ------------------------------------------------------------------------------------------------------------


def tokenize_prompt_completion(
    questions: list[str], answers: list[str], tokenizer, max_length: int, conventions=None
) -> dict[str, list[list[int]]]:
    """Token ids and completion-only labels for (question, answer) pairs, rendered by ``conventions``
    (``medunlearn.chat.Conventions``; ``None``: the tokenizer's chat template, no system prompt), exactly as
    evaluation renders them.

    The prompt (system prompt if any + user turn + generation prompt) and the completion (the rest of the
    rendered conversation) are tokenised separately and concatenated, as TRL's prompt-completion SFT does, so
    the label boundary is exact.
    """
    require_chat_template(tokenizer, conventions)
    prompt_texts = render_prompts(tokenizer, questions, conventions)
    chat_texts = render_conversations(tokenizer, questions, answers, conventions)
    mismatched = [
        i for i, (prompt, chat) in enumerate(zip(prompt_texts, chat_texts)) if not chat.startswith(prompt)
    ]
    if mismatched:
        raise UnlearningInputError(
            f"the chat template renders row {mismatched[0]} (question {questions[mismatched[0]]!r}) "
            "differently with and without the answer, so the answer tokens cannot be located; use a template "
            "whose generation prompt is a prefix of the assistant turn"
        )
    completion_texts = [chat[len(prompt) :] for prompt, chat in zip(prompt_texts, chat_texts)]
    prompt_ids = tokenizer(prompt_texts, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion_texts, add_special_tokens=False)["input_ids"]
    input_ids = [(p + c)[:max_length] for p, c in zip(prompt_ids, completion_ids)]
    labels = [([IGNORE_INDEX] * len(p) + c)[:max_length] for p, c in zip(prompt_ids, completion_ids)]
    return {"input_ids": input_ids, "attention_mask": [[1] * len(ids) for ids in input_ids], "labels": labels}


def tokenize_qa_dataset(dataset, tokenizer, config: UnlearningConfig, name: str, conventions=None):
    """Tokenise a QA ``datasets.Dataset`` (batched): ``input_ids, attention_mask, labels`` (+ its disease)."""
    for column in (config.question_column, config.answer_column):
        if column not in dataset.column_names:
            raise UnlearningInputError(
                f"{name} set has no column {column!r} (columns: {dataset.column_names})"
            )
    keep = [config.disease_column] if config.disease_column in dataset.column_names else []

    def encode(batch):
        return tokenize_prompt_completion(
            batch[config.question_column],
            batch[config.answer_column],
            tokenizer,
            config.max_length,
            conventions,
        )

    drop = [c for c in dataset.column_names if c not in keep]
    return dataset.map(encode, batched=True, remove_columns=drop, desc=f"tokenising {name} set")


# ------------------------------------------------------------------------------------------------------------
# Forget/retain pairing
# ------------------------------------------------------------------------------------------------------------


def sample_retain_indices(
    forget_diseases: np.ndarray | None,
    retain_diseases: np.ndarray | None,
    num_retain: int,
    strategy: str,
    rng: np.random.Generator,
) -> np.ndarray:
    """For each forget example, the index of the retain example it is paired with.

    ``random``: uniform over the retain set. ``same_disease``: uniform over retain examples whose disease
    equals the forget example's; uniform over all for a disease with no retained example. Vectorised per
    disease.
    """
    num_forget = len(forget_diseases) if forget_diseases is not None else 0
    indices = rng.integers(0, num_retain, size=num_forget)
    if strategy != "same_disease":
        return indices
    if forget_diseases is None or retain_diseases is None:
        raise UnlearningInputError(
            "retain_sampling='same_disease' needs a disease column in forget and retain sets"
        )
    order = np.argsort(retain_diseases, kind="stable")
    sorted_diseases = retain_diseases[order]
    starts = np.searchsorted(sorted_diseases, forget_diseases, side="left")
    ends = np.searchsorted(sorted_diseases, forget_diseases, side="right")
    counts = ends - starts
    has_match = counts > 0
    offsets = np.floor(rng.random(num_forget) * np.maximum(counts, 1)).astype(np.int64)
    matched = order[np.minimum(starts + offsets, len(order) - 1)]
    return np.where(has_match, matched, indices)


class ForgetRetainDataset(torch.utils.data.Dataset):
    """Item ``i`` is ``{"forget": forget[i], "retain": retain[pairing[i]]}``; an epoch walks the forget set.

    The pairing is redrawn by ``set_epoch`` (seed + epoch), identically on every process, so DDP shards see
    the same pairs a single process would.
    """

    def __init__(
        self, forget, retain=None, *, strategy: str = "random", seed: int = 0, disease_column="disease"
    ):
        self.forget, self.retain, self.strategy, self.seed = forget, retain, strategy, seed
        self.forget_diseases = self._diseases(forget, disease_column)
        self.retain_diseases = self._diseases(retain, disease_column) if retain is not None else None
        self.pairing = None
        self.set_epoch(0)

    @staticmethod
    def _diseases(dataset, column):
        if dataset is None or column not in dataset.column_names:
            return None
        return np.asarray(dataset[column], dtype=object).astype(str)

    def set_epoch(self, epoch: int) -> None:
        if self.retain is None:
            return
        rng = np.random.default_rng([self.seed, epoch])
        forget_keys = (
            self.forget_diseases if self.forget_diseases is not None else np.zeros(len(self.forget), str)
        )
        self.pairing = sample_retain_indices(
            forget_keys, self.retain_diseases, len(self.retain), self.strategy, rng
        )

    def __len__(self) -> int:
        return len(self.forget)

    def __getitem__(self, index: int) -> dict[str, dict[str, Any]]:
        item = {"forget": self.forget[int(index)]}
        if self.retain is not None:
            item["retain"] = self.retain[int(self.pairing[index])]
        return item


class EpochPairingCallback(TrainerCallback):
    """Redraws the forget/retain pairs as each epoch begins (the Trainer knows the epoch; the dataset not)."""

    def __init__(self, dataset: ForgetRetainDataset):
        self.dataset = dataset

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.dataset.set_epoch(int(state.epoch or 0))


# ------------------------------------------------------------------------------------------------------------
# Collation
# ------------------------------------------------------------------------------------------------------------


def _padding_value(key: str, pad_token_id: int) -> int | None:
    if key.endswith("input_ids"):
        return pad_token_id
    if key.endswith("attention_mask"):
        return 0
    if key.endswith("labels"):
        return IGNORE_INDEX
    return None


def collate_examples(examples: list[dict[str, Any]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Right-pad token columns (by name suffix) and stack scalar columns; strings are dropped."""
    batch = {}
    for key in examples[0]:
        values = [example[key] for example in examples]
        padding_value = _padding_value(key, pad_token_id)
        if padding_value is not None:
            batch[key] = pad([torch.tensor(v, dtype=torch.long) for v in values], padding_value=padding_value)
        elif isinstance(values[0], (int, float)):
            batch[key] = torch.tensor(
                values, dtype=torch.float32 if isinstance(values[0], float) else torch.long
            )
    return batch


@dataclass
class ForgetRetainCollator:
    """Collates ``ForgetRetainDataset`` items into ``{"forget": batch, "retain": batch}``."""

    pad_token_id: int

    def __call__(self, items: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, torch.Tensor]]:
        return {
            part: collate_examples([item[part] for item in items], self.pad_token_id) for part in items[0]
        }
