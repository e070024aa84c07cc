"""Log-probabilities and losses on logits and labels: pure functions on tensors, shared by every method.

``labels`` are the completion-only labels of ``data.tokenize_prompt_completion``: −100 (``IGNORE_INDEX``) on
the prompt and on padding, the token id on the completion. They are unshifted: the helpers shift them so that
the logits at position t are scored against the label at t+1.

Loss reduction [ours]
---------------------
Token-level terms are averaged over the completion tokens of each sequence, then over sequences:
``mean_b (1/|y_b|) Σ_t ℓ_{b,t}``. Every sequence weighs the same, so a batch split over N processes (each
taking a per-process mean, DDP then averaging) gives the same loss and gradient as one process with the whole
batch: results do not change with GPU count, a pitfall of the reference system.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from trl.trainer.utils import selective_log_softmax

from medunlearn.unlearn.errors import UnlearningInputError

IGNORE_INDEX = -100
"""Label of the positions no loss is taken on (prompt, padding), as in ``torch.nn.CrossEntropyLoss``."""


def shift_for_next_token(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits at t predict the label at t+1: returns ``(logits[:, :-1], labels[:, 1:])``."""
    return logits[:, :-1, :], labels[:, 1:]


def completion_token_logps(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log p(y_t | y_<t, x) on completion tokens: ``(logps [B, T-1], mask [B, T-1] bool)``.

    Positions whose (shifted) label is −100 get log-prob 0 and mask False.
    """
    shifted_logits, shifted_labels = shift_for_next_token(logits, labels)
    mask = shifted_labels != IGNORE_INDEX
    safe_labels = shifted_labels.masked_fill(~mask, 0)
    logps = selective_log_softmax(shifted_logits.float(), safe_labels)
    return logps.masked_fill(~mask, 0.0), mask


def completion_lengths(labels: torch.Tensor) -> torch.Tensor:
    """|y|: number of completion tokens per sequence (shifted labels ≠ −100), at least 1 to avoid 0/0."""
    return (labels[:, 1:] != IGNORE_INDEX).sum(-1).clamp(min=1)


def sequence_logps(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log π(y|x) = Σ_t log p(y_t | y_<t, x) over completion tokens, per sequence ``[B]``."""
    logps, _ = completion_token_logps(logits, labels)
    return logps.sum(-1)


def sequence_mean_nll(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """−log π(y|x) / |y|: mean next-token NLL over each sequence's completion tokens, ``[B]``."""
    return -sequence_logps(logits, labels) / completion_lengths(labels)


def masked_sequence_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence mean of ``values [B, T, ...]`` over positions where ``mask [B, T]`` is True, ``[B]``."""
    mask = mask.to(values.dtype)
    while mask.dim() < values.dim():
        mask = mask.unsqueeze(-1)
    reduce_dims = tuple(range(1, values.dim()))
    per_position = values * mask
    denom = mask.expand_as(values).sum(reduce_dims).clamp(min=1)
    return per_position.sum(reduce_dims) / denom


def answer_soft_cross_entropy(
    answer_logits: torch.Tensor, target_probs: torch.Tensor, answer_mask: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy of the model's answer-token distributions against soft targets, averaged per answer then
    over answers. ``answer_logits`` and ``target_probs`` are ``[N, V]`` for the N True positions of
    ``answer_mask [B, T]`` (row-major order), so padding and prompt positions never enter a softmax or the
    mean."""
    token_cross_entropy = -(target_probs * F.log_softmax(answer_logits.float(), dim=-1)).sum(dim=-1)
    per_position = token_cross_entropy.new_zeros(answer_mask.shape).masked_scatter(
        answer_mask, token_cross_entropy
    )
    return masked_sequence_mean(per_position, answer_mask).mean()


def nll_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Batch NLL [ours: sequence-weighted]: ``mean_b (1/|y_b|) Σ_t −log p(y_{b,t})``."""
    return sequence_mean_nll(logits, labels).mean()


def kl_to_reference(
    policy_logits: torch.Tensor, reference_logits: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """Per-sequence mean over completion tokens of KL(p_ref ‖ p_θ), ``[B]``:

        KL(p_ref ‖ p_θ) = Σ_v p_ref(v) (log p_ref(v) − log p_θ(v))

    Prompt and padding positions (−100) are excluded, unlike the reference system which averages over them.
    """
    policy_logits, shifted_labels = shift_for_next_token(policy_logits, labels)
    reference_logits, _ = shift_for_next_token(reference_logits, labels)
    policy_logps = F.log_softmax(policy_logits.float(), dim=-1)
    reference_logps = F.log_softmax(reference_logits.float(), dim=-1)
    token_kl = (reference_logps.exp() * (reference_logps - policy_logps)).sum(-1)
    return masked_sequence_mean(token_kl, shifted_labels != IGNORE_INDEX)


def select_parameters(model, patterns: list[str]) -> list[str]:
    """Train the parameters matching any regex (``re.search``), freeze the rest; return the kept names."""
    compiled = [re.compile(p) for p in patterns]
    kept = []
    for name, parameter in model.named_parameters():
        trainable = any(p.search(name) for p in compiled)
        parameter.requires_grad_(trainable)
        if trainable:
            kept.append(name)
    if not kept:
        raise UnlearningInputError(
            f"no parameter matches {patterns}; names look like {next(iter(dict(model.named_parameters())))}"
        )
    return kept
