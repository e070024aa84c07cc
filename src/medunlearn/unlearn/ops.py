"""Log-probabilities and losses on logits and labels: pure functions on tensors, shared by every method.

``labels`` are the completion-only labels of ``data.tokenize_prompt_completion``: −100 (``IGNORE_INDEX``) on
the prompt and on padding, the token id on the completion. They are unshifted: the helpers shift them so that
the logits at position t are scored against the label at t+1.

Loss reduction (``UnlearningConfig.loss_averaging``)
----------------------------------------------------
Every term that averages token-level values ℓ_{b,t} over the answer tokens takes ``averaging``:

* ``"sequence"`` [ours, the default]: each answer's token mean, then the mean over answers,
  ``mean_b (1/|y_b|) Σ_t ℓ_{b,t}``. Every answer weighs the same, so a batch split over N processes (each
  taking a per-process mean, DDP then averaging) gives the same loss and gradient as one process with the
  whole batch.
* ``"token"`` [HF ``outputs.loss``, the reference's choice for most methods]: one token mean over the batch,
  ``Σ_{b,t} ℓ_{b,t} / N``. ``N`` is ``num_items``: the trainer passes the number of averaged tokens of the
  whole optimiser step, over every process and accumulation micro-batch, counted the way transformers counts
  ``num_items_in_batch``, so results do not depend on the number of processes either. Without ``num_items``
  (a pure call on one batch) ``N`` is the batch's own token count.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from trl.trainer.utils import selective_log_softmax

from medunlearn.unlearn.errors import UnlearningInputError

IGNORE_INDEX = -100
"""Label of the positions no loss is taken on (prompt, padding), as in ``torch.nn.CrossEntropyLoss``."""

LossAveraging = Literal["sequence", "token"]
"""How a loss averages token-level values (see the module docstring)."""


@dataclass(frozen=True)
class TwoTermWeighting:
    """How a forget term and a retain term make one loss: γ · forget + α · retain, each term averaging its
    tokens by ``averaging`` over ``forget_num_items`` / ``retain_num_items`` tokens (``None``: the batch's own
    count; see ``UnlearningTrainer.token_reduction``)."""

    forget_weight: float = 1.0
    retain_weight: float = 1.0
    averaging: LossAveraging = "sequence"
    forget_num_items: torch.Tensor | float | None = None
    retain_num_items: torch.Tensor | float | None = None

    def combine(self, forget_loss: torch.Tensor, retain_loss: torch.Tensor) -> dict[str, torch.Tensor]:
        """The loss and its two terms, as every two-term method logs them."""
        return {
            "loss": self.forget_weight * forget_loss + self.retain_weight * retain_loss,
            "forget_loss": forget_loss,
            "retain_loss": retain_loss,
        }


def resolve_weighting(weighting: TwoTermWeighting | None, keywords: dict) -> TwoTermWeighting:
    """The weighting of a two-term loss: ``weighting``, or one built from the loss's keyword arguments
    (``forget_weight=``, ``retain_weight=``, ``averaging=``, ``forget_num_items=``, ``retain_num_items=``: the
    keywords these losses took before :class:`TwoTermWeighting` gathered them, so such calls keep working).

    >>> resolve_weighting(None, {"forget_weight": 2.0}).forget_weight
    2.0
    """
    if weighting is not None and keywords:
        raise TypeError(f"pass either weighting= or {', '.join(sorted(keywords))}, not both")
    if weighting is not None:
        return weighting
    unknown = set(keywords) - {field.name for field in dataclasses.fields(TwoTermWeighting)}
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    return TwoTermWeighting(**keywords)


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


def average_tokens(
    values: torch.Tensor,
    mask: torch.Tensor,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """The mean of ``values [B, T]`` over the True positions of ``mask [B, T]``, as ``averaging`` says:

        sequence:  mean_b (Σ_t m_{b,t} v_{b,t}) / (Σ_t m_{b,t})
        token:     (Σ_{b,t} m_{b,t} v_{b,t}) / N,   N = num_items, or Σ_{b,t} m_{b,t} when not given

    >>> values = torch.tensor([[1.0, 3.0, 0.0], [5.0, 0.0, 0.0]])
    >>> mask = torch.tensor([[True, True, False], [True, False, False]])
    >>> average_tokens(values, mask, "sequence").item(), average_tokens(values, mask, "token").item()
    (3.5, 3.0)
    """
    if averaging == "sequence":
        return masked_sequence_mean(values, mask).mean()
    if averaging != "token":
        raise UnlearningInputError(f"loss_averaging must be 'sequence' or 'token', got {averaging!r}")
    total = (values * mask.to(values.dtype)).sum()
    if num_items is None:
        num_items = mask.sum().clamp(min=1)
    return total / num_items


def answer_soft_cross_entropy(
    answer_logits: torch.Tensor,
    target_probs: torch.Tensor,
    answer_mask: torch.Tensor,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """Cross-entropy of the model's answer-token distributions against soft targets, averaged over the answer
    tokens as ``averaging`` says (:func:`average_tokens`). ``answer_logits`` and ``target_probs`` are
    ``[N, V]`` for the N True positions of ``answer_mask [B, T]`` (row-major order), so padding and prompt
    positions never enter a softmax or the mean."""
    token_cross_entropy = -(target_probs * F.log_softmax(answer_logits.float(), dim=-1)).sum(dim=-1)
    per_position = token_cross_entropy.new_zeros(answer_mask.shape).masked_scatter(
        answer_mask, token_cross_entropy
    )
    return average_tokens(per_position, answer_mask, averaging, num_items)


def nll_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """Batch NLL of the completions. ``"sequence"`` [ours]: ``mean_b (1/|y_b|) Σ_t −log p(y_{b,t})``;
    ``"token"`` [HF ``outputs.loss``]: ``Σ_{b,t} −log p(y_{b,t}) / N``."""
    if averaging == "sequence":
        return sequence_mean_nll(logits, labels).mean()
    logps, mask = completion_token_logps(logits, labels)
    return average_tokens(-logps, mask, averaging, num_items)


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


def kl_loss(
    policy_logits: torch.Tensor,
    reference_logits: torch.Tensor,
    labels: torch.Tensor,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """KL(p_ref ‖ p_θ) averaged over the completion tokens as ``averaging`` says (:func:`average_tokens`).

    Only completion tokens count, with either choice: the reference averages over every position, prompt and
    padding included (``trainer/utils.py:compute_kl_divergence`` at d3d7cf9), which this does not reproduce.
    """
    policy_logits, shifted_labels = shift_for_next_token(policy_logits, labels)
    reference_logits, _ = shift_for_next_token(reference_logits, labels)
    policy_logps = F.log_softmax(policy_logits.float(), dim=-1)
    reference_logps = F.log_softmax(reference_logits.float(), dim=-1)
    token_kl = (reference_logps.exp() * (reference_logps - policy_logps)).sum(-1)
    return average_tokens(token_kl, shifted_labels != IGNORE_INDEX, averaging, num_items)


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


# ------------------------------------------------------------------------------------------------------------
# One forward over the forget and retain batches together (UnlearningTrainer.forward_pair)
# ------------------------------------------------------------------------------------------------------------

MODEL_INPUTS = ("input_ids", "attention_mask")
"""The batch columns a forward reads; the rest (labels, stored reference values) stay per part."""


def _pad_right(tensor: torch.Tensor, length: int, value: int) -> torch.Tensor:
    return F.pad(tensor, (0, length - tensor.shape[1]), value=value)


def has_dropout(model: torch.nn.Module) -> bool:
    """Whether training draws dropout masks: a dropout module with p > 0, or a config dropout rate > 0
    (attention dropout is a function argument in transformers, not a module)."""
    if any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules()):
        return True
    config = getattr(model, "config", None)
    settings = config.to_dict() if config is not None else {}
    return any(
        ("dropout" in name or "pdrop" in name) and isinstance(value, float) and value > 0
        for name, value in settings.items()
    )


def concatenate_batches(
    first: dict[str, torch.Tensor], second: dict[str, torch.Tensor], pad_token_id: int
) -> dict[str, torch.Tensor]:
    """``input_ids`` and ``attention_mask`` of two right-padded batches stacked row-wise, the shorter one
    padded on the right to the longer one's length (pad id / mask 0).

    Right padding leaves every real token's output unchanged under a causal model: a real position attends
    only to the real positions before it, and its position id is its index in the row either way.
    """
    length = max(first["input_ids"].shape[1], second["input_ids"].shape[1])
    values = {"input_ids": pad_token_id, "attention_mask": 0}
    return {
        key: torch.cat(
            [_pad_right(first[key], length, values[key]), _pad_right(second[key], length, values[key])]
        )
        for key in MODEL_INPUTS
    }


def split_rows(
    joint: torch.Tensor, first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows and positions of ``joint [B1 + B2, T, ...]`` that belong to each batch, at its own length."""
    rows, length = first["input_ids"].shape
    return joint[:rows, :length], joint[rows:, : second["input_ids"].shape[1]]


def padded_token_ratio(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> float:
    """Positions a joint forward computes over those of two separate forwards:
    ``(B1 + B2) · max(T1, T2) / (B1 · T1 + B2 · T2)``, 1 when both batches have the same length."""
    (rows1, length1), (rows2, length2) = first["input_ids"].shape, second["input_ids"].shape
    return (rows1 + rows2) * max(length1, length2) / (rows1 * length1 + rows2 * length2)


def predicting_positions(labels: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` True at the positions whose logits predict an answer token (label at t+1 ≠ −100)."""
    mask = torch.zeros_like(labels, dtype=torch.bool)
    mask[:, :-1] = labels[:, 1:] != IGNORE_INDEX
    return mask


def answer_positions(labels: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` True at the answer tokens themselves (label ≠ −100)."""
    return labels != IGNORE_INDEX
