r"""Negative Preference Optimization (with the retain NLL term, "NPO+RT").

    L_NPO = (2/β) · mean_b log(1 + exp(β · (log π_θ(y_b|x_b) − log π_ref(y_b|x_b))))   on forget answers
    L = γ · L_NPO + α · NLL_θ(retain)

Zhang et al., "Negative Preference Optimization: Catastrophic Collapse to Effective Unlearning", COLM 2024
(arXiv 2404.05868). Defaults β = 0.1, γ = 1, α = 1 as in OpenUnlearning's ``NPO``; set α = 0 for pure NPO.
log π(y|x) sums the completion tokens' log-probs.

Reference: NPO needs one number per forget example, log π_ref(y|x). It is computed once with the starting
model before training and stored (``reference_mode="precomputed"``, the default): no second model lives in
memory. ``reference_mode="copy"`` / ``"adapter"`` compute it live each step instead (for comparison; same
values).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.ops import sequence_logps
from medunlearn.unlearn.trainer import UnlearningTrainer


def npo_loss(policy_logps: torch.Tensor, reference_logps: torch.Tensor, beta: float) -> torch.Tensor:
    """(2/β) · mean softplus(β (log π_θ − log π_ref)) on per-sequence log-probs ``[B]``."""
    return (2.0 / beta) * F.softplus(beta * (policy_logps - reference_logps)).mean()


@dataclass
class NPOConfig(UnlearningConfig):
    r"""Configuration of :class:`NPOTrainer`: β = 0.1 (paper), γ = α = 1 (OpenUnlearning NPO with retain NLL).

    Parameters:
        beta (`float`, *optional*, defaults to `0.1`):
            β, inverse temperature of the NPO loss [paper].
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the NPO term [OpenUnlearning].
        retain_weight (`float`, *optional*, defaults to `1.0`):
            α, weight of the retain NLL; `0` gives pure NPO [OpenUnlearning, NPO+RT].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the retain NLL: ``"sequence"`` [ours] per answer, then over answers;
            ``"token"`` one token mean over the batch (the reference's,
            ``src/trainer/unlearn/grad_diff.py:29`` at d3d7cf9). The NPO term is a mean over sequences of
            sequence log-probabilities either way.

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

    beta: float = field(default=0.1, metadata={"help": "β, inverse temperature of the NPO loss"})
    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the NPO term"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain NLL (0 = pure NPO)"})


class NPOTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = NPOConfig
    reference_usage = "sequence_logps"
    uses_retain = True

    def unlearning_loss(self, model, forget, retain):
        forget_logits, retain_logits = self.forward_pair(model, forget, self.retain_part(retain))
        policy_logps = sequence_logps(forget_logits, forget["labels"])
        reference_logps = self.reference_sequence_logps(model, forget)
        forget_loss = npo_loss(policy_logps, reference_logps, self.args.beta)
        return self.with_retain_nll(
            model,
            retain,
            {
                "forget_loss": forget_loss,
                "forget_logp_margin": (policy_logps - reference_logps).mean().detach(),
            },
            retain_logits,
        )
