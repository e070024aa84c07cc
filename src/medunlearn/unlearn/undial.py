r"""UNDIAL — self-distillation with adjusted logits.

Instead of pushing the forget answer's likelihood down without bound (gradient ascent), UNDIAL distils
the model towards a fixed target: the *reference* model's next-token distribution with the logit of the
token to forget lowered by a constant :math:`\beta`. The target is bounded, so the loss cannot run away:

.. math::

    q_{i,t} = \operatorname{softmax}\!\left(z^{\mathrm{ref}}_{i,t} - \beta\, e_{y_{i,t}}\right), \qquad
    \mathcal{L}_{\mathrm{UNDIAL}}(\theta) = \frac{1}{|\mathcal{T}|} \sum_{(i,t) \in \mathcal{T}}
        -\sum_{v} q_{i,t}(v) \log p_\theta(v \mid x_i, y_{i,<t})

where :math:`z^{\mathrm{ref}}_{i,t}` are the reference model's logits at the position predicting
:math:`y_{i,t}`, :math:`e_y` is the one-hot vector of the answer token and :math:`\mathcal{T}` the answer
tokens of the forget batch. The full objective is
:math:`\gamma\,\mathcal{L}_{\mathrm{UNDIAL}} + \alpha\,\mathcal{L}_{\mathrm{retain}}`.

Unlike the reference implementation, the mean runs over answer tokens only: averaging over prompt,
padding and -100 positions (where the reference also scatters the penalty into the last vocabulary id)
dilutes the loss with positions that are not being unlearned.

Citation: Yijiang River Dong, Hongzhou Lin, Mikhail Belkin, Ramon Huerta, Ivan Vulić.
*UNDIAL: Self-Distillation with Adjusted Logits for Robust Unlearning in Large Language Models.*
NAACL 2025. arXiv:2402.10052.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class UNDIALConfig:
    """UNDIAL's own hyperparameters, with the reference recipe's defaults (OpenUnlearning ``UNDIAL.yaml``)."""

    beta: float = field(
        default=10.0, metadata={"help": "How much the answer token's reference logit is lowered in the target."}
    )
    gamma: float = field(default=1.0, metadata={"help": "Weight of the forget (distillation) loss."})
    alpha: float = field(default=0.0, metadata={"help": "Weight of the retain loss; UNDIAL uses none by default."})


def undial_loss(
    logits: torch.Tensor, reference_logits: torch.Tensor, labels: torch.Tensor, beta: float = 10.0
) -> torch.Tensor:
    """UNDIAL loss; ``logits`` and ``reference_logits`` [B, T, V], ``labels`` [B, T] unshifted, -100 ignored."""
    shifted_logits, shifted_reference, shifted_labels = logits[:, :-1], reference_logits[:, :-1], labels[:, 1:]
    answer_mask = shifted_labels != -100
    # Only answer positions enter the loss, so gather them first: cheaper, and no penalty lands on a fake id.
    student_log_probs = F.log_softmax(shifted_logits[answer_mask].float(), dim=-1)
    penalty = F.one_hot(shifted_labels[answer_mask], num_classes=logits.shape[-1]).to(student_log_probs.dtype)
    target = F.softmax(shifted_reference[answer_mask].float().detach() - beta * penalty, dim=-1)
    cross_entropy = -(target * student_log_probs).sum(dim=-1)
    return cross_entropy.sum() / answer_mask.sum().clamp(min=1)
