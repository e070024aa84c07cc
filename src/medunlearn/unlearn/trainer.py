"""``UnlearningTrainer``: the Trainer every method subclasses (reference policy, NaN guard, logging).

How to add a method
-------------------
1. One file ``src/medunlearn/unlearn/<stem>.py`` holding

   * a pure loss function on tensors (what the tests check against a hand computation), e.g.
     ``def my_loss(policy_logps, reference_logps, beta) -> torch.Tensor``, built on ``unlearn.ops``;
   * ``MyConfig(UnlearningConfig)``: a dataclass whose fields hold the paper's defaults (one place only), its
     docstring a ``Parameters`` block (type, default, meaning) as ``UnlearningConfig``'s;
   * ``MyTrainer(UnlearningTrainer)`` with ``config_class = MyConfig``, ``reference_usage`` (see below),
     ``uses_retain`` and ``unlearning_loss(model, forget, retain) -> UnlearningLoss``.
     The class docstring states the loss equation and cites the paper.
2. One line in ``METHODS`` in ``src/medunlearn/unlearn/methods.py`` (stem, module, classes, aliases, summary).
3. One test ``tests/unlearn/test_<stem>.py``: the loss equals a hand computation on fixed tensors with −100
   labels and padding (to 1e-5), and a few trainer steps on the tiny model move the forget loss the intended
   way.

Then a recipe ``recipes/<stem>.yaml`` (``method: <stem>`` + the config's defaults) and a page
``docs/methods/<stem>.md``. ``tests/unlearn/test_configs.py`` checks the page's default table and the
config's docstring against the config, ``tests/unlearn/test_recipes.py`` the recipe. The batches a method sees
are described in ``unlearn.data``, the loss reduction in ``unlearn.ops``.

Loss averaging (``UnlearningConfig.loss_averaging``)
----------------------------------------------------
A method passes ``**self.token_reduction(part)`` (``part``: ``"forget"`` or ``"retain"``) to every loss that
averages tokens. With ``"token"``, the trainer counts each part's averaged tokens over the optimiser step's
micro-batches and every process before the step, as transformers counts ``num_items_in_batch`` (shifted labels
≠ −100, gathered over processes), and each micro-batch divides its token sum by the per-process,
per-micro-batch share of that count: after the Trainer's division by the accumulation steps and DDP's
gradient mean, the step's loss is the one token mean over the whole step, whatever the number of processes.
A method whose loss averages another token set overrides ``count_loss_tokens`` (CE-U, RMU).

Reference model policy (``reference_usage`` class attribute, ``UnlearningConfig.reference_mode``)
----------------------------------------------------------------------------------------------------
* ``"none"``: the method never looks at a reference; nothing is built.
* ``"sequence_logps"``: the method needs only a fixed number per forget example (NPO: log π_ref(y|x)). They
  are computed once, before training, with the starting model and stored as the forget column
  ``reference_logps`` (``reference_mode="auto"`` or ``"precomputed"``). No second model exists in training.
* ``"model"``: the method needs live reference outputs (KL-Min's distributions, RMU's activations). Under PEFT
  the reference is the same model with its adapter disabled (no copy); otherwise a frozen copy, the only case
  where one is built. ``reference_mode="copy"`` / ``"adapter"`` force one of them (a benchmark compares them).

* ``"model"`` methods whose reference outputs are on fixed rows (``frozen_parts``: KL-Min's and RMU's retain
  rows, UNDIAL's forget rows) get them precomputed once instead, under ``reference_mode="auto"`` or
  ``"precomputed"``, when they fit ``frozen_memory_limit_bytes`` (``medunlearn.unlearn.frozen``: what is
  stored, its memory, which rows). ``"copy"`` / ``"adapter"`` keep the live reference (today's path, which a
  benchmark compares against), as does an explicit ``reference_model``.

Reference statistics are those of the model as it enters the trainer. A model fine-tuned with LoRA must
therefore be merged before a new unlearning adapter is added (``medunlearn unlearn`` does this), otherwise
"adapter disabled" would be the pretrained base rather than the fine-tuned starting point.

One forward over forget and retain (``forward_pair``)
-----------------------------------------------------
A method whose loss reads the policy's outputs on both parts calls ``forward_pair(model, forget, retain)``:
one forward over the two batches stacked row-wise (the shorter right-padded to the longer, which changes no
real position's output: ``ops.concatenate_batches``), split back to each part's rows and length. The values
and gradients are those of two forwards, to float rounding (``tests/unlearn/test_step_work.py``). It falls
back to two forwards when ``fuse_forget_retain`` is False (today's path), when the model has dropout (one
forward would draw other masks than two), or when padding would make the joint forward compute more than
``joint_padding_limit`` times the positions of the two separate ones [ours, measured:
``bench/bench_unlearning_step.py``].
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar, Literal

import numpy as np
import torch
from transformers import Trainer, TrainerCallback

from medunlearn.chat import require_chat_template, resolve_conventions
from medunlearn.unlearn.config import UnlearningConfig, set_warmup_steps
from medunlearn.unlearn.data import (
    EpochPairingCallback,
    ForgetRetainCollator,
    ForgetRetainDataset,
    tokenize_qa_dataset,
)
from medunlearn.unlearn.errors import EmptyForgetSetError, NonFiniteLossError, UnlearningInputError
from medunlearn.unlearn.frozen import (
    FROZEN_ROW,
    compute_frozen_outputs,
    paired_retain_rows,
    stored_positions_count,
    training_epochs,
)
from medunlearn.unlearn.ops import (
    IGNORE_INDEX,
    TwoTermWeighting,
    concatenate_batches,
    has_dropout,
    nll_loss,
    padded_token_ratio,
    predicting_positions,
    sequence_logps,
    split_rows,
)
from medunlearn.unlearn.text import TextCorpusUnsupportedError, tokenize_text_dataset

ReferenceUsage = Literal["none", "sequence_logps", "model"]


UnlearningLoss = dict[str, torch.Tensor]
"""``{"loss": total, "forget_loss": ..., "retain_loss": ..., ...}``; each entry is logged (step mean)."""


def _is_peft_model(model) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is a train extra
        return False
    return isinstance(model, PeftModel)


class UnlearningTrainer(Trainer):
    """Base trainer: forget/retain pairing, completion-only tokenisation, reference policy, NaN guard, logs.

    Subclasses set ``config_class``, ``reference_usage``, ``uses_retain`` and implement ``unlearning_loss``.

    Args:
        model (PreTrainedModel or PeftModel): the model to unlearn from.
        args: the method's config (an ``UnlearningConfig`` subclass).
        forget_dataset (datasets.Dataset): QA rows to forget (columns ``question``, ``answer``, optionally
            ``disease``), or with ``args.data_format == "text"`` documents (column ``args.text_column``; see
            ``medunlearn.unlearn.text``).
        retain_dataset (datasets.Dataset or None): rows to keep, in the same format (required when the
            method ``uses_retain``).
        processing_class (PreTrainedTokenizerBase): the tokenizer (must have a chat template, unless
            ``conventions`` render with tags).
        peft_config (peft.LoraConfig or None): a LoRA config to train an adapter instead of the full model.
        reference_model (PreTrainedModel or None): an explicit frozen reference (only used by
            ``reference_usage == "model"``).
        callbacks: more ``transformers`` callbacks, after the one that re-pairs forget and retain rows
            every epoch.
        conventions (Conventions or str or None): how examples are rendered (``medunlearn.chat.Conventions``
            or a preset name); ``None`` is the ``medunlearn`` preset (the tokenizer's template, no system
            prompt). Use the conventions the model was fine-tuned with and will be evaluated with.
    """

    config_class: ClassVar[type[UnlearningConfig]] = UnlearningConfig
    reference_usage: ClassVar[ReferenceUsage] = "none"
    uses_retain: ClassVar[bool] = True
    # True for methods whose retain term is only α·(something): with α = 0 no retain set is paired or needed.
    retain_only_when_weighted: ClassVar[bool] = False
    # Our losses are per-batch means; the Trainer then divides by the accumulation steps.
    loss_is_scaled_for_ga = False
    # False for methods that need question/answer rows beyond the text (IdkDPO's refusals).
    supports_text: ClassVar[bool] = True
    # The parts ("forget", "retain") whose live reference outputs (``read_reference``) can be precomputed.
    frozen_parts: ClassVar[tuple[str, ...]] = ()
    # Largest store of precomputed reference outputs ``reference_mode="auto"`` builds, per process.
    frozen_memory_limit_bytes: ClassVar[int] = 2 * 2**30
    # One forward over forget and retain (``forward_pair``); False: two forwards, today's path.
    fuse_forget_retain: bool = True
    # Largest ratio of computed to real positions a joint forward may take on (``ops.padded_token_ratio``):
    # on CPU the joint forward saved 1.14x at equal lengths and broke even near 1.1x the positions
    # (bench/bench_unlearning_step.py --padding); above that, two forwards compute less.
    joint_padding_limit: ClassVar[float] = 1.1

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
        conventions=None,
    ):
        args = args or self.config_class(output_dir="unlearned")
        self.conventions = resolve_conventions(conventions)
        self._num_items: dict[str, torch.Tensor] | None = None
        if self.retain_only_when_weighted and args.retain_weight == 0:
            self.uses_retain = False
        self._check_inputs(args, forget_dataset, retain_dataset, processing_class)

        self.reference_source = self._resolve_reference_source(args, model, peft_config, reference_model)
        self.ref_model = None
        self.frozen: dict = {}
        self._dropout: bool | None = None
        if self.reference_source == "copy":
            self.ref_model = reference_model if reference_model is not None else copy.deepcopy(model)
            self.ref_model.eval().requires_grad_(False)

        if peft_config is not None:
            model = self._wrap_peft(model, peft_config)
        else:
            self.configure_trainable_parameters(model, args)

        forget = self.prepare_forget_dataset(self._tokenize(forget_dataset, processing_class, args, "forget"))
        if len(forget) == 0:
            raise EmptyForgetSetError(
                f"the forget set's {len(forget_dataset)} rows give no tokens to unlearn"
            )
        retain = None
        if self.uses_retain:
            retain = self.prepare_retain_dataset(
                self._tokenize(retain_dataset, processing_class, args, "retain")
            )
        set_warmup_steps(args, len(forget))
        self.pairs = ForgetRetainDataset(
            forget, retain, strategy=args.retain_sampling, seed=args.seed, disease_column=args.disease_column
        )
        if self._precomputes_outputs() and args.reference_mode == "auto":
            self._fall_back_when_too_large(model, args, peft_config)
        super().__init__(
            model=model,
            args=args,
            train_dataset=self.pairs,
            data_collator=ForgetRetainCollator(processing_class.pad_token_id),
            processing_class=processing_class,
            callbacks=[EpochPairingCallback(self.pairs), *(callbacks or [])],
        )
        self._logged_sums: dict[str, torch.Tensor | float] = defaultdict(float)
        self._logged_count = 0
        if self.ref_model is not None:
            self.ref_model = self._prepare_reference_copy(self.ref_model)
        if self._precomputes_outputs():
            self.precompute_reference_outputs()
        elif self.reference_source == "precomputed":
            self.pairs.forget = self.pairs.forget.add_column(
                "reference_logps", self.compute_sequence_logps(self.pairs.forget).tolist()
            )
        # Evaluation during unlearning (medunlearn.unlearn.probe): the retain probe is drawn from
        # `retain_dataset` even for a method that does not train on it.
        self.probe_callback = None
        if args.eval_probe_steps is not None:
            from medunlearn.unlearn.probe import make_probe_callback

            self.probe_callback = make_probe_callback(self, forget_dataset, retain_dataset)
            self.add_callback(self.probe_callback)

    def _check_inputs(self, args: UnlearningConfig, forget_dataset, retain_dataset, processing_class) -> None:
        """Refuse, before any work, what this method cannot train on; give the tokenizer a pad token."""
        if args.data_format == "text" and not self.supports_text:
            raise TextCorpusUnsupportedError(
                f"{type(self).__name__} needs question/answer rows (data_format 'qa'); "
                "it cannot unlearn a text corpus (docs/methods/index.md, 'Unlearning on raw text')"
            )
        if processing_class is None:
            raise UnlearningInputError("processing_class (the tokenizer) is required")
        if args.data_format == "qa":
            require_chat_template(processing_class, self.conventions)
        if forget_dataset is None or len(forget_dataset) == 0:
            raise EmptyForgetSetError(
                "the forget set has no rows: nothing to unlearn (check the forget config name)"
            )
        if self.uses_retain and (retain_dataset is None or len(retain_dataset) == 0):
            raise UnlearningInputError(f"{type(self).__name__} needs a non-empty retain set")
        if processing_class.pad_token_id is None:
            processing_class.pad_token = processing_class.eos_token

    def _tokenize(self, dataset, tokenizer, args: UnlearningConfig, name: str):
        """Training rows of a forget or retain set: QA rows (completion-only labels) or chunks of text."""
        if args.data_format == "text":
            return tokenize_text_dataset(dataset, tokenizer, args, name)
        return tokenize_qa_dataset(dataset, tokenizer, args, name, self.conventions)

    # ----- hooks for subclasses -----------------------------------------------------------------------------

    def prepare_forget_dataset(self, forget):
        """Add method-specific columns to the tokenised forget set (e.g. other answers); default: as is."""
        return forget

    def prepare_retain_dataset(self, retain):
        """Add method-specific columns to the tokenised retain set. Default: as is."""
        return retain

    def configure_trainable_parameters(self, model, args: UnlearningConfig) -> None:
        """Freeze what the method does not train (full fine-tuning only; under PEFT the adapter is trained).

        Called before ``Trainer.__init__``, so ``self.args`` is not set yet: read the config from ``args``.
        """

    def unlearning_loss(self, model, forget: dict[str, torch.Tensor], retain: dict[str, torch.Tensor] | None):
        """``UnlearningLoss``: at least ``loss``; ``forget_loss`` and ``retain_loss`` where they exist."""
        raise NotImplementedError

    # ----- forward passes -----------------------------------------------------------------------------------

    @staticmethod
    def forward(model, batch: dict[str, torch.Tensor], **kwargs):
        """Model outputs on a forget/retain batch (labels are not passed: losses are computed here)."""
        return model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False, **kwargs
        )

    def with_retain_nll(
        self, model, retain, losses: dict[str, torch.Tensor], retain_logits: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Complete ``losses`` (holding ``forget_loss``) with ``loss = γ·forget_loss + α·NLL(retain)``.

        The retain NLL is computed (and logged as ``retain_loss``) only when ``retain_weight`` α ≠ 0, on
        ``retain_logits`` when given (from ``forward_pair``), else on a forward of its own.
        """
        loss = self.args.forget_weight * losses["forget_loss"]
        if self.args.retain_weight:
            if retain_logits is None:
                retain_logits = self.logits(model, retain)
            losses["retain_loss"] = nll_loss(
                retain_logits, retain["labels"], **self.token_reduction("retain")
            )
            loss = loss + self.args.retain_weight * losses["retain_loss"]
        losses["loss"] = loss
        return losses

    def logits(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.forward(model, batch).logits

    def retain_part(self, retain):
        """``retain`` when the method's loss reads the retain batch (α ≠ 0), else ``None``: what a method
        whose retain term is only α·NLL passes to ``forward_pair``."""
        return retain if self.args.retain_weight else None

    def forward_pair(self, model, forget, retain, read=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(read(model, forget), read(model, retain))``, from one forward over both batches where
        ``joint_forward_allowed`` (module docstring); ``read`` returns ``[B, T, ...]`` (default: the logits).
        ``retain`` ``None``: only the forget part."""
        read = read or self.logits
        if retain is None:
            return read(model, forget), None
        if not self.joint_forward_allowed(model, forget, retain):
            return read(model, forget), read(model, retain)
        joint = read(model, concatenate_batches(forget, retain, self.processing_class.pad_token_id))
        return split_rows(joint, forget, retain)

    def joint_forward_allowed(self, model, forget, retain) -> bool:
        """One forward gives two forwards' values: no dropout in training, padding within the limit.

        Every process takes the same path (the largest ratio over processes decides): DDP runs collectives
        in each forward, so one process doing one forward while another does two would hang."""
        if not self.fuse_forget_retain:
            return False
        ratio = torch.tensor([padded_token_ratio(forget, retain)], device=self.args.device)
        if self.accelerator.num_processes > 1:
            ratio = self.accelerator.gather(ratio)
        if float(ratio.max()) > self.joint_padding_limit:
            return False
        if self._dropout is None:
            self._dropout = has_dropout(self.accelerator.unwrap_model(model))
        return not (model.training and self._dropout)

    # ----- loss averaging -----------------------------------------------------------------------------------

    def token_reduction(self, part: str) -> dict:
        """``averaging`` and ``num_items`` for a loss averaging the tokens of ``part`` (forget or retain).

        ``num_items`` is ``None`` outside a training step (and with ``"sequence"``): the batch's own count.
        """
        num_items = self._num_items.get(part) if self._num_items else None
        return {"averaging": self.args.loss_averaging, "num_items": num_items}

    def two_term_weighting(self) -> TwoTermWeighting:
        """The config's γ and α with this step's token averaging, for a loss of a forget and a retain term."""
        return TwoTermWeighting(
            self.args.forget_weight,
            self.args.retain_weight,
            self.args.loss_averaging,
            self.token_reduction("forget")["num_items"],
            self.token_reduction("retain")["num_items"],
        )

    def count_loss_tokens(self, part: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """How many tokens of ``batch`` (of ``part``) the method's token-averaged losses average: by default
        the completion tokens, counted on the shifted labels as transformers counts ``num_items_in_batch``."""
        return (batch["labels"][..., 1:] != IGNORE_INDEX).sum()

    def _get_num_items_in_batch(self, batch_samples: list, device: torch.device):
        """With ``loss_averaging="token"``: ``{part: N_part / (P · K)}``, N_part the part's averaged tokens
        over the K micro-batches of the step and the P processes (transformers' ``num_items_in_batch``,
        gathered when ``average_tokens_across_devices``). Each micro-batch's loss is its token sum over that
        share; the Trainer's division by K and DDP's mean over P then leave the step's one token mean."""
        if self.args.loss_averaging != "token" or not batch_samples:
            return None
        parts = [part for part in ("forget", "retain") if part in batch_samples[0]]
        counts = torch.stack(
            [
                sum(self.count_loss_tokens(part, batch[part]).to(torch.float64) for batch in batch_samples)
                for part in parts
            ]
        ).to(device)
        processes = 1
        if self.args.average_tokens_across_devices and self.accelerator.num_processes > 1:
            counts = self.accelerator.gather(counts.unsqueeze(0)).sum(0)
            processes = self.accelerator.num_processes
        shares = counts.clamp(min=1) / (processes * len(batch_samples))
        return {part: shares[i].float() for i, part in enumerate(parts)}

    @contextmanager
    def reference(self, model) -> Iterator[torch.nn.Module]:
        """Yield the module to call as reference (no grad): the frozen copy or the adapter-disabled model."""
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

    # ----- reference outputs on fixed rows: live or precomputed (medunlearn.unlearn.frozen) -----------------

    def read_reference(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """What the method reads from the reference on a batch, ``[B, T, D]``; default: the logits."""
        return self.logits(model, batch)

    def reference_positions(self, labels: torch.Tensor) -> torch.Tensor:
        """``[B, T]`` positions of ``read_reference`` the loss reads; default: those predicting answers."""
        return predicting_positions(labels)

    def reference_width(self, model) -> int:
        """``D`` of ``read_reference``; default: the vocabulary (the logits' width)."""
        return model.get_output_embeddings().weight.shape[0]

    def reference_outputs(self, model, part: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``read_reference`` of the reference on ``batch`` (of ``part``): from the precomputed store, whose
        positions outside ``reference_positions`` are zeros, or from a live reference pass."""
        if part in self.frozen:
            if FROZEN_ROW not in batch:
                raise RuntimeError(
                    f"the {part} batch has no {FROZEN_ROW!r} column, the key to its precomputed reference "
                    "outputs: collate rows of trainer.pairs, or build the trainer with reference_mode='copy'"
                )
            return self.frozen[part].gather(batch[FROZEN_ROW], self.reference_positions(batch["labels"]))
        with self.reference(model) as reference_model:
            return self.read_reference(reference_model, batch)

    def reference_sequence_logps(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """log π_ref(y|x) per sequence: the stored column when precomputed, else a live reference pass."""
        if "reference_logps" in batch:
            return batch["reference_logps"].to(torch.float32)
        return sequence_logps(self.reference_logits(model, batch), batch["labels"])

    @torch.no_grad()
    def compute_sequence_logps(self, dataset) -> torch.Tensor:
        """log π(y|x) of each row of a tokenised dataset under the current model, batched (pre-training)."""
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

    # ----- Trainer overrides --------------------------------------------------------------------------------

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        self._num_items = num_items_in_batch if isinstance(num_items_in_batch, dict) else None
        try:
            losses = self.unlearning_loss(model, inputs["forget"], inputs.get("retain"))
        finally:
            self._num_items = None
        loss = losses["loss"]
        if not torch.isfinite(loss).all():
            step = self.state.global_step
            raise NonFiniteLossError(
                f"{type(self).__name__}: loss is {loss.detach().item()} at step {step} "
                f"(components: { {k: float(v.detach()) for k, v in losses.items()} }); "
                "lower the learning rate or the weights. "
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

    # ----- set-up helpers -----------------------------------------------------------------------------------

    def _resolve_reference_source(self, args: UnlearningConfig, model, peft_config, reference_model) -> str:
        usage, mode = self.reference_usage, args.reference_mode
        peft = peft_config is not None or _is_peft_model(model)
        if usage == "none":
            return "none"
        if mode == "auto":
            if usage == "sequence_logps" or (self.frozen_parts and reference_model is None):
                return "precomputed"
            return "adapter" if peft else "copy"
        if mode == "precomputed" and usage != "sequence_logps" and not self.frozen_parts:
            raise UnlearningInputError(
                f"{type(self).__name__} needs live reference outputs; "
                "reference_mode='precomputed' is not possible"
            )
        if mode == "adapter" and not peft:
            raise UnlearningInputError(
                "reference_mode='adapter' needs a PEFT model (pass --lora / peft_config)"
            )
        return mode

    def _precomputes_outputs(self) -> bool:
        return self.reference_usage == "model" and self.reference_source == "precomputed"

    def _frozen_rows(self, part: str) -> np.ndarray:
        if part == "forget":
            return np.arange(len(self.pairs.forget))
        return paired_retain_rows(self.pairs, training_epochs(self.args, len(self.pairs.forget)))

    def _fall_back_when_too_large(self, model, args: UnlearningConfig, peft_config) -> None:
        """Keep a live reference when the store would exceed ``frozen_memory_limit_bytes``: the frozen copy
        (of the model as it is now, before any step) or, under PEFT, the adapter-disabled model."""
        self.args = args  # _frozen_rows reads the run's length before Trainer.__init__ sets it
        positions = sum(
            stored_positions_count(
                getattr(self.pairs, part), self._frozen_rows(part), self.reference_positions
            )
            for part in self.frozen_parts
        )
        width = self.reference_width(model)
        if positions * width * next(model.parameters()).element_size() <= self.frozen_memory_limit_bytes:
            return
        if peft_config is not None or _is_peft_model(model):
            self.reference_source = "adapter"
        else:
            self.reference_source = "copy"
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)

    def precompute_reference_outputs(self) -> None:
        """The stores of ``frozen_parts`` from the starting model, and each part's ``frozen_row`` column."""
        for part in self.frozen_parts:
            dataset = getattr(self.pairs, part)
            self.frozen[part] = compute_frozen_outputs(
                self.model,
                dataset,
                self._frozen_rows(part),
                self.read_reference,
                self.reference_positions,
                self.args.per_device_eval_batch_size,
                self.processing_class.pad_token_id,
            )
            setattr(self.pairs, part, dataset.add_column(FROZEN_ROW, list(range(len(dataset)))))

    def _prepare_reference_copy(self, ref_model):
        """Shard the frozen copy like the policy under DeepSpeed ZeRO-3 / FSDP (TRL's helpers); or move it."""
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
