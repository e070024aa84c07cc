"""The fine-tuned baseline's network: an encoder read as a cross-encoder over the claim pair, and three heads.

Everything here is ours (docs/biodivergence.md, "The fine-tuned baseline"):

- *Input*: the tokenizer's pair encoding of ``(text_a, text_b)`` with ``text_x = claim_x`` or, when the
  abstracts are used, ``claim_x + " Context: " + abstract_x``; truncation ``longest_first`` at
  ``max_length`` tokens, which trims the longer side from its end, so the abstracts go before the claims.
- *Pooling*: the mean of the last hidden states over the attention mask (how sentence encoders such as
  all-MiniLM-L6-v2 were trained), then dropout.
- *Heads* (linear): the conflict type (6 classes), the axes (13 independent logits) and the dominant
  confounder (14 classes: the 13 axes, then "none").
- *Loss*: ``L = w_c·CE(conflict) + w_a·BCE(axes) + w_d·CE(confounder)`` with the default weights
  ``w_c = w_a = w_d = 1``; CE is the mean over the batch of ``−log softmax(z)[y]``, BCE the mean over the
  batch and the 13 axes of ``−[y·log σ(z) + (1 − y)·log(1 − σ(z))]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from medunlearn.ontology.biodivergence import AXIS_IDS, CONFLICT_TYPE_IDS, NO_CONFOUNDER

CONFOUNDER_IDS: tuple[str, ...] = (*AXIS_IDS, NO_CONFOUNDER)
CONTEXT_MARK = " Context: "
LABEL_NAMES = ("conflict_labels", "axis_labels", "confounder_labels")


@dataclass(frozen=True)
class LossWeights:
    """``w_c``, ``w_a``, ``w_d`` of the loss (module docstring); all 1 by default (ours)."""

    conflict: float = 1.0
    axes: float = 1.0
    confounder: float = 1.0


def head_losses(logits: dict, labels: dict, weights: LossWeights = LossWeights()) -> dict:
    """The three head losses and their weighted sum ``loss`` (module docstring), as 0-d tensors.

    ``logits``: ``conflict_logits`` (batch × 6), ``axis_logits`` (batch × 13), ``confounder_logits``
    (batch × 14); ``labels``: ``conflict_labels`` (class index), ``axis_labels`` (0/1 floats, batch × 13),
    ``confounder_labels`` (index into :data:`CONFOUNDER_IDS`).
    """
    from torch.nn import functional

    conflict = functional.cross_entropy(logits["conflict_logits"], labels["conflict_labels"])
    axes = functional.binary_cross_entropy_with_logits(
        logits["axis_logits"], labels["axis_labels"].to(logits["axis_logits"].dtype)
    )
    confounder = functional.cross_entropy(logits["confounder_logits"], labels["confounder_labels"])
    total = weights.conflict * conflict + weights.axes * axes + weights.confounder * confounder
    return {"loss": total, "conflict_loss": conflict, "axis_loss": axes, "confounder_loss": confounder}


def build_heads_model(encoder, dropout: float = 0.1, weights: LossWeights = LossWeights()):
    """The cross-encoder with its three heads around ``encoder`` (a ``transformers`` base model, or a PEFT
    wrapper of one); the heads are initialised from torch's global generator (seed it first)."""
    import torch

    class CrossEncoderHeads(torch.nn.Module):
        """``forward`` returns the three logits and, given the three label tensors, the loss."""

        def __init__(self):
            super().__init__()
            hidden = encoder.config.hidden_size
            self.encoder = encoder
            self.dropout = torch.nn.Dropout(dropout)
            self.conflict_head = torch.nn.Linear(hidden, len(CONFLICT_TYPE_IDS))
            self.axis_head = torch.nn.Linear(hidden, len(AXIS_IDS))
            self.confounder_head = torch.nn.Linear(hidden, len(CONFOUNDER_IDS))
            self.loss_weights = weights

        def forward(self, input_ids, attention_mask, token_type_ids=None, **labels):
            inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                inputs["token_type_ids"] = token_type_ids
            hidden = self.encoder(**inputs).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = self.dropout((hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0))
            output = {
                "conflict_logits": self.conflict_head(pooled),
                "axis_logits": self.axis_head(pooled),
                "confounder_logits": self.confounder_head(pooled),
            }
            if labels.get("conflict_labels") is not None:
                output = {"loss": head_losses(output, labels, self.loss_weights)["loss"], **output}
            return output

    return CrossEncoderHeads()


def pair_texts(frame: pd.DataFrame, use_context: bool) -> tuple[list[str], list[str]]:
    """The two sides of the cross-encoder's input (module docstring)."""
    sides = []
    for side in ("a", "b"):
        texts = frame[f"claim_{side}"].astype(str)
        if use_context:
            abstracts = frame[f"abstract_{side}"].fillna("").astype(str)
            texts = texts.where(abstracts.str.strip() == "", texts + CONTEXT_MARK + abstracts)
        sides.append(texts.tolist())
    return sides[0], sides[1]


def has_context(frame: pd.DataFrame) -> bool:
    """Whether the frame has any non-empty abstract (then the input takes the abstracts by default)."""
    return any(
        name in frame.columns and frame[name].fillna("").astype(str).str.strip().ne("").any()
        for name in ("abstract_a", "abstract_b")
    )


