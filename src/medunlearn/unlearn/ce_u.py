r"""CE-U — Cross Entropy Unlearning.

CE-U trains the model towards its *own* next-token distribution with the answer token removed: the target is
the (detached) softmax of the current logits with the answer token's logit set to :math:`-\infty`:

.. math::

    q_{b,t} = \operatorname{sg}\!\left[
        \operatorname{softmax}\!\left(z_{b,t} - \infty \cdot e_{y_{b,t}}\right)\right],
    \qquad
    \mathcal{L}_{\mathrm{CE\text{-}U}}(\theta) = \frac{1}{B} \sum_{b=1}^{B} \frac{1}{|y_b|} \sum_{t}
        -\sum_{v \ne y_{b,t}} q_{b,t}(v) \log p_\theta(v \mid x_b, y_{b,<t})

Its gradient with respect to the logits is :math:`p - q`: :math:`+p_y` on the answer token and
:math:`-p_v\,p_y/(1-p_y)` on every other token, so the push fades once the answer token is improbable instead
of growing without bound as in gradient ascent.

:math:`y_b` are the answer tokens (labels ``!= -100``) minus the first ``ignore_first_n_answer_tokens`` of
each answer (the paper's training footnote drops the first answer token). The paper and the reference use the
forget term alone; we allow
:math:`\mathcal{L} = \gamma\,\mathcal{L}_{\mathrm{CE\text{-}U}} + \alpha\, \mathrm{NLL}_\theta(\text{retain})`
with alpha = 0 by default (then no retain set is needed).

Ours: the mean is per answer, then over answers (the library's reduction, see ``ops.py``); the reference
averages over all answer tokens of the batch. No reference model: the target comes from the model itself.

Citation: Bo Yang. *CE-U: Cross Entropy Unlearning.* arXiv:2503.01224, 2025.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.ops import (
    IGNORE_INDEX,
    LossAveraging,
    answer_soft_cross_entropy,
    shift_for_next_token,
)
from medunlearn.unlearn.trainer import UnlearningTrainer


@dataclass
class CEUConfig(UnlearningConfig):
    r"""Configuration of :class:`CEUTrainer`, with the paper's defaults.

    Parameters:
        ignore_first_n_answer_tokens (`int`, *optional*, defaults to `1`):
            Answer tokens at the start of each answer left out of the loss [paper, training footnote].
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the CE-U term [paper].
        retain_weight (`float`, *optional*, defaults to `0.0`):
            α, weight of the retain NLL; `0` (the paper has no retain term) means no retain set is needed
            [ours].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the CE-U term (and the retain NLL): ``"sequence"`` [ours] per answer, then over
            answers; ``"token"`` one mean over the batch's scored answer tokens (the first
            ``ignore_first_n_answer_tokens`` of each answer excluded from the count too). The reference takes
            one token mean (``F.cross_entropy`` over the valid positions, ``src/trainer/unlearn/ceu.py:58-61``
            at d3d7cf9).

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

    ignore_first_n_answer_tokens: int = field(
        default=1,
        metadata={"help": "answer tokens at the start of each answer left out of the loss (paper: 1)"},
    )
    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the CE-U term"})
    retain_weight: float = field(default=0.0, metadata={"help": "α, weight of the retain NLL (paper: none)"})


def mask_first_answer_tokens(labels: torch.Tensor, n: int) -> torch.Tensor:
    """``labels`` with the first ``n`` non-ignored tokens of each row replaced by -100."""
    if n <= 0:
        return labels
    answer_mask = labels != -100
    leading = answer_mask & (answer_mask.cumsum(dim=-1) <= n)
    return labels.masked_fill(leading, -100)


def ce_u_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ignore_first_n_answer_tokens: int = 1,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """CE-U forget loss; ``logits`` [B, T, V] as the model returns them, ``labels`` [B, T] unshifted, -100
    ignored."""
    shifted_logits, shifted_labels = shift_for_next_token(
        logits, mask_first_answer_tokens(labels, ignore_first_n_answer_tokens)
    )
    answer_mask = shifted_labels != -100
    answer_logits = shifted_logits[answer_mask].float()
    target_logits = answer_logits.detach().scatter(
        -1, shifted_labels[answer_mask].unsqueeze(-1), float("-inf")
    )
    return answer_soft_cross_entropy(
        answer_logits, F.softmax(target_logits, dim=-1), answer_mask, averaging, num_items
    )


class CEUTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = CEUConfig
    reference_usage = "none"
    uses_retain = True  # the command line loads a retain set; an instance with alpha = 0 ignores it
    retain_only_when_weighted = True

    def unlearning_loss(self, model, forget, retain):
        forget_logits, retain_logits = self.forward_pair(model, forget, self.retain_part(retain))
        forget_loss = ce_u_loss(
            forget_logits,
            forget["labels"],
            self.args.ignore_first_n_answer_tokens,
            **self.token_reduction("forget"),
        )
        return self.with_retain_nll(model, retain, {"forget_loss": forget_loss}, retain_logits)

    def count_loss_tokens(self, part, batch):
        """The forget term averages the answer tokens after each answer's first n (``token`` averaging)."""
        if part != "forget":
            return super().count_loss_tokens(part, batch)
        labels = mask_first_answer_tokens(batch["labels"], self.args.ignore_first_n_answer_tokens)
        return (labels[..., 1:] != IGNORE_INDEX).sum()
