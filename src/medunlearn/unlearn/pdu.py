r"""PDU — Primal-Dual Unlearning with a logit-margin flattening loss (Constrained Entropic Unlearning).

Unlearning as a constrained problem: make the model's next-token distribution on the forget answers as flat
as possible, subject to the retain loss staying below a bound :math:`\varepsilon`:

.. math::

    \min_\theta\; \mathcal{L}_{\mathrm{flat}}(\theta) \quad\text{s.t.}\quad
        \mathcal{L}_{\mathrm{retain}}(\theta) \le \varepsilon, \qquad
    \mathcal{L}_{\mathrm{flat}}(\theta) = \frac{1}{|\mathcal{T}|} \sum_{(i,t) \in \mathcal{T}}
        \Bigl(\max_v z_{i,t}(v) - \tfrac{1}{V}\textstyle\sum_v z_{i,t}(v)\Bigr)^2

where :math:`z_{i,t}` are the logits at the position predicting answer token :math:`y_{i,t}`. The margin
between the top logit and the mean logit is zero exactly when all logits are equal (uniform distribution),
and the loss needs no softmax. It is solved by primal-dual descent on the Lagrangian

.. math::

    \mathcal{L}(\theta, \lambda) = \gamma\,\mathcal{L}_{\mathrm{flat}}(\theta)
        + \lambda\,\bigl(\mathcal{L}_{\mathrm{retain}}(\theta) - \varepsilon\bigr), \qquad
    \lambda \leftarrow \max\bigl(0,\; \lambda + \eta\,(\mathcal{L}_{\mathrm{retain}} - \varepsilon)\bigr)

with the dual step :math:`\eta` taken after each optimiser step once ``dual_warmup_epochs`` have passed.

Ours: :math:`\mathcal{T}` is the set of answer tokens (labels ``!= -100``); the reference averages over
every position of the batch, prompt and padding included, so a batch's padding changes the loss. When
``retain_loss_eps`` is left unset we take :math:`\varepsilon = \kappa\cdot\mathcal{L}_{\mathrm{retain}}(\theta_0)`,
the starting model's retain loss on the first batch times ``retain_loss_eps_factor`` (:math:`\kappa`),
following the authors' advice to pick a value somewhat above the starting retain loss.
Defaults are the authors' TOFU recipe (gamma=1, initial lambda=100, eta=5, epsilon=0.3 there, 5 warm-up epochs).

Citation: Taha Entesari, Arman Hatami, Rinat Khaziev, Anil Ramakrishna, Mahyar Fazlyab.
*Constrained Entropic Unlearning: A Primal-Dual Framework for Large Language Models.* arXiv:2506.05314, 2025.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class PDUConfig:
    """PDU's own hyperparameters, with the authors' TOFU recipe as defaults."""

    gamma: float = field(default=1.0, metadata={"help": "Weight of the logit-margin flattening forget loss."})
    alpha: float = field(
        default=100.0, metadata={"help": "Initial dual variable lambda (weight of the retain constraint)."}
    )
    retain_loss_eps: float | None = field(
        default=None,
        metadata={"help": "Bound epsilon on the retain loss; unset: retain_loss_eps_factor x the first retain loss."},
    )
    retain_loss_eps_factor: float = field(
        default=1.1, metadata={"help": "Ours: epsilon = this factor x the starting retain loss, when epsilon is unset."}
    )
    dual_step_size: float = field(default=5.0, metadata={"help": "Dual ascent step eta on lambda."})
    dual_warmup_epochs: float = field(
        default=5.0, metadata={"help": "Epochs with lambda held at its initial value before dual updates start."}
    )
    primal_dual: bool = field(default=True, metadata={"help": "Update lambda; False keeps a fixed weight alpha."})


def logit_margin_flattening_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean over answer tokens of (max logit - mean logit)^2; ``labels`` [B, T] unshifted, -100 ignored."""
    shifted_logits, answer_mask = logits[:, :-1], labels[:, 1:] != -100
    answer_logits = shifted_logits[answer_mask].float()
    margin = answer_logits.max(dim=-1).values - answer_logits.mean(dim=-1)
    return margin.pow(2).sum() / answer_mask.sum().clamp(min=1)


def constrained_objective(
    forget_loss: torch.Tensor, retain_loss: torch.Tensor, dual: float, retain_loss_eps: float, gamma: float = 1.0
) -> torch.Tensor:
    """The Lagrangian gamma * L_forget + lambda * (L_retain - epsilon) that the primal step minimises."""
    return gamma * forget_loss + dual * (retain_loss - retain_loss_eps)


def dual_ascent_step(dual: float, retain_loss: float, retain_loss_eps: float, step_size: float) -> float:
    """Projected dual ascent: lambda grows while the constraint is violated, shrinks (not below 0) otherwise."""
    return max(0.0, dual + step_size * (retain_loss - retain_loss_eps))
