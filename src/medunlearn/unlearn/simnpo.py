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

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.ops import nll_loss, sequence_mean_nll
from medunlearn.unlearn.trainer import UnlearningTrainer


def simnpo_loss(mean_nll: torch.Tensor, beta: float, delta: float) -> torch.Tensor:
    """−(2/β) · mean log σ(β (NLL/|y| − δ)) on per-sequence length-normalised NLLs ``[B]``."""
    return -(2.0 / beta) * F.logsigmoid(beta * (mean_nll - delta)).mean()


@dataclass
class SimNPOConfig(UnlearningConfig):
    r"""Configuration of :class:`SimNPOTrainer`: OpenUnlearning's TOFU defaults β = 4.5, δ = 0, γ = 1/8,
    α = 1.

    Parameters:
        beta (`float`, *optional*, defaults to `4.5`):
            β, inverse temperature of the SimNPO loss [OpenUnlearning].
        delta (`float`, *optional*, defaults to `0.0`):
            δ, reward margin subtracted from the length-normalised NLL [OpenUnlearning].
        forget_weight (`float`, *optional*, defaults to `0.125`):
            γ, weight of the SimNPO term [OpenUnlearning].
        retain_weight (`float`, *optional*, defaults to `1.0`):
            α, weight of the retain NLL [OpenUnlearning].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the retain NLL: ``"sequence"`` [ours] per answer, then over answers;
            ``"token"`` one token mean over the batch (the reference's,
            ``src/trainer/unlearn/grad_diff.py:29`` at d3d7cf9). The SimNPO term is length-normalised per
            sequence either way (``src/trainer/unlearn/simnpo.py:19``).

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

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
        forget_logits, retain_logits = self.forward_pair(model, forget, retain)
        forget_loss = simnpo_loss(
            sequence_mean_nll(forget_logits, forget["labels"]), self.args.beta, self.args.delta
        )
        retain_loss = nll_loss(retain_logits, retain["labels"], **self.token_reduction("retain"))
        return {
            "loss": self.args.forget_weight * forget_loss + self.args.retain_weight * retain_loss,
            "forget_loss": forget_loss,
            "retain_loss": retain_loss,
        }
