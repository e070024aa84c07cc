r"""Gradient Ascent: maximise the NLL of the forget answers.

    L = γ · L_GA,    L_GA = −mean_b (1/|y_b|) Σ_t −log π_θ(y_{b,t} | y_{b,<t}, x_b)

Jang et al., "Knowledge Unlearning for Mitigating Privacy Risks in Language Models", ACL 2023 (arXiv
2210.01504); the OpenUnlearning ``GradAscent`` baseline. The per-sequence reduction is ours (see ``ops``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.ops import LossAveraging, nll_loss
from medunlearn.unlearn.trainer import UnlearningTrainer


def grad_ascent_loss(
    forget_logits: torch.Tensor,
    forget_labels: torch.Tensor,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """−NLL of the forget completions, tokens averaged as ``averaging`` says (``ops.average_tokens``)."""
    return -nll_loss(forget_logits, forget_labels, averaging, num_items)


@dataclass
class GradAscentConfig(UnlearningConfig):
    r"""Configuration of :class:`GradAscentTrainer`: one ascent term, no retain set (OpenUnlearning).

    Parameters:
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the ascent term [OpenUnlearning].
        retain_weight (`float`, *optional*, defaults to `0.0`):
            Unused: GradAscent reads no retain set.
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the ascent term: ``"sequence"`` [ours] per answer, then over answers;
            ``"token"`` one token mean over the batch. The reference takes one token mean (HF
            ``outputs.loss``, ``src/trainer/unlearn/grad_ascent.py:13`` at OpenUnlearning d3d7cf9), which
            ``open-unlearning`` selects.

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the ascent term"})
    retain_weight: float = field(default=0.0, metadata={"help": "unused by GradAscent"})


class GradAscentTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = GradAscentConfig
    reference_usage = "none"
    uses_retain = False

    def unlearning_loss(self, model, forget, retain):
        forget_loss = grad_ascent_loss(
            self.logits(model, forget), forget["labels"], **self.token_reduction("forget")
        )
        return {"loss": self.args.forget_weight * forget_loss, "forget_loss": forget_loss}
