"""Shared machinery of every unlearning method: config, trainer, forget/retain batches, log-probs, reference.

How to add a method
-------------------
1. One file ``src/medunlearn/unlearn/<stem>.py`` holding

   * a pure loss function on tensors (what the tests check against a hand computation), e.g.
     ``def my_loss(policy_logps, reference_logps, beta) -> torch.Tensor``;
   * ``MyConfig(UnlearningConfig)``: a dataclass whose fields hold the paper's defaults (one place only);
   * ``MyTrainer(UnlearningTrainer)`` with ``config_class = MyConfig``, ``reference_usage`` (see below),
     ``uses_retain`` and ``unlearning_loss(model, forget, retain) -> UnlearningLoss``.
     The class docstring states the loss equation and cites the paper.
2. One line in ``METHODS`` in ``src/medunlearn/unlearn/methods.py`` (stem, module, classes, aliases, summary).
3. One test ``tests/unlearn/test_<stem>.py``: the loss equals a hand computation on fixed tensors with −100
   labels and padding (to 1e-5), and a few trainer steps on the tiny model move the forget loss the intended way.

Then a recipe ``recipes/<stem>.yaml`` (``method: <stem>`` + the config's defaults) and a page
``docs/methods/<stem>.md``; ``tests/unlearn/test_recipes.py`` checks recipes against the config defaults.

The batch a method sees
-----------------------
Every training step receives ``inputs = {"forget": ForgetBatch, "retain": RetainBatch}`` (``"retain"`` only when
``uses_retain``). Each is a dict of right-padded tensors::

    input_ids       LongTensor [B, T]   prompt + completion tokens (chat template of the model)
    attention_mask  LongTensor [B, T]   1 on real tokens, 0 on padding
    labels          LongTensor [B, T]   completion tokens; −100 on prompt and padding (completion-only)
    <extra>         any column a subclass adds in ``prepare_forget_dataset`` / ``prepare_retain_dataset``:
                    token lists ending in ``input_ids`` / ``attention_mask`` / ``labels`` are padded with the
                    pad id / 0 / −100; scalars (e.g. ``reference_logps``) are stacked.

Reference model policy (``reference_usage`` class attribute, ``UnlearningConfig.reference_mode``)
----------------------------------------------------------------------------------------------------
* ``"none"``: the method never looks at a reference; nothing is built.
* ``"sequence_logps"``: the method needs only a fixed number per forget example (NPO: log π_ref(y|x)). They are
  computed once, before training, with the starting model and stored as the forget column ``reference_logps``
  (``reference_mode="auto"`` or ``"precomputed"``). No second model exists during training.
* ``"model"``: the method needs live reference outputs (KL-Min's distributions, RMU's activations). Under PEFT the
  reference is the same model with its adapter disabled (no copy); otherwise a frozen copy, the only case where
  one is built. ``reference_mode="copy"`` / ``"adapter"`` force one of them (the benchmark compares them).

Reference statistics are those of the model as it enters the trainer. A model fine-tuned with LoRA must therefore
be merged before a new unlearning adapter is added (``medunlearn unlearn`` does this), otherwise "adapter disabled"
would be the pretrained base rather than the fine-tuned starting point.

Loss reduction [ours]
---------------------
Token-level terms are averaged over the completion tokens of each sequence, then over sequences:
``mean_b (1/|y_b|) Σ_t ℓ_{b,t}``. Every sequence weighs the same, so a batch split over N processes (each taking a
per-process mean, DDP then averaging) gives the same loss and gradient as one process with the whole batch: results
do not change with GPU count, a pitfall of the reference system.
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch
import torch.nn.functional as F
from transformers import Trainer, TrainerCallback, TrainingArguments
from trl.trainer.utils import pad, selective_log_softmax

from medunlearn.chat import render_conversations, render_prompts, require_chat_template

# Errors live in a light module (the CLI imports them without torch); re-exported here for subclasses.
from medunlearn.unlearn.errors import (  # noqa: F401
    EmptyForgetSetError,
    MissingChatTemplateError,
    NonFiniteLossError,
    UnlearningInputError,
)

IGNORE_INDEX = -100

ReferenceUsage = Literal["none", "sequence_logps", "model"]


# --------------------------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------------------------


@dataclass
class UnlearningConfig(TrainingArguments):
    r"""Hyperparameters shared by every unlearning method, on top of ``transformers.TrainingArguments``.

    The total loss is ``L = forget_weight · L_forget + retain_weight · L_retain`` (OpenUnlearning's γ and α).
    Defaults here are training defaults common to the methods (OpenUnlearning's TOFU recipe: lr 1e-5, weight decay
    0.01, batch 4); each method's config overrides what its paper sets.

    Parameters:
        forget_weight (γ): weight of the forget term.
        retain_weight (α): weight of the retain term (ignored by methods with ``uses_retain = False``).
        retain_sampling: ``"random"`` pairs each forget example with a uniformly drawn retain example;
            ``"same_disease"`` draws it from retained patients with the same ``disease`` (falls back to random for
            a disease absent from the retain set). Redrawn every epoch, seeded by ``seed`` and the epoch.
        max_length: prompt + completion tokens kept per example (truncated on the right).
        reference_mode: ``"auto"`` (the policy in the module docstring), ``"precomputed"``, ``"adapter"`` or
            ``"copy"``.
        question_column / answer_column / disease_column: columns of the forget and retain datasets.
    """

    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the forget loss"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain loss"})
    retain_sampling: str = field(
        default="random", metadata={"help": "how retain examples are paired: random | same_disease"}
    )
    max_length: int = field(default=512, metadata={"help": "max prompt+completion tokens per example"})
    reference_mode: str = field(
        default="auto", metadata={"help": "reference model source: auto | precomputed | adapter | copy"}
    )
    question_column: str = field(default="question", metadata={"help": "prompt column"})
    answer_column: str = field(default="answer", metadata={"help": "completion column"})
    disease_column: str = field(default="disease", metadata={"help": "column used by same_disease sampling"})

    # TrainingArguments fields whose default differs for unlearning.
    learning_rate: float = field(default=1e-5, metadata={"help": "AdamW learning rate"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    per_device_train_batch_size: int = field(
        default=4, metadata={"help": "forget examples per device per step"}
    )
    num_train_epochs: float = field(default=5.0, metadata={"help": "epochs over the forget set"})
    logging_steps: float = field(default=10, metadata={"help": "log every N steps"})
    save_strategy: str = field(default="no", metadata={"help": "checkpointing: no | steps | epoch"})
    # The trainer feeds nested forget/retain batches: dropping "unused" columns would drop them all.
    remove_unused_columns: bool = field(default=False, metadata={"help": "must stay False for unlearning"})

    def __post_init__(self):
        if self.retain_sampling not in ("random", "same_disease"):
            raise UnlearningInputError(
                f"retain_sampling must be 'random' or 'same_disease', got {self.retain_sampling!r}"
            )
        if self.reference_mode not in ("auto", "precomputed", "adapter", "copy"):
            raise UnlearningInputError(
                f"reference_mode must be auto, precomputed, adapter or copy, got {self.reference_mode!r}"
            )
        self.remove_unused_columns = False
        super().__post_init__()

    def method_hyperparameters(self) -> dict[str, Any]:
        """Fields this config adds to ``TrainingArguments`` (what a model card lists as the method's settings)."""
        base = set(TrainingArguments.__dataclass_fields__)
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if name not in base}


# --------------------------------------------------------------------------------------------------------------
# Tokenisation: prompt/completion with the model's chat template, completion-only labels
# --------------------------------------------------------------------------------------------------------------


def tokenize_prompt_completion(
    questions: list[str], answers: list[str], tokenizer, max_length: int
) -> dict[str, list[list[int]]]:
    """Token ids and completion-only labels for (question, answer) pairs under the tokenizer's chat template.

    The prompt (user turn + generation prompt) and the completion (the rest of the rendered conversation) are
    tokenised separately and concatenated, as TRL's prompt-completion SFT does, so the label boundary is exact.
    """
    require_chat_template(tokenizer)
    prompt_texts = render_prompts(tokenizer, questions)
    chat_texts = render_conversations(tokenizer, questions, answers)
    mismatched = [
        i for i, (prompt, chat) in enumerate(zip(prompt_texts, chat_texts)) if not chat.startswith(prompt)
    ]
    if mismatched:
        raise UnlearningInputError(
            f"the chat template renders row {mismatched[0]} (question {questions[mismatched[0]]!r}) differently with "
            "and without the answer, so the answer tokens cannot be located; use a template whose generation "
            "prompt is a prefix of the assistant turn"
        )
    completion_texts = [chat[len(prompt) :] for prompt, chat in zip(prompt_texts, chat_texts)]
    prompt_ids = tokenizer(prompt_texts, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion_texts, add_special_tokens=False)["input_ids"]
    input_ids = [(p + c)[:max_length] for p, c in zip(prompt_ids, completion_ids)]
    labels = [([IGNORE_INDEX] * len(p) + c)[:max_length] for p, c in zip(prompt_ids, completion_ids)]
    return {"input_ids": input_ids, "attention_mask": [[1] * len(ids) for ids in input_ids], "labels": labels}


def tokenize_qa_dataset(dataset, tokenizer, config: UnlearningConfig, name: str):
    """Tokenise a QA ``datasets.Dataset`` (batched) into ``input_ids, attention_mask, labels`` (+ its disease)."""
    for column in (config.question_column, config.answer_column):
        if column not in dataset.column_names:
            raise UnlearningInputError(
                f"{name} set has no column {column!r} (columns: {dataset.column_names})"
            )
    keep = [config.disease_column] if config.disease_column in dataset.column_names else []

    def encode(batch):
        return tokenize_prompt_completion(
            batch[config.question_column], batch[config.answer_column], tokenizer, config.max_length
        )

    drop = [c for c in dataset.column_names if c not in keep]
    return dataset.map(encode, batched=True, remove_columns=drop, desc=f"tokenising {name} set")


# --------------------------------------------------------------------------------------------------------------
# Forget/retain pairing and collation
# --------------------------------------------------------------------------------------------------------------


def sample_retain_indices(
    forget_diseases: np.ndarray | None,
    retain_diseases: np.ndarray | None,
    num_retain: int,
    strategy: str,
    rng: np.random.Generator,
) -> np.ndarray:
    """For each forget example, the index of the retain example it is paired with.

    ``random``: uniform over the retain set. ``same_disease``: uniform over retain examples whose disease equals the
    forget example's; uniform over all for a disease with no retained example. Vectorised per disease.
    """
    num_forget = len(forget_diseases) if forget_diseases is not None else 0
    indices = rng.integers(0, num_retain, size=num_forget)
    if strategy != "same_disease":
        return indices
    if forget_diseases is None or retain_diseases is None:
        raise UnlearningInputError(
            "retain_sampling='same_disease' needs a disease column in forget and retain sets"
        )
    order = np.argsort(retain_diseases, kind="stable")
    sorted_diseases = retain_diseases[order]
    starts = np.searchsorted(sorted_diseases, forget_diseases, side="left")
    ends = np.searchsorted(sorted_diseases, forget_diseases, side="right")
    counts = ends - starts
    has_match = counts > 0
    offsets = np.floor(rng.random(num_forget) * np.maximum(counts, 1)).astype(np.int64)
    matched = order[np.minimum(starts + offsets, len(order) - 1)]
    return np.where(has_match, matched, indices)


class ForgetRetainDataset(torch.utils.data.Dataset):
    """Item ``i`` is ``{"forget": forget[i], "retain": retain[pairing[i]]}``; an epoch walks the forget set once.

    The pairing is redrawn by ``set_epoch`` (seed + epoch), identically on every process, so DDP shards see
    the same pairs a single process would.
    """

    def __init__(
        self, forget, retain=None, *, strategy: str = "random", seed: int = 0, disease_column="disease"
    ):
        self.forget, self.retain, self.strategy, self.seed = forget, retain, strategy, seed
        self.forget_diseases = self._diseases(forget, disease_column)
        self.retain_diseases = self._diseases(retain, disease_column) if retain is not None else None
        self.pairing = None
        self.set_epoch(0)

    @staticmethod
    def _diseases(dataset, column):
        if dataset is None or column not in dataset.column_names:
            return None
        return np.asarray(dataset[column], dtype=object).astype(str)

    def set_epoch(self, epoch: int) -> None:
        if self.retain is None:
            return
        rng = np.random.default_rng([self.seed, epoch])
        forget_keys = (
            self.forget_diseases if self.forget_diseases is not None else np.zeros(len(self.forget), str)
        )
        self.pairing = sample_retain_indices(
            forget_keys, self.retain_diseases, len(self.retain), self.strategy, rng
        )

    def __len__(self) -> int:
        return len(self.forget)

    def __getitem__(self, index: int) -> dict[str, dict[str, Any]]:
        item = {"forget": self.forget[int(index)]}
        if self.retain is not None:
            item["retain"] = self.retain[int(self.pairing[index])]
        return item


def _padding_value(key: str, pad_token_id: int) -> int | None:
    if key.endswith("input_ids"):
        return pad_token_id
    if key.endswith("attention_mask"):
        return 0
    if key.endswith("labels"):
        return IGNORE_INDEX
    return None


def collate_examples(examples: list[dict[str, Any]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Right-pad token columns (by name suffix) and stack scalar columns; strings are dropped."""
    batch = {}
    for key in examples[0]:
        values = [example[key] for example in examples]
        padding_value = _padding_value(key, pad_token_id)
        if padding_value is not None:
            batch[key] = pad([torch.tensor(v, dtype=torch.long) for v in values], padding_value=padding_value)
        elif isinstance(values[0], (int, float)):
            batch[key] = torch.tensor(
                values, dtype=torch.float32 if isinstance(values[0], float) else torch.long
            )
    return batch


@dataclass
class ForgetRetainCollator:
    """Collates ``ForgetRetainDataset`` items into ``{"forget": batch, "retain": batch}``."""

    pad_token_id: int

    def __call__(self, items: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, torch.Tensor]]:
        return {
            part: collate_examples([item[part] for item in items], self.pad_token_id) for part in items[0]
        }


class _EpochPairingCallback(TrainerCallback):
    def __init__(self, dataset: ForgetRetainDataset):
        self.dataset = dataset

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.dataset.set_epoch(int(state.epoch or 0))


# --------------------------------------------------------------------------------------------------------------
# Log-probability helpers (pure functions on logits and labels)
# --------------------------------------------------------------------------------------------------------------


def shift_for_next_token(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits at t predict the label at t+1: returns ``(logits[:, :-1], labels[:, 1:])``."""
    return logits[:, :-1, :], labels[:, 1:]


def completion_token_logps(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log p(y_t | y_<t, x) on completion tokens: ``(logps [B, T-1], mask [B, T-1] bool)``.

    Positions whose (shifted) label is −100 get log-prob 0 and mask False.
    """
    shifted_logits, shifted_labels = shift_for_next_token(logits, labels)
    mask = shifted_labels != IGNORE_INDEX
    safe_labels = shifted_labels.masked_fill(~mask, 0)
    logps = selective_log_softmax(shifted_logits.float(), safe_labels)
    return logps.masked_fill(~mask, 0.0), mask


def completion_lengths(labels: torch.Tensor) -> torch.Tensor:
    """|y|: number of completion tokens per sequence (shifted labels ≠ −100), at least 1 to avoid 0/0."""
    return (labels[:, 1:] != IGNORE_INDEX).sum(-1).clamp(min=1)


def sequence_logps(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log π(y|x) = Σ_t log p(y_t | y_<t, x) over completion tokens, per sequence ``[B]``."""
    logps, _ = completion_token_logps(logits, labels)
    return logps.sum(-1)


def sequence_mean_nll(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """−log π(y|x) / |y|: mean next-token NLL over each sequence's completion tokens, ``[B]``."""
    return -sequence_logps(logits, labels) / completion_lengths(labels)


def masked_sequence_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence mean of ``values [B, T, ...]`` over positions where ``mask [B, T]`` is True, ``[B]``."""
    mask = mask.to(values.dtype)
    while mask.dim() < values.dim():
        mask = mask.unsqueeze(-1)
    reduce_dims = tuple(range(1, values.dim()))
    per_position = values * mask
    denom = mask.expand_as(values).sum(reduce_dims).clamp(min=1)
    return per_position.sum(reduce_dims) / denom


def answer_soft_cross_entropy(
    answer_logits: torch.Tensor, target_probs: torch.Tensor, answer_mask: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy of the model's answer-token distributions against soft targets, averaged per answer then over
    answers. ``answer_logits`` and ``target_probs`` are ``[N, V]`` for the N True positions of ``answer_mask [B, T]``
    (row-major order), so padding and prompt positions never enter a softmax or the mean."""
    token_cross_entropy = -(target_probs * F.log_softmax(answer_logits.float(), dim=-1)).sum(dim=-1)
    per_position = token_cross_entropy.new_zeros(answer_mask.shape).masked_scatter(answer_mask, token_cross_entropy)
    return masked_sequence_mean(per_position, answer_mask).mean()


def nll_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Batch NLL [ours: sequence-weighted]: ``mean_b (1/|y_b|) Σ_t −log p(y_{b,t})``."""
    return sequence_mean_nll(logits, labels).mean()


def kl_to_reference(
    policy_logits: torch.Tensor, reference_logits: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """Per-sequence mean over completion tokens of KL(p_ref ‖ p_θ) = Σ_v p_ref(v) (log p_ref(v) − log p_θ(v)), ``[B]``.

    Prompt and padding positions (−100) are excluded, unlike the reference system which averages over them.
    """
    policy_logits, shifted_labels = shift_for_next_token(policy_logits, labels)
    reference_logits, _ = shift_for_next_token(reference_logits, labels)
    policy_logps = F.log_softmax(policy_logits.float(), dim=-1)
    reference_logps = F.log_softmax(reference_logits.float(), dim=-1)
    token_kl = (reference_logps.exp() * (reference_logps - policy_logps)).sum(-1)
    return masked_sequence_mean(token_kl, shifted_labels != IGNORE_INDEX)


# --------------------------------------------------------------------------------------------------------------
# Trainer
# --------------------------------------------------------------------------------------------------------------


UnlearningLoss = dict[str, torch.Tensor]
"""``{"loss": total, "forget_loss": ..., "retain_loss": ..., ...}``; every entry is logged (mean over steps)."""


def _is_peft_model(model) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is a train extra
        return False
    return isinstance(model, PeftModel)


class UnlearningTrainer(Trainer):
    """Base trainer: forget/retain pairing, completion-only tokenisation, reference policy, NaN guard, logging.

    Subclasses set ``config_class``, ``reference_usage``, ``uses_retain`` and implement ``unlearning_loss``.

    Args:
        model: a ``PreTrainedModel`` (or a ``PeftModel``).
        args: the method's config (an ``UnlearningConfig`` subclass).
        forget_dataset: QA rows to forget (columns ``question``, ``answer``, optionally ``disease``).
        retain_dataset: QA rows to keep (required when the method ``uses_retain``).
        processing_class: the tokenizer (must have a chat template).
        peft_config: a ``peft.LoraConfig`` to train an adapter instead of the full model.
        reference_model: an explicit frozen reference (only used by ``reference_usage == "model"``).
    """

    config_class: ClassVar[type[UnlearningConfig]] = UnlearningConfig
    reference_usage: ClassVar[ReferenceUsage] = "none"
    uses_retain: ClassVar[bool] = True
    # True for methods whose retain term is only α·(something): with α = 0 no retain set is paired or needed.
    retain_only_when_weighted: ClassVar[bool] = False
    # Our losses are per-batch means; the Trainer then divides by the accumulation steps.
    loss_is_scaled_for_ga = False

    def __init__(
        self,
        model,
        args: UnlearningConfig | None = None,
        forget_dataset=None,
        retain_dataset=None,
        processing_class=None,
        peft_config=None,
        reference_model=None,
        callbacks: list[TrainerCallback] | None = None,
    ):
        args = args or self.config_class(output_dir="unlearned")
        if self.retain_only_when_weighted and args.retain_weight == 0:
            self.uses_retain = False
        if processing_class is None:
            raise UnlearningInputError("processing_class (the tokenizer) is required")
        require_chat_template(processing_class)
        if forget_dataset is None or len(forget_dataset) == 0:
            raise EmptyForgetSetError(
                "the forget set has no rows: nothing to unlearn (check the forget config name)"
            )
        if self.uses_retain and (retain_dataset is None or len(retain_dataset) == 0):
            raise UnlearningInputError(f"{type(self).__name__} needs a non-empty retain set")
        if processing_class.pad_token_id is None:
            processing_class.pad_token = processing_class.eos_token

        self.reference_source = self._resolve_reference_source(args, model, peft_config)
        self.ref_model = None
        if self.reference_source == "copy":
            self.ref_model = reference_model if reference_model is not None else copy.deepcopy(model)
            self.ref_model.eval().requires_grad_(False)

        if peft_config is not None:
            model = self._wrap_peft(model, peft_config)
        else:
            self.configure_trainable_parameters(model)

        forget = self.prepare_forget_dataset(
            tokenize_qa_dataset(forget_dataset, processing_class, args, "forget")
        )
        retain = None
        if self.uses_retain:
            retain = self.prepare_retain_dataset(
                tokenize_qa_dataset(retain_dataset, processing_class, args, "retain")
            )
        self.pairs = ForgetRetainDataset(
            forget, retain, strategy=args.retain_sampling, seed=args.seed, disease_column=args.disease_column
        )
        super().__init__(
            model=model,
            args=args,
            train_dataset=self.pairs,
            data_collator=ForgetRetainCollator(processing_class.pad_token_id),
            processing_class=processing_class,
            callbacks=[_EpochPairingCallback(self.pairs), *(callbacks or [])],
        )
        self._logged_sums: dict[str, torch.Tensor | float] = defaultdict(float)
        self._logged_count = 0
        if self.ref_model is not None:
            self.ref_model = self._prepare_reference_copy(self.ref_model)
        if self.reference_source == "precomputed":
            self.pairs.forget = self.pairs.forget.add_column(
                "reference_logps", self.compute_sequence_logps(self.pairs.forget).tolist()
            )

    # ----- hooks for subclasses ---------------------------------------------------------------------------------

    def prepare_forget_dataset(self, forget):
        """Add method-specific columns to the tokenised forget set (e.g. alternative answers). Default: as is."""
        return forget

    def prepare_retain_dataset(self, retain):
        """Add method-specific columns to the tokenised retain set. Default: as is."""
        return retain

    def configure_trainable_parameters(self, model) -> None:
        """Freeze what the method does not train (full fine-tuning only; under PEFT the adapter is trained)."""

    def unlearning_loss(self, model, forget: dict[str, torch.Tensor], retain: dict[str, torch.Tensor] | None):
        """Return ``UnlearningLoss``: at least ``loss``; ``forget_loss`` and ``retain_loss`` when they exist."""
        raise NotImplementedError

    # ----- forward passes ---------------------------------------------------------------------------------------

    @staticmethod
    def forward(model, batch: dict[str, torch.Tensor], **kwargs):
        """Model outputs on a forget/retain batch (labels are not passed: losses are computed here)."""
        return model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False, **kwargs
        )

    def with_retain_nll(self, model, retain, losses: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Complete ``losses`` (holding ``forget_loss``) with ``loss = γ·forget_loss + α·NLL(retain)``.

        The retain NLL is computed (and logged as ``retain_loss``) only when ``retain_weight`` α ≠ 0.
        """
        loss = self.args.forget_weight * losses["forget_loss"]
        if self.args.retain_weight:
            losses["retain_loss"] = nll_loss(self.logits(model, retain), retain["labels"])
            loss = loss + self.args.retain_weight * losses["retain_loss"]
        losses["loss"] = loss
        return losses

    def logits(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.forward(model, batch).logits

    @contextmanager
    def reference(self, model) -> Iterator[torch.nn.Module]:
        """Yield the module to call as the reference model (no grad): frozen copy, or the adapter-disabled model."""
        if self.reference_source in ("none", "precomputed"):
            raise RuntimeError(
                f"{type(self).__name__} has no live reference model (source {self.reference_source})"
            )
        with torch.no_grad():
            if self.ref_model is not None:
                yield self.ref_model
            else:
                unwrapped = self.accelerator.unwrap_model(model)
                with unwrapped.disable_adapter():
                    yield unwrapped

    def reference_logits(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        with self.reference(model) as reference_model:
            return self.forward(reference_model, batch).logits

    def reference_sequence_logps(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """log π_ref(y|x) per sequence: the stored column when precomputed, otherwise a live reference pass."""
        if "reference_logps" in batch:
            return batch["reference_logps"].to(torch.float32)
        return sequence_logps(self.reference_logits(model, batch), batch["labels"])

    @torch.no_grad()
    def compute_sequence_logps(self, dataset) -> torch.Tensor:
        """log π(y|x) of every row of a tokenised dataset under the current model, batched (before training)."""
        model = self.model
        was_training = model.training
        model.eval()
        batch_size = self.args.per_device_eval_batch_size
        collate = ForgetRetainCollator(self.processing_class.pad_token_id)
        columns = ["input_ids", "attention_mask", "labels"]
        out = []
        for start in range(0, len(dataset), batch_size):
            rows = dataset.select_columns(columns)[start : start + batch_size]
            examples = [dict(zip(columns, values)) for values in zip(*(rows[c] for c in columns))]
            batch = collate([{"forget": e} for e in examples])["forget"]
            batch = {k: v.to(self.args.device) for k, v in batch.items()}
            out.append(sequence_logps(self.logits(model, batch), batch["labels"]).float().cpu())
        model.train(was_training)
        return torch.cat(out)

    # ----- Trainer overrides ------------------------------------------------------------------------------------

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        losses = self.unlearning_loss(model, inputs["forget"], inputs.get("retain"))
        loss = losses["loss"]
        if not torch.isfinite(loss).all():
            step = self.state.global_step
            raise NonFiniteLossError(
                f"{type(self).__name__}: loss is {loss.detach().item()} at step {step} "
                f"(components: { {k: float(v.detach()) for k, v in losses.items()} }); lower the learning rate or the weights. "
                f"Checkpoints already written in {self.args.output_dir} are kept."
            )
        if model.training:
            # Kept as tensors: no device synchronisation per step, only when logging.
            for name, value in losses.items():
                self._logged_sums[name] = self._logged_sums[name] + value.detach().float()
            self._logged_count += 1
        return (loss, losses) if return_outputs else loss

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        if self._logged_count and "loss" in logs:
            names = sorted(name for name in self._logged_sums if name != "loss")
            sums = [torch.as_tensor(self._logged_sums[n], device=self.args.device).reshape(()) for n in names]
            means = torch.stack(sums) / self._logged_count
            # Every process logs at the same step with the same components: average them like the loss.
            means = (
                self.accelerator.reduce(means, reduction="mean")
                if self.accelerator.num_processes > 1
                else means
            )
            logs.update({name: round(float(value), 6) for name, value in zip(names, means)})
            self._logged_sums.clear()
            self._logged_count = 0
        super().log(logs, *args, **kwargs)

    # ----- set-up helpers ---------------------------------------------------------------------------------------

    def _resolve_reference_source(self, args: UnlearningConfig, model, peft_config) -> str:
        usage, mode = self.reference_usage, args.reference_mode
        peft = peft_config is not None or _is_peft_model(model)
        if usage == "none":
            return "none"
        if mode == "auto":
            if usage == "sequence_logps":
                return "precomputed"
            return "adapter" if peft else "copy"
        if mode == "precomputed" and usage != "sequence_logps":
            raise UnlearningInputError(
                f"{type(self).__name__} needs live reference outputs; reference_mode='precomputed' is not possible"
            )
        if mode == "adapter" and not peft:
            raise UnlearningInputError(
                "reference_mode='adapter' needs a PEFT model (pass --lora / peft_config)"
            )
        return mode

    def _prepare_reference_copy(self, ref_model):
        """Shard the frozen copy like the policy under DeepSpeed ZeRO-3 / FSDP (TRL's helpers); else move it."""
        if self.is_deepspeed_enabled:
            from trl.models import prepare_deepspeed

            return prepare_deepspeed(ref_model, self.accelerator)
        if self.is_fsdp_enabled:
            from trl.models import prepare_fsdp

            return prepare_fsdp(ref_model, self.accelerator)
        return ref_model.to(self.args.device)

    def _wrap_peft(self, model, peft_config):
        from peft import get_peft_model, prepare_model_for_kbit_training

        if getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False):
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        return get_peft_model(model, peft_config)


def leave_process_group(accelerator) -> None:
    """Wait for every launched process, then tear the ``torch.distributed`` process group down.

    Why: the gloo worker thread frees finished collectives (and their tensors) after the caller has moved on, and
    needs the GIL to do so. If the group is destroyed at interpreter exit, that thread dies mid-free and the rank
    aborts ("terminate called without an active exception"); if it is destroyed while the main thread holds the GIL
    (the DDP wrapper going out of scope), the two threads wait on each other forever. The launcher then reports a
    failed or hung run although every file was written. So: meet at a barrier, sleep a moment (which releases the
    GIL) so the worker frees what it holds, then destroy the group while Python is fully alive. Does nothing in a
    single process.
    """
    import time

    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        accelerator.wait_for_everyone()
        time.sleep(0.2)
        dist.destroy_process_group()


def select_parameters(model, patterns: list[str]) -> list[str]:
    """Names of parameters matching any of the regexes (``re.search``); the rest are frozen. Returns the kept names."""
    compiled = [re.compile(p) for p in patterns]
    kept = []
    for name, parameter in model.named_parameters():
        trainable = any(p.search(name) for p in compiled)
        parameter.requires_grad_(trainable)
        if trainable:
            kept.append(name)
    if not kept:
        raise UnlearningInputError(
            f"no parameter matches {patterns}; names look like {next(iter(dict(model.named_parameters())))}"
        )
    return kept
