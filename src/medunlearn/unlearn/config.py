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
from medunlearn.utils.precision import Precision, default_device, resolve_precision, training_bf16


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
    The training defaults are those common to the methods: lr 1e-5 and weight decay 0.01 as OpenUnlearning's
    TOFU experiment; batch 4 × 1 and 5 epochs are ours (more optimiser steps on small forget sets). The
    ``open-unlearning`` preset selects the reference's recipe instead (8 × 4, 10 epochs, a warm-up epoch;
    ``medunlearn.unlearn.reference_recipe``, docs/tofu.md). Each method's config overrides what its paper
    sets. Through ``HfArgumentParser`` (or ``TrlParser``) every field is a command-line option of
    ``medunlearn unlearn``.

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
            them (NPO, IdkDPO), precomputed outputs on fixed rows for KL-Min, RMU and UNDIAL when they fit
            (``medunlearn.unlearn.frozen``), otherwise the adapter-disabled model under PEFT or a frozen copy.
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
        data_format (`Literal["qa", "text"]`, *optional*, defaults to `"qa"`):
            What the forget and retain sets hold. ``"qa"``: question/answer rows rendered by the conventions,
            loss on the answer. ``"text"``: documents (``text_column``), no chat template, cut into chunks of
            at most ``max_length`` tokens, loss on every text token of each chunk
            (``medunlearn.unlearn.text``).
        text_column (`str`, *optional*, defaults to `"text"`):
            Column of the forget and retain datasets holding the documents (``data_format="text"``).
        text_chunking (`Literal["document", "stream"]`, *optional*, defaults to `"document"`):
            How documents become chunks. ``"document"`` [ours]: each document alone, so no chunk mixes two
            documents. ``"stream"`` [the reference's, ``src/data/pretraining.py:71-84`` at d3d7cf9]: all
            documents joined by a blank line and cut as one token stream.
        warmup_epochs (`float | None`, *optional*, defaults to `None`):
            Linear warm-up over this many epochs of the forget set [the reference's custom argument]:
            ``warmup_steps = int(warmup_epochs · rows // (batch · accumulation · processes))``, set when the
            trainer is built. `None`: ``warmup_steps`` as given (default 0).
        dtype (`Literal["auto", "float32", "bfloat16"]`, *optional*, defaults to `"auto"`):
            The precision [ours, docs/scaling.md "Precision"]. ``"bfloat16"``: mixed precision, the weights
            kept in float32 and the forward and backward passes under bf16 autocast (sets ``bf16``).
            ``"auto"``: bf16 on a GPU that supports it, and on a CPU only where its flags say native bf16 and
            a probe measures it at least 1.5× as fast as float32 (``medunlearn.utils.precision``); a ``bf16``
            or ``fp16`` set by a recipe or the command line stands. The ``open-unlearning`` preset makes
            ``"float32"`` the default on CPU. ``"float32"`` with ``bf16`` or ``fp16`` is an error.

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
    data_format: Literal["qa", "text"] = field(
        default="qa", metadata={"help": "qa: question/answer rows; text: documents cut into chunks"}
    )
    text_column: str = field(default="text", metadata={"help": "document column (data_format text)"})
    text_chunking: Literal["document", "stream"] = field(
        default="document",
        metadata={
            "help": "document: chunks never cross documents; stream: one joined stream (the reference)"
        },
    )
    warmup_epochs: float | None = field(
        default=None,
        metadata={"help": "linear warm-up over this many forget-set epochs (None: warmup_steps)"},
    )
    dtype: Literal["auto", "float32", "bfloat16"] = field(
        default="auto", metadata={"help": "precision: auto, float32, or bfloat16 (autocast, float32 weights)"}
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
    save_strategy: Literal["no", "steps", "epoch", "best"] = field(
        default="no", metadata={"help": "checkpointing: no, steps, epoch or best"}
    )
    remove_unused_columns: bool = field(default=False, metadata={"help": "must stay False for unlearning"})

    def __post_init__(self):
        check_literal_fields(self)
        if self.eval_probe_steps is not None and self.eval_probe_steps < 1:
            raise UnlearningInputError(
                f"eval_probe_steps must be at least 1 (or None), got {self.eval_probe_steps}"
            )
        if self.warmup_epochs is not None and self.warmup_epochs < 0:
            raise UnlearningInputError(
                f"warmup_epochs must be at least 0 (or None), got {self.warmup_epochs}"
            )
        if self.data_format == "text" and self.eval_probe_steps is not None:
            raise UnlearningInputError(
                "eval_probe_steps needs question/answer rows to probe; data_format='text' has none"
            )
        if self.probe_patients < 1:
            raise UnlearningInputError(f"probe_patients must be at least 1, got {self.probe_patients}")
        self.remove_unused_columns = False
        self.bf16 = training_bf16(self.dtype, self.bf16, self.fp16, self.precision())
        super().__post_init__()

    def precision(self) -> Precision:
        """``dtype`` resolved for the device this config trains on (the CPU under ``use_cpu``)."""
        device = "cpu" if self.use_cpu else default_device()
        return resolve_precision(self.dtype, device)

    def method_hyperparameters(self) -> dict[str, Any]:
        """Fields this config adds to ``TrainingArguments``: the method's settings a model card lists."""
        base = set(TrainingArguments.__dataclass_fields__)
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if name not in base}


def set_warmup_steps(args: UnlearningConfig, forget_rows: int) -> None:
    """With ``args.warmup_epochs`` set, ``args.warmup_steps = int(warmup_epochs · rows // (batch ·
    accumulation · processes))``, the reference's formula (OpenUnlearning d3d7cf9
    ``src/trainer/__init__.py:33-42``, which counts the visible GPUs where we count the processes)."""
    if args.warmup_epochs is None:
        return
    examples_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
    args.warmup_steps = int(args.warmup_epochs * forget_rows // examples_per_step)
