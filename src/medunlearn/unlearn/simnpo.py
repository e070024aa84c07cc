r"""SimNPO: reference-free, length-normalised NPO (with the retain NLL term).

    L_SimNPO = −(2/β) · mean_b log σ(β · (NLL_θ(y_b|x_b)/|y_b| − δ))   on forget answers
    L = γ · L_SimNPO + α · NLL_θ(retain)

with NLL_θ(y|x) = −log π_θ(y|x) summed over the completion and |y| its token count. Fan et al., "Simplicity
Prevails: Rethinking Negative Preference Optimization for LLM Unlearning" (arXiv 2410.07163); written as in
OpenUnlearning's ``SimNPO``. Defaults β = 4.5, δ = 0, γ = 0.125, α = 1. One of the four methods of the AMNESIA
paper. No reference model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from medunlearn.unlearn.base import UnlearningConfig, UnlearningTrainer, nll_loss, sequence_mean_nll


def simnpo_loss(mean_nll: torch.Tensor, beta: float, delta: float) -> torch.Tensor:
    """−(2/β) · mean log σ(β (NLL/|y| − δ)) on per-sequence length-normalised NLLs ``[B]``."""
    return -(2.0 / beta) * F.logsigmoid(beta * (mean_nll - delta)).mean()


@dataclass
class SimNPOConfig(UnlearningConfig):
    """SimNPO: β = 4.5, δ = 0, γ = 0.125, α = 1 (OpenUnlearning's TOFU defaults)."""

    beta: float = field(default=4.5, metadata={"help": "β, inverse temperature"})
    delta: float = field(default=0.0, metadata={"help": "δ, reward margin"})
    forget_weight: float = field(default=0.125, metadata={"help": "γ, weight of the SimNPO term"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain NLL"})


class SimNPOTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = SimNPOConfig
    reference_usage = "none"
    uses_retain = True

    def unlearning_loss(self, model, forget, retain):
        forget_loss = simnpo_loss(
            sequence_mean_nll(self.logits(model, forget), forget["labels"]), self.args.beta, self.args.delta
        )
        retain_loss = nll_loss(self.logits(model, retain), retain["labels"])
        return {
            "loss": self.args.forget_weight * forget_loss + self.args.retain_weight * retain_loss,
            "forget_loss": forget_loss,
            "retain_loss": retain_loss,
        }
