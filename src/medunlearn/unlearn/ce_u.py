r"""CE-U — Cross Entropy Unlearning.

CE-U trains the model towards its *own* next-token distribution with the answer token removed: the target
is the (detached) softmax of the current logits with the answer token's logit set to :math:`-\infty`:

.. math::

    q_{i,t} = \operatorname{sg}\!\left[\operatorname{softmax}\!\left(z_{i,t} - \infty \cdot e_{y_{i,t}}\right)\right],
    \qquad
    \mathcal{L}_{\mathrm{CE\text{-}U}}(\theta) = \frac{1}{|\mathcal{T}|} \sum_{(i,t) \in \mathcal{T}}
        -\sum_{v \ne y_{i,t}} q_{i,t}(v) \log p_\theta(v \mid x_i, y_{i,<t})

Its gradient with respect to the logits is :math:`p - q`: :math:`+p_y` on the answer token and
:math:`-p_v\,p_y/(1-p_y)` on every other token, so the push vanishes once the answer token is improbable
instead of growing without bound as in gradient ascent.

:math:`\mathcal{T}` is the set of answer tokens (labels ``!= -100``) minus the first
``ignore_first_n_answer_tokens`` of each answer: the paper's training footnote drops the first answer
token, whose prediction depends mostly on the question's phrasing. The full objective is
:math:`\gamma\,\mathcal{L}_{\mathrm{CE\text{-}U}} + \alpha\,\mathcal{L}_{\mathrm{retain}}`; the paper and the
reference use the forget term alone (alpha = 0).

Citation: Bo Yang. *CE-U: Cross Entropy Unlearning.* arXiv:2503.01224, 2025.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class CEUConfig:
    """CE-U's own hyperparameters, with the paper's defaults."""

    ignore_first_n_answer_tokens: int = field(
        default=1, metadata={"help": "Answer tokens at the start of each answer left out of the loss."}
    )
    gamma: float = field(default=1.0, metadata={"help": "Weight of the CE-U forget loss."})
    alpha: float = field(default=0.0, metadata={"help": "Weight of the retain loss; CE-U uses none by default."})


def mask_first_answer_tokens(labels: torch.Tensor, n: int) -> torch.Tensor:
    """``labels`` with the first ``n`` non-ignored tokens of each row replaced by -100."""
    if n <= 0:
        return labels
    answer_mask = labels != -100
    leading = answer_mask & (answer_mask.cumsum(dim=-1) <= n)
    return labels.masked_fill(leading, -100)


def ce_u_loss(logits: torch.Tensor, labels: torch.Tensor, ignore_first_n_answer_tokens: int = 1) -> torch.Tensor:
    """CE-U forget loss; ``logits`` [B, T, V] as the model returns them, ``labels`` [B, T] unshifted, -100 ignored."""
    labels = mask_first_answer_tokens(labels, ignore_first_n_answer_tokens)
    shifted_logits, shifted_labels = logits[:, :-1], labels[:, 1:]
    answer_mask = shifted_labels != -100
    answer_logits = shifted_logits[answer_mask].float()
    answer_tokens = shifted_labels[answer_mask]
    target_logits = answer_logits.detach().scatter(-1, answer_tokens.unsqueeze(-1), float("-inf"))
    target = F.softmax(target_logits, dim=-1)
    cross_entropy = -(target * F.log_softmax(answer_logits, dim=-1)).sum(dim=-1)
    return cross_entropy.sum() / answer_mask.sum().clamp(min=1)
