r"""KL-Min: ascend on the forget NLL while keeping the retain predictive distribution at the reference's.

    L = γ · (−NLL_θ(forget))
        + α · mean_b (1/|y_b|) Σ_{t ∈ completion} KL(π_ref(·|y_{b,<t}, x_b) ‖ π_θ(·|y_{b,<t}, x_b))

Maini et al., TOFU (arXiv 2401.06121), "KL Minimization"; OpenUnlearning's GradDiff with
``retain_loss_type=KL``. One of the four methods of the AMNESIA paper. The KL is taken on retain completion
tokens only (−100 positions are excluded; the reference system averages over padding and prompt too).
γ = α = 1.

Reference: its logits at the retain rows' answer positions, precomputed once before training when they fit
``UnlearningTrainer.frozen_memory_limit_bytes`` (rows × answer tokens × vocabulary × dtype bytes;
``medunlearn.unlearn.frozen``); otherwise, or with ``reference_mode="copy"`` / ``"adapter"``, live: the
adapter-disabled model under PEFT, else a frozen copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.ops import TwoTermWeighting, kl_loss, nll_loss, resolve_weighting
from medunlearn.unlearn.trainer import UnlearningTrainer


def kl_min_loss(
    forget_logits: torch.Tensor,
    forget_labels: torch.Tensor,
    retain_logits: torch.Tensor,
    retain_reference_logits: torch.Tensor,
    retain_labels: torch.Tensor,
    weighting: TwoTermWeighting | None = None,
    **weights,
) -> dict[str, torch.Tensor]:
    w = resolve_weighting(weighting, weights)
    forget_loss = -nll_loss(forget_logits, forget_labels, w.averaging, w.forget_num_items)
    retain_loss = kl_loss(
        retain_logits, retain_reference_logits, retain_labels, w.averaging, w.retain_num_items
    )
    return w.combine(forget_loss, retain_loss)


@dataclass
class KLMinConfig(UnlearningConfig):
    r"""Configuration of :class:`KLMinTrainer`, with the TOFU / OpenUnlearning defaults γ = α = 1.

    Parameters:
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the forget ascent term [TOFU, OpenUnlearning].
        retain_weight (`float`, *optional*, defaults to `1.0`):
            α, weight of the KL(π_ref ‖ π_θ) term on retain completions [TOFU, OpenUnlearning].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the forget NLL and the retain KL: ``"sequence"`` [ours] per answer, then over
            answers; ``"token"`` one token mean over each batch. The reference's forget term is one token mean
            (``src/trainer/unlearn/grad_diff.py:50`` at d3d7cf9); its KL averages over every position, prompt
            and padding included (``src/trainer/utils.py:17-31``), which is not reproduced: only answer tokens
            count.

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the forget ascent term"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain KL term"})


class KLMinTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = KLMinConfig
    reference_usage = "model"
    uses_retain = True
    frozen_parts = ("retain",)  # the reference's logits on retain answers, precomputed (unlearn.frozen)

    def unlearning_loss(self, model, forget, retain):
        forget_logits, retain_logits = self.forward_pair(model, forget, retain)
        return kl_min_loss(
            forget_logits,
            forget["labels"],
            retain_logits,
            self.reference_outputs(model, "retain", retain),
            retain["labels"],
            self.two_term_weighting(),
        )
