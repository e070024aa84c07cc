r"""IdkDPO — Direct Preference Optimisation with "I don't know" as the preferred answer.

Each forget question :math:`x` is paired with the patient's true answer :math:`y_f` (dispreferred) and a
refusal :math:`y_{\mathrm{idk}}` drawn from a fixed list (preferred); the model is trained with the DPO loss
against the starting model as reference:

.. math::

    \mathcal{L}_{\mathrm{IdkDPO}}(\theta) = -\frac{2}{\beta}\,\mathbb{E}\,\log\sigma\!\Bigl(\beta\Bigl[
        \log\frac{\pi_\theta(y_{\mathrm{idk}} \mid x)}{\pi_{\mathrm{ref}}(y_{\mathrm{idk}} \mid x)}
      - \log\frac{\pi_\theta(y_f \mid x)}{\pi_{\mathrm{ref}}(y_f \mid x)}\Bigr]\Bigr)

with :math:`\log\pi(y \mid x)` the summed log-probability of the answer tokens. The :math:`2/\beta` scale
follows the unlearning literature (NPO paper and its reference implementation) rather than the original DPO's
1: with it, the loss tends to :math:`\mathrm{NLL}(y_{\mathrm{idk}}) - \mathrm{NLL}(y_f)` up to a constant as
:math:`\beta \to 0`, so learning rates carry over from gradient-difference methods. The full objective is
:math:`\gamma\,\mathcal{L}_{\mathrm{IdkDPO}} + \alpha\,\mathcal{L}_{\mathrm{retain}}`.

The reference terms are fixed per example, so they are computed once before training (or, under PEFT,
with the adapter disabled) instead of keeping a second model alive.

Refusals: ``idk_answers.txt`` beside this file, written for this project for a medical QA model; each
forget example gets one, drawn deterministically from ``idk_seed`` and its position.

Citations: Rafael Rafailov, Archit Sharma, Eric Mitchell, Stefano Ermon, Christopher D. Manning, Chelsea Finn.
*Direct Preference Optimization: Your Language Model is Secretly a Reward Model.* NeurIPS 2023.
Pratyush Maini, Zhili Feng, Avi Schwarzschild, Zachary C. Lipton, J. Zico Kolter.
*TOFU: A Task of Fictitious Unlearning for LLMs.* COLM 2024 ("I don't know" targets).
Ruiqi Zhang, Licong Lin, Yu Bai, Song Mei. *Negative Preference Optimization: From Catastrophic Collapse to
Effective Unlearning.* COLM 2024 (IdkDPO baseline, beta = 0.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

IDK_ANSWERS_PATH = Path(__file__).with_name("idk_answers.txt")


@dataclass
class IdkDPOConfig:
    """IdkDPO's own hyperparameters, with the defaults of the NPO paper's IdkDPO baseline."""

    beta: float = field(default=0.1, metadata={"help": "DPO inverse temperature beta."})
    gamma: float = field(default=1.0, metadata={"help": "Weight of the DPO forget loss."})
    alpha: float = field(default=1.0, metadata={"help": "Weight of the retain loss (NLL on the retain batch)."})
    idk_answers_file: str | None = field(
        default=None, metadata={"help": "Refusal answers, one per line; unset: the list shipped with medunlearn."}
    )
    idk_seed: int = field(default=0, metadata={"help": "Seed of the refusal drawn for each forget example."})


def load_idk_answers(path: str | Path | None = None) -> list[str]:
    """Refusal answers from ``path`` (one per line, blank lines and ``#`` comments skipped)."""
    path = Path(path) if path is not None else IDK_ANSWERS_PATH
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    answers = [line for line in lines if line and not line.startswith("#")]
    if not answers:
        raise ValueError(f"{path}: no refusal answers found (one per line expected)")
    return answers


def assign_idk_answers(num_examples: int, answers: list[str], seed: int = 0) -> list[str]:
    """One refusal per example, drawn uniformly with ``seed``: the same data and seed give the same pairs."""
    picks = np.random.default_rng(seed).integers(0, len(answers), size=num_examples)
    return [answers[i] for i in picks]


def sequence_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed log-probability of each row's answer tokens: [B]; ``labels`` [B, T] unshifted, -100 ignored."""
    shifted_logits, shifted_labels = logits[:, :-1, :], labels[:, 1:]
    nll = F.cross_entropy(
        shifted_logits.flatten(0, 1).float(), shifted_labels.flatten(), ignore_index=-100, reduction="none"
    )
    return -nll.view_as(shifted_labels).sum(dim=-1)


def idk_dpo_loss(
    policy_idk_log_probs: torch.Tensor,
    policy_forget_log_probs: torch.Tensor,
    reference_idk_log_probs: torch.Tensor,
    reference_forget_log_probs: torch.Tensor,
    beta: float = 0.1,
) -> torch.Tensor:
    """DPO loss with the refusal preferred over the forget answer; all inputs are per-example sequence log-probs [B]."""
    idk_log_ratio = policy_idk_log_probs - reference_idk_log_probs
    forget_log_ratio = policy_forget_log_probs - reference_forget_log_probs
    return -(2.0 / beta) * F.logsigmoid(beta * (idk_log_ratio - forget_log_ratio)).mean()
