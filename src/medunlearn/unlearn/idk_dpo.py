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

Reference: the four reference terms are fixed per forget example, so both
:math:`\log\pi_{\mathrm{ref}}(y_f \mid x)` and :math:`\log\pi_{\mathrm{ref}}(y_{\mathrm{idk}} \mid x)` are
computed once with the starting model before training and stored as columns (``reference_mode="auto"``); no
second model lives during training. ``reference_mode="adapter"`` / ``"copy"`` compute them live instead (same
values). Defaults: beta = 0.1, gamma = alpha = 1 (NPO paper's IdkDPO baseline; OpenUnlearning ``DPO``).

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

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.data import tokenize_prompt_completion
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.ops import sequence_logps
from medunlearn.unlearn.trainer import UnlearningTrainer
from medunlearn.utils.user_files import not_a_file, text_lines

IDK_ANSWERS_PATH = Path(__file__).with_name("idk_answers.txt")
IDK_PREFIX = "idk_"
"""Forget-batch columns of the refusal pair: ``idk_input_ids``, ``idk_attention_mask``, ``idk_labels``,
``idk_reference_logps`` (the base collator pads them by their suffix)."""


@dataclass
class IdkDPOConfig(UnlearningConfig):
    r"""Configuration of :class:`IdkDPOTrainer`: the NPO paper's IdkDPO baseline (OpenUnlearning ``DPO``).

    Parameters:
        beta (`float`, *optional*, defaults to `0.1`):
            β, inverse temperature of the DPO loss [NPO paper, OpenUnlearning].
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the DPO term [OpenUnlearning].
        retain_weight (`float`, *optional*, defaults to `1.0`):
            α, weight of the retain NLL [OpenUnlearning].
        idk_answers_file (`str | None`, *optional*, defaults to `None`):
            Refusal answers, one per line (blank lines and ``#`` comments skipped). Unset:
            ``idk_answers.txt``, the list shipped with medunlearn [ours].
        idk_seed (`int`, *optional*, defaults to `0`):
            Seed of the refusal drawn for each forget example [ours].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of the retain NLL: ``"sequence"`` [ours] per answer, then over answers;
            ``"token"`` one token mean over the batch (the reference's,
            ``src/trainer/unlearn/grad_diff.py:29`` at d3d7cf9). The DPO term is a mean over sequences of
            sequence log-probabilities either way.

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

    beta: float = field(default=0.1, metadata={"help": "β, inverse temperature of the DPO loss"})
    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the DPO term"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain NLL"})
    idk_answers_file: str | None = field(
        default=None,
        metadata={"help": "refusal answers, one per line; unset: the list shipped with medunlearn"},
    )
    idk_seed: int = field(default=0, metadata={"help": "seed of the refusal drawn for each forget example"})


def load_idk_answers(path: str | Path | None = None) -> list[str]:
    """Refusal answers from ``path`` (one per line, blank lines and ``#`` comments skipped)."""
    path = Path(path) if path is not None else IDK_ANSWERS_PATH
    if not path.is_file():
        raise UnlearningInputError(f"refusal answers file {path} {not_a_file(path)}")
    lines = (line.strip() for line in text_lines(path))  # the shared reader: a bad byte named by its line
    answers = [line for line in lines if line and not line.startswith("#")]
    if not answers:
        raise UnlearningInputError(f"{path}: no refusal answers found (one per line expected)")
    return answers


def assign_idk_answers(num_examples: int, answers: list[str], seed: int = 0) -> list[str]:
    """One refusal per example, drawn uniformly with ``seed``: the same data and seed give the same pairs."""
    picks = np.random.default_rng(seed).integers(0, len(answers), size=num_examples)
    return [answers[i] for i in picks]


def idk_dpo_loss(
    policy_idk_logps: torch.Tensor,
    policy_forget_logps: torch.Tensor,
    reference_idk_logps: torch.Tensor,
    reference_forget_logps: torch.Tensor,
    beta: float = 0.1,
) -> torch.Tensor:
    """DPO loss preferring the refusal over the forget answer; inputs are sequence log-probs log π(y|x),
    [B]."""
    idk_log_ratio = policy_idk_logps - reference_idk_logps
    forget_log_ratio = policy_forget_logps - reference_forget_logps
    return -(2.0 / beta) * F.logsigmoid(beta * (idk_log_ratio - forget_log_ratio)).mean()


def refusal_part(forget: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The refusal half of a forget batch, under the plain names (``input_ids``, ..., ``reference_logps``)."""
    return {key[len(IDK_PREFIX) :]: value for key, value in forget.items() if key.startswith(IDK_PREFIX)}


class IdkDPOTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = IdkDPOConfig
    reference_usage = "sequence_logps"
    uses_retain = True
    # A refusal answers a forget question; a text corpus has none (TextCorpusUnsupportedError).
    supports_text = False

    def __init__(
        self,
        model,
        args: IdkDPOConfig | None = None,
        forget_dataset=None,
        retain_dataset=None,
        processing_class=None,
        **keywords,
    ):
        args = args or self.config_class(output_dir="unlearned")
        # Tokenising the refusals needs the raw questions, which the base tokenisation drops: do it here.
        self._refusal_columns = self._tokenize_refusals(
            args, forget_dataset, processing_class, keywords.get("conventions")
        )
        super().__init__(model, args, forget_dataset, retain_dataset, processing_class, **keywords)
        if self.reference_source == "precomputed":
            refusals = self.pairs.forget.select_columns(
                [IDK_PREFIX + c for c in ("input_ids", "attention_mask", "labels")]
            )
            refusals = refusals.rename_columns(
                {IDK_PREFIX + c: c for c in ("input_ids", "attention_mask", "labels")}
            )
            self.pairs.forget = self.pairs.forget.add_column(
                IDK_PREFIX + "reference_logps", self.compute_sequence_logps(refusals).tolist()
            )

    @staticmethod
    def _tokenize_refusals(
        args: IdkDPOConfig, forget_dataset, tokenizer, conventions=None
    ) -> dict[str, list] | None:
        if forget_dataset is None or len(forget_dataset) == 0 or tokenizer is None:
            return None  # the base class reports the missing piece
        if args.question_column not in forget_dataset.column_names:
            return None
        questions = list(forget_dataset[args.question_column])
        refusals = assign_idk_answers(len(questions), load_idk_answers(args.idk_answers_file), args.idk_seed)
        tokens = tokenize_prompt_completion(questions, refusals, tokenizer, args.max_length, conventions)
        return {IDK_PREFIX + key: values for key, values in tokens.items()}

    def prepare_forget_dataset(self, forget):
        for name, values in self._refusal_columns.items():
            forget = forget.add_column(name, values)
        return forget

    def unlearning_loss(self, model, forget, retain):
        refusal = refusal_part(forget)
        policy_forget_logps = sequence_logps(self.logits(model, forget), forget["labels"])
        policy_idk_logps = sequence_logps(self.logits(model, refusal), refusal["labels"])
        reference_forget_logps = self.reference_sequence_logps(model, forget)
        reference_idk_logps = self.reference_sequence_logps(model, refusal)
        forget_loss = idk_dpo_loss(
            policy_idk_logps, policy_forget_logps, reference_idk_logps, reference_forget_logps, self.args.beta
        )
        margin = (policy_idk_logps - reference_idk_logps) - (policy_forget_logps - reference_forget_logps)
        return self.with_retain_nll(
            model, retain, {"forget_loss": forget_loss, "preference_margin": margin.mean().detach()}
        )
