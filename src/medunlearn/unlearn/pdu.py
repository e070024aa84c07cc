r"""PDU — Primal-Dual Unlearning with a logit-margin flattening loss (Constrained Entropic Unlearning).

Unlearning as a constrained problem: make the model's next-token distribution on the forget answers as flat as
possible, subject to the retain loss staying below a bound :math:`\varepsilon`:

.. math::

    \min_\theta\; \mathcal{L}_{\mathrm{flat}}(\theta) \quad\text{s.t.}\quad
        \mathrm{NLL}_\theta(\text{retain}) \le \varepsilon, \qquad
    \mathcal{L}_{\mathrm{flat}}(\theta) = \frac{1}{B} \sum_{b=1}^{B} \frac{1}{|y_b|} \sum_{t}
        \Bigl(\max_v z_{b,t}(v) - \tfrac{1}{V}\textstyle\sum_v z_{b,t}(v)\Bigr)^2

where :math:`z_{b,t}` are the logits at the position predicting answer token :math:`y_{b,t}`. The margin
between the top logit and the mean logit is zero exactly when all logits are equal (the uniform distribution),
and the loss needs no softmax. It is solved by primal-dual descent on the Lagrangian

.. math::

    \mathcal{L}(\theta, \lambda) = \gamma\,\mathcal{L}_{\mathrm{flat}}(\theta)
        + \lambda\,\bigl(\mathrm{NLL}_\theta(\text{retain}) - \varepsilon\bigr), \qquad
    \lambda \leftarrow \max\bigl(0,\;
        \lambda + \eta\,(\overline{\mathrm{NLL}}_{\text{retain}} - \varepsilon)\bigr)

with :math:`\lambda_0 = \alpha`, and the dual step taken after each optimiser step once ``dual_warmup_epochs``
have passed, on the retain loss averaged over that step's micro-batches and processes (so every process holds
the same :math:`\lambda`).

Ours: (1) :math:`z_{b,t}` are the logits at the positions that *predict* the answer tokens (shifted labels
``!= -100``), mean per answer then over answers (the library's reduction). The reference (OpenUnlearning
d3d7cf9, ``src/trainer/unlearn/pdu.py:115-122``) takes the logits at the positions whose own, unshifted label
is kept: the answer tokens' positions, which predict the token after each one (the last one predicts past
the answer's EOS; the position predicting the first answer token is left out), one token mean over the batch;
prompt and padding are masked in both. ``forget_positions="labelled"`` selects the reference's positions, and
the ``open-unlearning`` preset selects it with ``loss_averaging="token"``. (2) When ``retain_loss_eps`` is
unset, :math:`\varepsilon = \kappa \cdot \mathrm{NLL}_{\theta_0}(\text{retain})`, the starting model's
retain loss on the first step times ``retain_loss_eps_factor`` :math:`\kappa`, after the authors' advice to
pick a value somewhat above the starting retain loss. :math:`\lambda` and :math:`\varepsilon` are saved in
each checkpoint's trainer state (``stateful_callbacks["PDUDualState"]``), so
``train(resume_from_checkpoint=...)`` continues with them.
Defaults: the authors' TOFU recipe (gamma = 1, lambda_0 = 100, eta = 5, 5 warm-up epochs, lr 1e-5, 10 epochs;
epsilon = 0.3 there). The ``open-unlearning`` preset takes the reference's config instead (λ₀ = 1, η = 1,
``retain_loss_eps`` required: ``configs/trainer/PDU.yaml:6-12``; docs/tofu.md lists each value); ours are kept
as defaults because they are the recipe the authors report their TOFU results with, and the derived ε spares
a per-model guess. (3) The dual step: ours after each optimiser step on the step's mean retain loss over its
micro-batches and processes, so 2 processes = 1 process; the reference steps per micro-batch
(``pdu.py:59-62``), hence ``gradient_accumulation_steps`` times per optimiser step, from the end of the epoch
that reaches ``dual_warmup_epochs`` (``pdu.py:143-145``).

Citation: Taha Entesari, Arman Hatami, Rinat Khaziev, Anil Ramakrishna, Mahyar Fazlyab.
*Constrained Entropic Unlearning: A Primal-Dual Framework for Large Language Models.* arXiv:2506.05314, 2025.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from transformers import TrainerCallback

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.ops import LossAveraging, average_tokens, nll_loss, shift_for_next_token
from medunlearn.unlearn.trainer import UnlearningTrainer

FlatteningPositions = Literal["predicting", "labelled"]


@dataclass
class PDUConfig(UnlearningConfig):
    r"""Configuration of :class:`PDUTrainer`, with the authors' TOFU recipe as defaults.

    Parameters:
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the logit-margin flattening term [authors' recipe].
        retain_weight (`float`, *optional*, defaults to `100.0`):
            α, the initial dual variable λ₀, weight of the retain constraint; must be ≥ 0 [authors' recipe].
        retain_loss_eps (`float | None`, *optional*, defaults to `None`):
            ε, bound on the retain NLL; must be ≥ 0 (TOFU recipe: 0.3). Unset: ``retain_loss_eps_factor``
            × the starting model's retain NLL on the first step [ours].
        retain_loss_eps_factor (`float`, *optional*, defaults to `1.1`):
            κ, the factor of the starting retain NLL that gives ε when ``retain_loss_eps`` is unset [ours].
        forget_positions (`Literal["predicting", "labelled"]`, *optional*, defaults to `"predicting"`):
            Where the flattening term reads the logits: ``"predicting"`` [ours] the positions predicting each
            answer token (shifted labels); ``"labelled"`` [the reference's, ``src/trainer/unlearn/pdu.py:
            115-122`` at d3d7cf9] the positions of the answer tokens themselves (unshifted labels).
        primal_dual (`bool`, *optional*, defaults to `True`):
            Whether to update λ by dual ascent; `False` keeps λ at α [authors].
        dual_step_size (`float`, *optional*, defaults to `5.0`):
            η, step of the dual ascent on λ; must be ≥ 0 [authors' recipe].
        dual_warmup_epochs (`float`, *optional*, defaults to `5.0`):
            Epochs with λ held at λ₀ before the dual updates start [authors' recipe].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the flattening term and the retain NLL: ``"sequence"`` [ours] per answer, then
            over answers; ``"token"`` one token mean over each batch. The reference takes one token mean
            (``src/trainer/unlearn/pdu.py:121-122``, retain ``src/trainer/unlearn/grad_diff.py:29``, at
            d3d7cf9).

    > [!NOTE]
    > These parameters have default values different from [`~transformers.TrainingArguments`] beyond those set
    > by [`UnlearningConfig`] (whose shared fields and other training defaults apply):
    > - `num_train_epochs`: defaults to `10.0` instead of `3.0` (authors' recipe).

    The ranges (ε, λ₀, η ≥ 0) are checked in ``__post_init__``: ``HfArgumentParser`` has no way to state them.
    """

    forget_weight: float = field(
        default=1.0, metadata={"help": "γ, weight of the logit-margin flattening term"}
    )
    retain_weight: float = field(
        default=100.0, metadata={"help": "α: initial dual variable λ₀, the weight of the retain constraint"}
    )
    retain_loss_eps: float | None = field(
        default=None,
        metadata={
            "help": "ε, bound on the retain NLL; unset: retain_loss_eps_factor × the starting retain NLL"
        },
    )
    retain_loss_eps_factor: float = field(
        default=1.1, metadata={"help": "κ [ours]: ε = κ × starting retain NLL when ε is unset"}
    )
    forget_positions: Literal["predicting", "labelled"] = field(
        default="predicting",
        metadata={
            "help": "predicting: logits predicting answer tokens; labelled: at answer tokens (reference)"
        },
    )
    primal_dual: bool = field(default=True, metadata={"help": "update λ by dual ascent (False: λ stays α)"})
    dual_step_size: float = field(default=5.0, metadata={"help": "η, dual ascent step on λ"})
    dual_warmup_epochs: float = field(
        default=5.0, metadata={"help": "epochs with λ held at λ₀ before dual updates start"}
    )
    num_train_epochs: float = field(
        default=10.0, metadata={"help": "epochs over the forget set (recipe: 10)"}
    )

    def __post_init__(self):
        super().__post_init__()
        if self.retain_loss_eps is not None and self.retain_loss_eps < 0:
            raise UnlearningInputError(f"retain_loss_eps must be >= 0, got {self.retain_loss_eps}")
        if self.retain_weight < 0 or self.dual_step_size < 0:
            raise UnlearningInputError("retain_weight (initial λ) and dual_step_size must be >= 0")


def logit_margin_flattening_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
    positions: FlatteningPositions = "predicting",
) -> torch.Tensor:
    """Mean over answer tokens of (max logit − mean logit)²; ``labels`` [B, T] unshifted, -100 ignored.

    ``positions``: ``"predicting"`` reads the logits that predict each answer token, ``"labelled"`` those at
    the answer tokens themselves (the reference's; :class:`PDUConfig`)."""
    if positions == "labelled":
        position_logits, position_labels = logits, labels
    else:
        position_logits, position_labels = shift_for_next_token(logits, labels)
    answer_mask = position_labels != -100
    answer_logits = position_logits[answer_mask].float()
    margin = answer_logits.max(dim=-1).values - answer_logits.mean(dim=-1)
    per_position = answer_logits.new_zeros(answer_mask.shape).masked_scatter(answer_mask, margin.pow(2))
    return average_tokens(per_position, answer_mask, averaging, num_items)


def constrained_objective(
    forget_loss: torch.Tensor,
    retain_loss: torch.Tensor,
    dual: float,
    retain_loss_eps: float,
    gamma: float = 1.0,
) -> torch.Tensor:
    """The Lagrangian γ · L_forget + λ · (L_retain − ε) that the primal step minimises."""
    return gamma * forget_loss + dual * (retain_loss - retain_loss_eps)


def dual_ascent_step(dual: float, retain_loss: float, retain_loss_eps: float, step_size: float) -> float:
    """Projected dual ascent: λ grows while the constraint is violated, shrinks (never below 0) otherwise."""
    return max(0.0, dual + step_size * (retain_loss - retain_loss_eps))


class PDUTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = PDUConfig
    reference_usage = "none"
    uses_retain = True

    def __init__(self, *positional, **keywords):
        super().__init__(*positional, **keywords)
        self.dual = float(self.args.retain_weight)
        self.retain_loss_eps = self.args.retain_loss_eps
        self._step_retain_losses: list[torch.Tensor] = []
        self.add_callback(_DualAscentCallback(self))

    def unlearning_loss(self, model, forget, retain):
        forget_logits, retain_logits = self.forward_pair(model, forget, retain)
        forget_loss = logit_margin_flattening_loss(
            forget_logits,
            forget["labels"],
            **self.token_reduction("forget"),
            positions=self.args.forget_positions,
        )
        retain_loss = nll_loss(retain_logits, retain["labels"], **self.token_reduction("retain"))
        if self.retain_loss_eps is None:
            starting_retain_loss = self.accelerator.reduce(retain_loss.detach(), reduction="mean")
            self.retain_loss_eps = self.args.retain_loss_eps_factor * float(starting_retain_loss)
        if model.training:
            self._step_retain_losses.append(retain_loss.detach())
        loss = constrained_objective(
            forget_loss, retain_loss, self.dual, self.retain_loss_eps, self.args.forget_weight
        )
        return {
            "loss": loss,
            "forget_loss": forget_loss,
            "retain_loss": retain_loss,
            "dual": torch.tensor(self.dual),
            "retain_loss_eps": torch.tensor(self.retain_loss_eps),
        }

    def count_loss_tokens(self, part, batch):
        """With ``forget_positions="labelled"`` the flattening term averages the unshifted answer tokens."""
        if part == "forget" and self.args.forget_positions == "labelled":
            return (batch["labels"] != -100).sum()
        return super().count_loss_tokens(part, batch)

    def update_dual(self, epoch: float) -> None:
        """One dual ascent step on the retain loss of the optimiser step just taken (averaged over
        processes)."""
        if not self._step_retain_losses:
            return
        step_retain_loss = self.accelerator.reduce(
            torch.stack(self._step_retain_losses).mean(), reduction="mean"
        )
        self._step_retain_losses.clear()
        if self.args.primal_dual and epoch >= self.args.dual_warmup_epochs:
            self.dual = dual_ascent_step(
                self.dual, float(step_retain_loss), self.retain_loss_eps, self.args.dual_step_size
            )


DUAL_STATE_KEY = "PDUDualState"
"""Entry of ``TrainerState.stateful_callbacks`` holding λ and ε, so that checkpoints carry them."""


class _DualAscentCallback(TrainerCallback):
    """Takes the dual step after every optimiser step (all micro-batches of the step have been seen by then),
    records λ and ε in the trainer state (saved with every checkpoint) and restores them on resume."""

    def __init__(self, trainer: PDUTrainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        saved = (state.stateful_callbacks or {}).get(DUAL_STATE_KEY)
        if saved:  # resumed from a checkpoint: continue with its λ and ε
            self.trainer.dual = float(saved["attributes"]["dual"])
            self.trainer.retain_loss_eps = saved["attributes"]["retain_loss_eps"]

    def on_step_end(self, args, state, control, **kwargs):
        self.trainer.update_dual(state.epoch or 0.0)
        state.stateful_callbacks[DUAL_STATE_KEY] = {
            "args": {},
            "attributes": {"dual": self.trainer.dual, "retain_loss_eps": self.trainer.retain_loss_eps},
        }
