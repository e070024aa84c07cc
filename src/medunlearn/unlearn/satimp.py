r"""SatImp — token reweighting by Saturation and Importance.

SatImp keeps WGA's idea of weighting each forget token's log-likelihood, but multiplies two detached weights:
a *saturation* weight :math:`p^{\beta_1}` (tokens the model still predicts well are not yet unlearned, so they
weigh more) and an *importance* weight :math:`(1-p)^{\beta_2}`, which does the opposite and damps the tokens
the model is near-certain of. The paper finds saturation matters more and the product better than either:

.. math::

    \mathcal{L}_{\mathrm{SatImp}}(\theta) = \frac{1}{B} \sum_{b=1}^{B} \frac{1}{|y_b|} \sum_{t}
        \operatorname{sg}\!\left[p^{\beta_1}(1-p)^{\beta_2}\right] \log p,
    \quad p = p_\theta(y_{b,t} \mid x_b, y_{b,<t}),
    \qquad
    \mathcal{L} = \gamma\,\mathcal{L}_{\mathrm{SatImp}} + \alpha\,\mathrm{NLL}_\theta(\text{retain})

over the answer tokens :math:`y_b` (labels ``!= -100``). Minimising it lowers the forget log-likelihood.

Defaults: :math:`\beta_1 = 5`, :math:`\beta_2 = 1`. For the loss weights the reference code and its recipe
disagree (code: gamma = 1, alpha = 0.1; recipe ``SatImp.yaml``: gamma = 0.1, alpha = 1); we take the recipe,
which is what the reference actually runs, with its lr 1e-5 and 5 epochs.

Ours: the mean is per answer, then over answers (the library's reduction, see ``ops.py``); the reference
averages over all tokens of the batch. No reference model is built.

Citation: Puning Yang, Qizhou Wang, Zhuo Huang, Tongliang Liu, Chengqi Zhang, Bo Han.
*Exploring Criteria of Loss Reweighting to Enhance LLM Unlearning.* ICML 2025. arXiv:2505.11953.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.ops import LossAveraging, average_tokens, completion_token_logps
from medunlearn.unlearn.trainer import UnlearningTrainer


@dataclass
class SatImpConfig(UnlearningConfig):
    r"""Configuration of :class:`SatImpTrainer`: the paper's exponents, ``SatImp.yaml``'s loss weights.

    Parameters:
        beta1 (`float`, *optional*, defaults to `5.0`):
            β1, saturation exponent: weight factor p^β1 [paper].
        beta2 (`float`, *optional*, defaults to `1.0`):
            β2, importance exponent: weight factor (1 − p)^β2 [paper].
        forget_weight (`float`, *optional*, defaults to `0.1`):
            γ, weight of the SatImp forget term [recipe; the reference code says 1].
        retain_weight (`float`, *optional*, defaults to `1.0`):
            α, weight of the retain NLL [recipe; the reference code says 0.1].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the SatImp term and the retain NLL: ``"sequence"`` [ours] per answer, then over
            answers; ``"token"`` one token mean over each batch. The reference takes one token mean
            (``src/trainer/utils.py:131-133``, retain ``src/trainer/unlearn/grad_diff.py:29``, at d3d7cf9).

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

    beta1: float = field(default=5.0, metadata={"help": "β1, saturation exponent: weight factor p^β1"})
    beta2: float = field(default=1.0, metadata={"help": "β2, importance exponent: weight factor (1 − p)^β2"})
    forget_weight: float = field(default=0.1, metadata={"help": "γ, weight of the SatImp forget term"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain NLL"})


def satimp_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    beta1: float = 5.0,
    beta2: float = 1.0,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """SatImp forget loss; ``logits`` [B, T, V] as the model returns them, ``labels`` [B, T] unshifted, -100
    ignored."""
    token_logps, answer_mask = completion_token_logps(logits, labels)
    probs = token_logps.detach().exp()
    weights = probs.pow(beta1) * (1.0 - probs).pow(beta2)
    return average_tokens(weights * token_logps, answer_mask, averaging, num_items)


class SatImpTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = SatImpConfig
    reference_usage = "none"
    uses_retain = True

    def unlearning_loss(self, model, forget, retain):
        forget_logits, retain_logits = self.forward_pair(model, forget, self.retain_part(retain))
        forget_loss = satimp_loss(
            forget_logits,
            forget["labels"],
            self.args.beta1,
            self.args.beta2,
            **self.token_reduction("forget"),
        )
        return self.with_retain_nll(model, retain, {"forget_loss": forget_loss}, retain_logits)
