r"""SatImp — token reweighting by Saturation and Importance.

SatImp keeps WGA's idea of weighting each forget token's log-likelihood, but multiplies two detached
weights: a *saturation* weight :math:`p^{\beta_1}` (tokens the model still predicts well are not yet
unlearned, so they get more weight) and an *importance* weight :math:`(1-p)^{\beta_2}` (a smooth
down-weighting of tokens that are near-certain, which carry little information about the patient):

.. math::

    \mathcal{L}_{\mathrm{SatImp}}(\theta) = \frac{1}{|\mathcal{T}|} \sum_{(i,t) \in \mathcal{T}}
        \operatorname{sg}\!\left[p^{\beta_1}\,(1-p)^{\beta_2}\right]
        \log p, \qquad p = p_\theta(y_{i,t} \mid x_i, y_{i,<t})

over the answer tokens :math:`\mathcal{T}` of the forget batch (labels ``!= -100``). Minimising it lowers
the forget log-likelihood. The full objective is
:math:`\gamma\,\mathcal{L}_{\mathrm{SatImp}} + \alpha\,\mathcal{L}_{\mathrm{retain}}`.

Defaults: :math:`\beta_1 = 5`, :math:`\beta_2 = 1` (paper and reference). For the loss weights the reference
code and its recipe disagree (code: gamma=1, alpha=0.1; recipe ``SatImp.yaml``: gamma=0.1, alpha=1); we take
the recipe, which is what the reference actually runs.

Citation: Puning Yang, Qizhou Wang, Zhuo Huang, Tongliang Liu, Chengqi Zhang, Bo Han.
*Exploring Criteria of Loss Reweighting to Enhance LLM Unlearning.* ICML 2025. arXiv:2505.11953.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from medunlearn.unlearn.wga import answer_token_log_probs


@dataclass
class SatImpConfig:
    """SatImp's own hyperparameters, with the paper's / reference recipe's defaults."""

    beta1: float = field(default=5.0, metadata={"help": "Saturation exponent: weight factor p^beta1."})
    beta2: float = field(default=1.0, metadata={"help": "Importance exponent: weight factor (1 - p)^beta2."})
    gamma: float = field(default=0.1, metadata={"help": "Weight of the forget loss (reference recipe)."})
    alpha: float = field(default=1.0, metadata={"help": "Weight of the retain loss (reference recipe)."})


def satimp_loss(logits: torch.Tensor, labels: torch.Tensor, beta1: float = 5.0, beta2: float = 1.0) -> torch.Tensor:
    """SatImp forget loss; ``logits`` [B, T, V] as the model returns them, ``labels`` [B, T] unshifted, -100 ignored."""
    token_log_probs, answer_mask = answer_token_log_probs(logits, labels)
    probs = token_log_probs.detach().exp()
    weights = probs.pow(beta1) * (1.0 - probs).pow(beta2)
    return (weights * token_log_probs * answer_mask).sum() / answer_mask.sum().clamp(min=1)
