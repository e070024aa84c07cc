r"""Gradient Difference: ascend on the forget NLL, descend on the retain NLL.

    L = γ · (−NLL_θ(forget)) + α · NLL_θ(retain),
    NLL(D) = mean_b (1/|y_b|) Σ_t −log π_θ(y_{b,t} | y_{b,<t}, x_b)

Liu et al., "Continual Learning and Private Unlearning", CoLLAs 2022; Maini et al., TOFU (arXiv 2401.06121).
Defaults γ = α = 1 as in OpenUnlearning's ``GradDiff``. One of the four methods of the AMNESIA paper.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.ops import TwoTermWeighting, nll_loss, resolve_weighting
from medunlearn.unlearn.trainer import UnlearningTrainer


def grad_diff_loss(
    forget_logits: torch.Tensor,
    forget_labels: torch.Tensor,
    retain_logits: torch.Tensor,
    retain_labels: torch.Tensor,
    weighting: TwoTermWeighting | None = None,
    **weights,
) -> dict[str, torch.Tensor]:
    w = resolve_weighting(weighting, weights)
    forget_loss = -nll_loss(forget_logits, forget_labels, w.averaging, w.forget_num_items)
    retain_loss = nll_loss(retain_logits, retain_labels, w.averaging, w.retain_num_items)
    return w.combine(forget_loss, retain_loss)


@dataclass
class GradDiffConfig(UnlearningConfig):
    r"""Configuration of :class:`GradDiffTrainer`, with OpenUnlearning's ``GradDiff`` defaults γ = α = 1.

    Parameters:
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the forget ascent term [OpenUnlearning].
        retain_weight (`float`, *optional*, defaults to `1.0`):
            α, weight of the retain NLL term [OpenUnlearning].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the forget and retain NLLs: ``"sequence"`` [ours] per answer, then over
            answers; ``"token"`` one token mean over each batch. The reference takes one token mean in both
            (HF ``outputs.loss``: ``src/trainer/unlearn/grad_diff.py:50`` forget, ``:29`` retain, at d3d7cf9).

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the forget ascent term"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain NLL term"})


class GradDiffTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = GradDiffConfig
    reference_usage = "none"
    uses_retain = True

    def unlearning_loss(self, model, forget, retain):
        forget_logits, retain_logits = self.forward_pair(model, forget, retain)
        return grad_diff_loss(
            forget_logits,
            forget["labels"],
            retain_logits,
            retain["labels"],
            self.two_term_weighting(),
        )