def label_arrays(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The three targets of each pair: class index, 13 axis indicators, confounder index."""
    class_index = {name: i for i, name in enumerate(CONFLICT_TYPE_IDS)}
    confounder_index = {name: i for i, name in enumerate(CONFOUNDER_IDS)}
    axis_index = {name: i for i, name in enumerate(AXIS_IDS)}
    axes = np.zeros((len(frame), len(AXIS_IDS)), np.float32)
    for row, pair_axes in enumerate(frame["axes"]):
        axes[row, [axis_index[axis] for axis in pair_axes]] = 1.0
    return {
        "conflict_labels": frame["conflict_type"].map(class_index).to_numpy(np.int64),
        "axis_labels": axes,
        "confounder_labels": frame["dominant_confounder"].map(confounder_index).to_numpy(np.int64),
    }


class PairDataset:
    """Tokenised pairs (and their labels, when known), one dict per pair, for the ``Trainer``."""

    def __init__(self, encodings: dict, labels: dict | None = None):
        self.encodings, self.labels = encodings, labels

    def __len__(self) -> int:
        return len(self.encodings["input_ids"])

    def __getitem__(self, index: int) -> dict:
        item = {name: values[index] for name, values in self.encodings.items()}
        if self.labels is not None:
            item.update({name: values[index] for name, values in self.labels.items()})
        return item

    def token_count(self) -> int:
        """Non-padding tokens over all pairs."""
        return int(sum(len(ids) for ids in self.encodings["input_ids"]))


def encode_pairs(tokenizer, frame: pd.DataFrame, use_context: bool, max_length: int, with_labels: bool):
    """A :class:`PairDataset` of ``frame`` (unpadded; :func:`make_collator` pads each batch)."""
    text_a, text_b = pair_texts(frame, use_context)
    encodings = tokenizer(text_a, text_b, truncation="longest_first", max_length=max_length)
    names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in encodings]
    return PairDataset(
        {name: list(encodings[name]) for name in names}, label_arrays(frame) if with_labels else None
    )


def make_collator(tokenizer):
    """Pads a batch's token fields with the tokenizer and stacks its labels as tensors."""
    import torch

    def collate(items: list[dict]) -> dict:
        token_fields = [
            name for name in ("input_ids", "attention_mask", "token_type_ids") if name in items[0]
        ]
        batch = dict(
            tokenizer.pad(
                [{name: item[name] for name in token_fields} for item in items], return_tensors="pt"
            )
        )
        for name in LABEL_NAMES:
            if name in items[0]:
                batch[name] = torch.as_tensor(np.stack([item[name] for item in items]))
        return batch

    return collate


def decode_heads(conflict_logits, axis_logits, confounder_logits) -> tuple[list, list, list]:
    """Class = argmax; axes = the logits above 0 (σ > 0.5); confounder = argmax, kept only when it is one of
    the predicted axes, else "none" (the rule the lexical baseline uses)."""
    conflict = [CONFLICT_TYPE_IDS[i] for i in np.asarray(conflict_logits).argmax(axis=1)]
    names = np.array(AXIS_IDS, dtype=object)
    axes = [list(names[row > 0]) for row in np.asarray(axis_logits)]
    confounder = [CONFOUNDER_IDS[i] for i in np.asarray(confounder_logits).argmax(axis=1)]
    confounder = [c if c in a else NO_CONFOUNDER for c, a in zip(confounder, axes)]
    return conflict, axes, confounder


class ReconciliationLookup:
    """The reconciliation of the nearest train pair in (class, axes) [ours]:

    train pairs are grouped by (class, axis set), each group keeping its most frequent reconciliation (ties:
    alphabetical). For a predicted (class, axes), the candidates are the groups of that class (all groups
    when train has none); the nearest is the one with the highest Jaccard similarity
    ``|A ∩ B| / |A ∪ B|`` of the axis sets (1 when both are empty), ties to the larger group, then to the
    first group in sorted order. An encoder writes no text, so it retrieves one.
    """

    def __init__(self, train: pd.DataFrame):
        keys = train["conflict_type"] + "|" + train["axes"].map(lambda axes: ",".join(sorted(axes)))
        table = pd.DataFrame({"key": keys, "text": train["reconciliation"].astype(str)})
        counts = table.groupby(["key", "text"]).size().reset_index(name="n")
        counts = counts.sort_values(["key", "n", "text"], ascending=[True, False, True])
        best = counts.drop_duplicates("key")
        sizes = table.groupby("key").size()
        self.groups = [
            (key.split("|")[0], frozenset(filter(None, key.split("|")[1].split(","))), int(sizes[key]), text)
            for key, text in zip(best["key"], best["text"])
        ]

    def nearest(self, conflict_type: str, axes) -> str:
        if not self.groups:
            return ""
        axes = frozenset(axes)
        candidates = [group for group in self.groups if group[0] == conflict_type] or self.groups

        def similarity(group) -> float:
            union = axes | group[1]
            return len(axes & group[1]) / len(union) if union else 1.0

        # max() keeps the first of equal keys, and the groups are in sorted order.
        return max(candidates, key=lambda group: (similarity(group), group[2]))[3]
