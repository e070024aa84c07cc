"""Frozen-model outputs computed once, before training, instead of by a reference model at every step.

A method whose loss reads a frozen reference model's outputs on fixed inputs (KL-Min: the reference's logits
on retain answers; UNDIAL: on forget answers; RMU: the reference's activations of the steered layer on retain
answers) gets the same numbers from one pass of the starting model over those rows before training: the
starting model *is* the reference (``medunlearn.unlearn.trainer``, "Reference model policy"). NPO's reference
log-probs were already computed this way; these outputs are per token, not per sequence.

What is stored, per row, is only what the loss reads: the outputs at the row's answer positions (the positions
predicting an answer token for logits, the answer tokens themselves for activations), ``[n_row, D]`` in the
dtype the model returns.

Memory [ours]: ``Σ_rows n_row · D · bytes(dtype)`` per process, where ``D`` is the vocabulary size for logits
and the hidden size for activations (RMU on Llama-3-8B, 400 retain rows of 50 answer tokens in bf16:
400 · 50 · 4096 · 2 B = 164 MB; KL-Min on the same rows: 400 · 50 · 128,256 · 2 B = 5.1 GB). Under
``reference_mode="auto"`` the outputs are precomputed when this is at most
``UnlearningTrainer.frozen_memory_limit_bytes`` (2 GiB); above it the reference model is kept and runs live
at every step, as before. ``reference_mode="precomputed"`` precomputes whatever the size.

Which rows: every forget row (each epoch visits them all); of the retain set, only the rows the forget/retain
pairing draws in the epochs the run will take (``data.ForgetRetainDataset``, redrawn per epoch from the seed),
so the one-off pass scores no more retain rows than the live reference would (it scores each drawn row once,
the live reference once per draw). Every process computes the same store (no communication).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from medunlearn.unlearn.data import collate_examples

FROZEN_ROW = "frozen_row"
"""Batch column holding each example's row index in its dataset: the key to its stored outputs."""


def training_epochs(args, num_rows: int) -> int:
    """An upper bound on the epochs a run takes: ``num_train_epochs`` rounded up, or with ``max_steps`` the
    epochs that many optimiser steps span (steps per epoch rounded down, so never too few)."""
    batch = args.per_device_train_batch_size * args.world_size
    batches = num_rows // batch if args.dataloader_drop_last else math.ceil(num_rows / batch)
    if args.max_steps is not None and args.max_steps > 0:
        steps_per_epoch = max(batches // args.gradient_accumulation_steps, 1)
        return math.ceil(args.max_steps / steps_per_epoch)
    return max(math.ceil(args.num_train_epochs), 1)


def paired_retain_rows(pairs, epochs: int) -> np.ndarray:
    """The retain rows the pairing draws in epochs ``0 .. epochs-1`` (sorted, unique); the pairing is left
    at epoch 0, where training starts."""
    drawn = []
    for epoch in range(epochs):
        pairs.set_epoch(epoch)
        drawn.append(np.asarray(pairs.pairing))
    pairs.set_epoch(0)
    return np.unique(np.concatenate(drawn))


def stored_positions_count(dataset, rows, positions: Callable[[torch.Tensor], torch.Tensor]) -> int:
    """How many positions the store holds for ``rows`` of a tokenised dataset (``positions`` of each row's
    labels)."""
    labels = dataset.select(rows)["labels"]
    return sum(int(positions(torch.tensor([row])).sum()) for row in labels)


class FrozenOutputs:
    """Per-row outputs at the stored positions; :meth:`gather` rebuilds the ``[B, T, D]`` tensor of a batch.

    Positions not stored are zeros: every loss reading the tensor masks them out (they are the positions it
    does not read), so they never enter a value or a gradient.
    """

    def __init__(self, rows: dict[int, torch.Tensor]):
        self.rows = rows

    @property
    def nbytes(self) -> int:
        return sum(value.numel() * value.element_size() for value in self.rows.values())

    def gather(self, row_index: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The outputs of the batch's rows (``row_index [B]``) at ``mask [B, T]``, zeros elsewhere."""
        missing = [int(i) for i in row_index if int(i) not in self.rows]
        if missing:
            raise RuntimeError(
                f"no precomputed reference outputs for rows {missing} (a pairing not foreseen)"
            )
        values = torch.cat([self.rows[int(i)] for i in row_index]).to(mask.device)
        out = values.new_zeros((*mask.shape, values.shape[-1]))
        out[mask] = values
        return out


@torch.no_grad()
def compute_frozen_outputs(model, dataset, rows, read, positions, batch_size: int, pad_token_id: int):
    """``FrozenOutputs`` of ``rows`` of a tokenised dataset: ``read(model, batch) -> [B, T, D]`` in eval mode,
    kept at ``positions(labels)``. Rows are batched by length (less padding; right padding does not change a
    real position's output)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    columns = ["input_ids", "attention_mask", "labels"]
    selected = dataset.select_columns(columns).select(rows)
    order = np.argsort([len(ids) for ids in selected["input_ids"]], kind="stable")
    stored = {}
    for start in range(0, len(order), batch_size):
        chunk = [int(i) for i in order[start : start + batch_size]]
        examples = [selected[i] for i in chunk]
        batch = {k: v.to(device) for k, v in collate_examples(examples, pad_token_id).items()}
        outputs, mask = read(model, batch), positions(batch["labels"])
        for offset, i in enumerate(chunk):
            stored[int(rows[i])] = outputs[offset][mask[offset]].cpu()
    model.train(was_training)
    return FrozenOutputs(stored)
