r"""WGA — Weighted Gradient Ascent.

Gradient ascent spends most of its effort on tokens the model already finds unlikely, which is what drives it
to collapse. WGA weights each forget token's log-likelihood by the model's own (detached) probability of that
token raised to a power, so the ascent concentrates on what the model still remembers:

.. math::

    \mathcal{L}_{\mathrm{WGA}}(\theta) = \frac{1}{B} \sum_{b=1}^{B} \frac{1}{|y_b|} \sum_{t}
        \operatorname{sg}\!\left[p_\theta(y_{b,t} \mid x_b, y_{b,<t})^{\beta}\right]
        \log p_\theta(y_{b,t} \mid x_b, y_{b,<t}),
    \qquad
    \mathcal{L} = \gamma\,\mathcal{L}_{\mathrm{WGA}} + \alpha\,\mathrm{NLL}_\theta(\text{retain})

over the answer tokens :math:`y_b` (labels ``!= -100``); :math:`\operatorname{sg}` stops the gradient.
Minimising :math:`\mathcal{L}_{\mathrm{WGA}}` lowers the forget log-likelihood; :math:`\beta = 0` is plain
gradient ascent.

Ours: the mean is per answer, then over answers (the library's reduction, see ``ops.py``), so results do not
depend on how a batch is split over processes; the reference implementation averages over all tokens of the
batch. No reference model is built (the reference implementation builds one and never uses it).
Defaults: the reference recipe (OpenUnlearning ``WGA.yaml``): beta = 1, gamma = alpha = 1, lr 1e-5, 5 epochs.

Citation: Qizhou Wang, Jin Peng Zhou, Zhanke Zhou, Saebyeol Shin, Bo Han, Kilian Q. Weinberger.
*Rethinking LLM Unlearning Objectives: A Gradient Perspective and Go Beyond.* ICLR 2025. arXiv:2502.19301.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.ops import LossAveraging, average_tokens, completion_token_logps
from medunlearn.unlearn.trainer import UnlearningTrainer


@dataclass
class WGAConfig(UnlearningConfig):
    r"""Configuration of :class:`WGATrainer`: the reference recipe's defaults (OpenUnlearning ``WGA.yaml``).

    Parameters:
        beta (`float`, *optional*, defaults to `1.0`):
            β, power of the detached token probability used as weight, w = p^β; `0` is plain ascent [recipe].
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the WGA forget term [recipe].
        retain_weight (`float`, *optional*, defaults to `1.0`):
            α, weight of the retain NLL [recipe].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the WGA term and the retain NLL: ``"sequence"`` [ours] per answer, then over
            answers; ``"token"`` one token mean over each batch. The reference takes one token mean
            (``src/trainer/utils.py:114``, retain ``src/trainer/unlearn/grad_diff.py:29``, at d3d7cf9).

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

    beta: float = field(
        default=1.0,
        metadata={
            "help": "β: power of the detached token probability used as weight, w = p^β (0 = plain ascent)"
        },
    )
    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the WGA forget term"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain NLL"})


def wga_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    beta: float = 1.0,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """WGA forget loss; ``logits`` [B, T, V] as the model returns them, ``labels`` [B, T] unshifted, -100
    ignored."""
    token_logps, answer_mask = completion_token_logps(logits, labels)
    weights = token_logps.detach().exp().pow(beta)
    return average_tokens(weights * token_logps, answer_mask, averaging, num_items)


class WGATrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = WGAConfig
    reference_usage = "none"
    uses_retain = True

    def unlearning_loss(self, model, forget, retain):
        forget_logits, retain_logits = self.forward_pair(model, forget, self.retain_part(retain))
        forget_loss = wga_loss(
            forget_logits, forget["labels"], self.args.beta, **self.token_reduction("forget")
        )
        return self.with_retain_nll(model, retain, {"forget_loss": forget_loss}, retain_logits)
