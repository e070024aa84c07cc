"""``UnlearningConfig``: the hyperparameters every unlearning method shares, on top of ``TrainingArguments``.

Allowed values are ``Literal`` types: ``HfArgumentParser`` (hence ``TrlParser`` and ``medunlearn unlearn``)
turns them into ``choices``, and ``__post_init__`` checks them for configs built in Python or from a recipe,
whose values never pass through argparse.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from transformers import TrainingArguments

from medunlearn.unlearn.errors import UnlearningInputError


@functools.cache
def literal_choices(config_class: type) -> dict[str, tuple[Any, ...]]:
    """``{field: allowed values}`` for every field of a dataclass annotated ``Literal[...]``."""
    hints = typing.get_type_hints(config_class)
    return {name: typing.get_args(hint) for name, hint in hints.items() if typing.get_origin(hint) is Literal}


def check_literal_fields(config) -> None:
    """Raise ``UnlearningInputError`` naming the first ``Literal`` field whose value is not one it allows."""
    for name, choices in literal_choices(type(config)).items():
        value = getattr(config, name)
        if value not in choices:
            allowed = ", ".join(repr(choice) for choice in choices)
            raise UnlearningInputError(
                f"{type(config).__name__}.{name} must be one of {allowed}, got {value!r}"
            )


@dataclass
class UnlearningConfig(TrainingArguments):
    r"""Hyperparameters shared by every unlearning method, on top of ``transformers.TrainingArguments``.

    The total loss is ``L = forget_weight · L_forget + retain_weight · L_retain`` (OpenUnlearning's γ and α).
    The training defaults are those common to the methods (OpenUnlearning's TOFU recipe: lr 1e-5, weight
    decay 0.01, batch 4, 5 epochs); each method's config overrides what its paper sets. Through
    ``HfArgumentParser`` (or ``TrlParser``) every field is a command-line option of ``medunlearn unlearn``.

    Parameters:
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the forget term [OpenUnlearning].
        retain_weight (`float`, *optional*, defaults to `1.0`):
            α, weight of the retain term [OpenUnlearning]; ignored by methods with ``uses_retain = False``.
        retain_sampling (`Literal["random", "same_disease"]`, *optional*, defaults to `"random"`):
            How each forget example is paired with a retain example [ours]. ``"random"``: uniformly over the
            retain set. ``"same_disease"``: uniformly over retained patients with the same ``disease``
            (uniformly over all for a disease absent from the retain set). Redrawn every epoch, seeded by
            ``seed`` and the epoch.
        max_length (`int`, *optional*, defaults to `512`):
            Prompt + completion tokens kept per example; longer examples are truncated on the right.
        reference_mode (`Literal["auto", "precomputed", "adapter", "copy"]`, defaults to `"auto"`):
            Where reference outputs come from (the policy in ``medunlearn.unlearn.trainer``). ``"auto"``:
            nothing for reference-free methods, precomputed sequence log-probs for those that need only
            them (NPO, IdkDPO), otherwise the adapter-disabled model under PEFT or a frozen copy.
            ``"precomputed"``, ``"adapter"`` and ``"copy"`` force one source.
        question_column (`str`, *optional*, defaults to `"question"`):
            Column of the forget and retain datasets holding the prompt.
        answer_column (`str`, *optional*, defaults to `"answer"`):
            Column of the forget and retain datasets holding the completion.
        disease_column (`str`, *optional*, defaults to `"disease"`):
            Column used by ``retain_sampling="same_disease"``.
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            How every loss term that averages tokens does it (``medunlearn.unlearn.ops``). ``"sequence"``
            [ours]: each answer's token mean, then the mean over answers. ``"token"`` [HF
            ``outputs.loss``]: one token mean over the batch, divided by the step's token count over every
            process and accumulation micro-batch (transformers' ``num_items_in_batch``), so results do not
            depend on the number of processes. Sequence-level terms (NPO, SimNPO, IdkDPO forget terms) are
            not token averages and do not change. ``reference_loss_averaging`` (a class attribute of each
            method's config) is the reference implementation's choice, which the ``open-unlearning``
            conventions select.
        eval_probe_steps (`int | None`, *optional*, defaults to `None`):
            Evaluation during unlearning [ours] (``medunlearn.unlearn.probe``): score a small probe set at
            step 0, every N steps and at the last step, log ``probe_afe``, ``probe_retain_mu`` and
            ``probe_retain_mu_drop``, and save the rule's best step in ``OUTPUT_DIR/best/``. `None`: off.
        probe_patients (`int`, *optional*, defaults to `4`):
            Forget patients and retained patients in the probe (each; all their QA), a draw seeded by `seed`.
        probe_max_new_tokens (`int`, *optional*, defaults to `16`):
            Greedy tokens generated per probe question (scored with ROUGE-L F1 against the gold answer).
        max_retain_mu_drop (`float`, *optional*, defaults to `0.05`):
            The rule's bound [ours]: the kept step has the highest probe AFE among the probed steps whose
            retain MU is at most this far below step 0's.

    > [!NOTE]
    > These parameters have default values different from [`~transformers.TrainingArguments`]:
    > - `learning_rate`: defaults to `1e-5` instead of `5e-5`.
    > - `weight_decay`: defaults to `0.01` instead of `0.0`.
    > - `per_device_train_batch_size`: defaults to `4` instead of `8`.
    > - `num_train_epochs`: defaults to `5.0` instead of `3.0`.
    > - `logging_steps`: defaults to `10` instead of `500`.
    > - `save_strategy`: defaults to `"no"` instead of `"steps"`.
    > - `remove_unused_columns`: defaults to `False` instead of `True`, and is forced to `False`: the trainer
    >   feeds nested forget/retain batches, and dropping "unused" columns would drop them all.
    """

    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the forget loss"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain loss"})
    retain_sampling: Literal["random", "same_disease"] = field(
        default="random", metadata={"help": "how retain examples are paired with forget examples"}
    )
    max_length: int = field(default=512, metadata={"help": "max prompt+completion tokens per example"})
    reference_mode: Literal["auto", "precomputed", "adapter", "copy"] = field(
        default="auto", metadata={"help": "where reference outputs come from"}
    )
    question_column: str = field(default="question", metadata={"help": "prompt column"})
    answer_column: str = field(default="answer", metadata={"help": "completion column"})
    disease_column: str = field(default="disease", metadata={"help": "column used by same_disease sampling"})
    loss_averaging: Literal["sequence", "token"] = field(
        default="sequence",
        metadata={"help": "sequence: mean per answer, then over answers; token: one mean over all tokens"},
    )
    eval_probe_steps: int | None = field(
        default=None, metadata={"help": "score a probe set every N steps and keep the best step (off: None)"}
    )
    probe_patients: int = field(default=4, metadata={"help": "forget and retained patients in the probe"})
    probe_max_new_tokens: int = field(default=16, metadata={"help": "greedy tokens per probe question"})
    max_retain_mu_drop: float = field(
        default=0.05, metadata={"help": "the kept step's largest allowed probe retain-MU drop from step 0"}
    )
    # OpenUnlearning (d3d7cf9) takes one token mean over the batch in its forget terms and retain NLL (HF
    # ``outputs.loss``); a method whose reference averages per sequence overrides this.
    reference_loss_averaging = "token"

    # TrainingArguments fields whose default differs for unlearning.
    learning_rate: float = field(default=1e-5, metadata={"help": "AdamW learning rate"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    per_device_train_batch_size: int = field(
        default=4, metadata={"help": "forget examples per device per step"}
    )
    num_train_epochs: float = field(default=5.0, metadata={"help": "epochs over the forget set"})
    logging_steps: float = field(default=10, metadata={"help": "log every N steps"})
    save_strategy: str = field(default="no", metadata={"help": "checkpointing: no | steps | epoch"})
    remove_unused_columns: bool = field(default=False, metadata={"help": "must stay False for unlearning"})

    def __post_init__(self):
        check_literal_fields(self)
        if self.eval_probe_steps is not None and self.eval_probe_steps < 1:
            raise UnlearningInputError(
                f"eval_probe_steps must be at least 1 (or None), got {self.eval_probe_steps}"
            )
        if self.probe_patients < 1:
            raise UnlearningInputError(f"probe_patients must be at least 1, got {self.probe_patients}")
        self.remove_unused_columns = False
        super().__post_init__()

    def method_hyperparameters(self) -> dict[str, Any]:
        """Fields this config adds to ``TrainingArguments``: the method's settings a model card lists."""
        base = set(TrainingArguments.__dataclass_fields__)
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if name not in base}
