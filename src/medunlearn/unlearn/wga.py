r"""WGA — Weighted Gradient Ascent.

Gradient ascent spends most of its effort on tokens the model already finds unlikely, which is what
drives it to collapse. WGA weights each forget token's log-likelihood by the model's own (detached)
probability of that token raised to a power, so ascent concentrates on what the model still remembers:

.. math::

    \mathcal{L}_{\mathrm{WGA}}(\theta) = \frac{1}{|\mathcal{T}|} \sum_{(i,t) \in \mathcal{T}}
        \operatorname{sg}\!\left[p_\theta(y_{i,t} \mid x_i, y_{i,<t})^{\beta}\right]
        \log p_\theta(y_{i,t} \mid x_i, y_{i,<t})

where :math:`\mathcal{T}` is the set of answer tokens of the forget batch (labels ``!= -100``),
:math:`\operatorname{sg}` stops the gradient, and minimising the loss lowers the forget log-likelihood.
The full objective is :math:`\gamma\,\mathcal{L}_{\mathrm{WGA}} + \alpha\,\mathcal{L}_{\mathrm{retain}}`.

The mean runs over every answer token of the batch (token-level, as in the reference implementation),
so long answers weigh more than short ones.

Citation: Qizhou Wang, Jin Peng Zhou, Zhanke Zhou, Saebyeol Shin, Bo Han, Kilian Q. Weinberger.
*Rethinking LLM Unlearning Objectives: A Gradient Perspective and Go Beyond.* ICLR 2025. arXiv:2502.19301.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class WGAConfig:
    """WGA's own hyperparameters, with the defaults of the reference recipe (OpenUnlearning ``WGA.yaml``)."""

    beta: float = field(
        default=1.0,
        metadata={"help": "Power of the detached token probability used as weight: w = p^beta. 0 gives plain GA."},
    )
    gamma: float = field(default=1.0, metadata={"help": "Weight of the forget loss."})
    alpha: float = field(default=1.0, metadata={"help": "Weight of the retain loss (NLL on the retain batch)."})


def wga_loss(logits: torch.Tensor, labels: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """WGA forget loss; ``logits`` [B, T, V] as the model returns them, ``labels`` [B, T] unshifted, -100 ignored."""
    token_log_probs, answer_mask = answer_token_log_probs(logits, labels)
    weights = token_log_probs.detach().exp().pow(beta)
    return (weights * token_log_probs * answer_mask).sum() / answer_mask.sum().clamp(min=1)


def answer_token_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(y_t | y_<t) for every position, shifted as causal LMs predict, and the mask of answer tokens.

    Returns ``(log_probs, mask)``, both [B, T-1]; log-probs are 0 where the label is -100.
    """
    shifted_logits, shifted_labels = logits[:, :-1, :], labels[:, 1:]
    nll = F.cross_entropy(
        shifted_logits.flatten(0, 1).float(), shifted_labels.flatten(), ignore_index=-100, reduction="none"
    )
    mask = shifted_labels != -100
    return -nll.view_as(shifted_labels), mask
