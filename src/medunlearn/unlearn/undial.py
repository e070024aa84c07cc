r"""UNDIAL — self-distillation with adjusted logits.

Instead of pushing the forget answer's likelihood down without bound (gradient ascent), UNDIAL distils the
model towards a fixed target: the *reference* (starting) model's next-token distribution with the logit of the
token to forget lowered by a constant :math:`\beta`. The target is bounded, so the loss cannot run away:

.. math::

    q_{b,t} = \operatorname{softmax}\!\left(z^{\mathrm{ref}}_{b,t} - \beta\, e_{y_{b,t}}\right), \qquad
    \mathcal{L}_{\mathrm{UNDIAL}}(\theta) = \frac{1}{B} \sum_{b=1}^{B} \frac{1}{|y_b|} \sum_{t}
        -\sum_{v} q_{b,t}(v) \log p_\theta(v \mid x_b, y_{b,<t}),
    \qquad
    \mathcal{L} = \gamma\,\mathcal{L}_{\mathrm{UNDIAL}} + \alpha\,\mathrm{NLL}_\theta(\text{retain})

where :math:`z^{\mathrm{ref}}_{b,t}` are the reference model's logits at the position predicting
:math:`y_{b,t}`, :math:`e_y` the one-hot vector of the answer token, and :math:`y_b` the answer tokens of the
forget batch (labels ``!= -100``).

Unlike the reference implementation, only answer tokens enter the mean: it averages over prompt, padding and
−100 positions as well (scattering the penalty into the last vocabulary id there), so the loss depends on
padding. Ours: the mean is per answer, then over answers (the library's reduction, see ``ops.py``).

Reference model: needs the reference's full next-token distributions at the forget answers. They are
precomputed once before training (forget answer tokens × vocabulary × dtype bytes; ``unlearn/frozen.py``)
when that fits ``UnlearningTrainer.frozen_memory_limit_bytes``; otherwise, or with ``reference_mode="copy"``
/ ``"adapter"``, live: the same model with the adapter disabled under PEFT, else a frozen copy
(``trainer.py``'s policy). Defaults: the reference recipe
(OpenUnlearning ``UNDIAL.yaml``): beta = 10, gamma = 1, alpha = 0 (no retain term; its community sweep also
tries alpha in {1, 2, 5}), lr 1e-4, 10 epochs. With alpha = 0 no retain set is needed.

Citation: Yijiang River Dong, Hongzhou Lin, Mikhail Belkin, Ramon Huerta, Ivan Vulić.
*UNDIAL: Self-Distillation with Adjusted Logits for Robust Unlearning in Large Language Models.*
NAACL 2025. arXiv:2402.10052.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.ops import LossAveraging, answer_soft_cross_entropy, shift_for_next_token
from medunlearn.unlearn.trainer import UnlearningTrainer


@dataclass
class UNDIALConfig(UnlearningConfig):
    r"""Configuration of :class:`UNDIALTrainer`: the reference recipe's defaults (OpenUnlearning's UNDIAL).

    Parameters:
        beta (`float`, *optional*, defaults to `10.0`):
            β, how much the answer token's reference logit is lowered in the target [recipe].
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the distillation term [recipe].
        retain_weight (`float`, *optional*, defaults to `0.0`):
            α, weight of the retain NLL; `0` (the recipe's) means no retain term and no retain set [recipe].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the distillation term (and the retain NLL): ``"sequence"`` [ours] per answer,
            then over answers; ``"token"`` one mean over the batch's answer tokens. The reference takes one
            mean over every position, prompt and padding included (``src/trainer/utils.py:94-99`` at d3d7cf9);
            ``"token"`` keeps its single mean but not its padding and prompt positions.

    > [!NOTE]
    > These parameters have default values different from [`~transformers.TrainingArguments`] beyond those set
    > by [`UnlearningConfig`] (whose shared fields and other training defaults apply):
    > - `learning_rate`: defaults to `1e-4` instead of `5e-5` (recipe).
    > - `num_train_epochs`: defaults to `10.0` instead of `3.0` (recipe).
    """

    beta: float = field(
        default=10.0,
        metadata={"help": "β: how much the answer token's reference logit is lowered in the target"},
    )
    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the distillation term"})
    retain_weight: float = field(
        default=0.0, metadata={"help": "α, weight of the retain NLL (0 = none, the recipe's default)"}
    )
    learning_rate: float = field(default=1e-4, metadata={"help": "AdamW learning rate (recipe: 1e-4)"})
    num_train_epochs: float = field(
        default=10.0, metadata={"help": "epochs over the forget set (recipe: 10)"}
    )


def undial_loss(
    logits: torch.Tensor,
    reference_logits: torch.Tensor,
    labels: torch.Tensor,
    beta: float = 10.0,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """UNDIAL loss; ``logits`` and ``reference_logits`` [B, T, V], ``labels`` [B, T] unshifted, -100
    ignored."""
    shifted_logits, shifted_labels = shift_for_next_token(logits, labels)
    shifted_reference, _ = shift_for_next_token(reference_logits, labels)
    answer_mask = shifted_labels != -100
    # Only answer positions enter the loss, so the softmaxes are taken over those rows alone
    # ([N, V], not [B, T, V]).
    penalty = F.one_hot(shifted_labels[answer_mask], num_classes=logits.shape[-1]).float()
    target = F.softmax(shifted_reference[answer_mask].float().detach() - beta * penalty, dim=-1)
    return answer_soft_cross_entropy(shifted_logits[answer_mask], target, answer_mask, averaging, num_items)


class UNDIALTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = UNDIALConfig
    reference_usage = "model"
    uses_retain = True  # the command line loads a retain set; an instance with alpha = 0 ignores it
    retain_only_when_weighted = True
    frozen_parts = ("forget",)  # the reference's logits on forget answers, precomputed (unlearn.frozen)

    def unlearning_loss(self, model, forget, retain):
        forget_logits, retain_logits = self.forward_pair(model, forget, self.retain_part(retain))
        forget_loss = undial_loss(
            forget_logits,
            self.reference_outputs(model, "forget", forget),
            forget["labels"],
            self.args.beta,
            **self.token_reduction("forget"),
        )
        return self.with_retain_nll(model, retain, {"forget_loss": forget_loss}, retain_logits)
