"""MUSE's two starting models, trained on a MUSE-format folder's documents (next-token loss, raw text).

* **target** [MUSE]: the model that is asked to forget, trained on the ``train`` config: ``forget`` (every
  fold: on the Hub and in :mod:`medunlearn.muse.build` ``train/forget`` is ``scal/forget_4``), ``retain1``
  and ``retain2``; so every scalability and sustainability fold was seen.
* **retain** [MUSE]: the same model trained on ``retain1`` and ``retain2`` only: it never saw a forget
  document nor a privleak text, and its Min-K% AUC normalises PrivLeak (docs/muse.md, "Metrics").

MUSE publishes both for its Llama-2-7B (``muse-bench/MUSE-News_target``, ``…_retrain``); this module is what
a study on another model, or on our fictitious folder, trains instead (docs/study.md, "MUSE protocols").
``tiny-llama`` gets a tokenizer trained on every text of the folder, the same for both models (the BPE
training is deterministic), so no evaluation text falls outside its vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from medunlearn.muse.data import LAYOUT, MuseMissingSplitError, load_muse_split, open_muse_folder
from medunlearn.unlearn.errors import UnlearningInputError

MuseModelRole = Literal["target", "retain"]
# role -> the train splits it is trained on [MUSE: the target saw D_forget and D_retain, the retain model
# D_retain only].
TRAIN_SPLITS: dict[str, tuple[str, ...]] = {
    "target": ("forget", "retain1", "retain2"),
    "retain": ("retain1", "retain2"),
}


@dataclass
class MuseFinetuneArguments:
    """One fine-tune on a MUSE-format folder.

    Parameters:
        data (`str`): a MUSE-format folder with a ``train`` config (docs/muse.md, "Data").
        output_dir (`str`): where the model is written (whole or not at all).
        role (`"target"` or `"retain"`, defaults to `"target"`): which corpus (:data:`TRAIN_SPLITS`).
        epochs (`float`, defaults to `3.0`): epochs over the corpus's documents.
    """

    data: str
    output_dir: str
    role: MuseModelRole = "target"
    epochs: float = 3.0


def training_texts(folder, role: str) -> list[str]:
    """The documents the ``role`` model trains on, in the folder's order (``train`` config)."""
    if role not in TRAIN_SPLITS:
        raise UnlearningInputError(f"MUSE model role must be one of {', '.join(TRAIN_SPLITS)}, got {role!r}")
    muse = open_muse_folder(folder)
    if not muse.splits("train"):
        raise MuseMissingSplitError(
            f"MUSE folder {muse.root}: no config 'train' (forget, retain1, retain2), which the target and "
            "retain models are fine-tuned on"
        )
    return [row["text"] for split in TRAIN_SPLITS[role] for row in load_muse_split(muse, "train", split)]


def folder_texts(folder) -> list[str]:
    """Every text field of every split the folder has (what ``tiny-llama``'s tokenizer is trained on)."""
    muse = open_muse_folder(folder)
    texts = []
    for config, splits in LAYOUT.items():
        for split in muse.splits(config):
            if split in splits:
                texts += [value for row in load_muse_split(muse, config, split) for value in row.values()]
    return texts


def run_muse_finetune(args: MuseFinetuneArguments, model_args, sft_config=None, *, overwrite: bool = False):
    """Train ``model_args``' model on the ``args.role`` documents into ``args.output_dir``; returns the folder
    on the process that wrote it (``None`` on the others).

    ``sft_config`` (an ``SFTConfig``; default :func:`medunlearn.unlearn.run.default_sft_config`) holds the
    training settings; its ``output_dir`` and ``num_train_epochs`` are set here. A LoRA adapter is merged.
    The folder is written whole or not at all, as ``run_finetune``'s.
    """
    import datasets
    from trl import SFTTrainer

    from medunlearn.models import load_model
    from medunlearn.unlearn.run import check_training_output, default_sft_config, train_into_staging
    from medunlearn.utils.distributed import leave_process_group
    from medunlearn.utils.progress import bar_without_logs

    out = Path(args.output_dir)
    check_training_output(out, model_args.model_name_or_path, args.data, overwrite)
    texts = training_texts(args.data, args.role)
    config = sft_config if sft_config is not None else default_sft_config(model_args, out)
    if args.epochs <= 0 and getattr(config, "max_steps", -1) <= 0:
        raise UnlearningInputError(f"MUSE fine-tune: epochs must be positive, got {args.epochs}")
    model, tokenizer = load_model(
        model_args, texts=folder_texts(args.data) if model_args.is_tiny_llama else None
    )
    config.num_train_epochs = args.epochs
    config.dataset_text_field = "text"
    trainers = []

    def train(staging: Path) -> bool:
        trainer = SFTTrainer(
            model=model,
            args=config,
            train_dataset=datasets.Dataset.from_dict({"text": texts}),
            processing_class=tokenizer,
            peft_config=model_args.lora_config(),
        )
        trainers.append(trainer)
        bar_without_logs(trainer)
        trainer.train()
        finished = trainer.accelerator.unwrap_model(trainer.model)
        if hasattr(finished, "merge_and_unload") and not model_args.load_in_4bit:
            finished = finished.merge_and_unload()
        writer = trainer.is_world_process_zero()
        if writer:
            finished.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            (staging / "README.md").write_text(_card(args, model_args.model_name_or_path, len(texts), config))
        return writer

    writer = train_into_staging(out, overwrite, train, config)
    leave_process_group(trainers[0].accelerator)
    return out if writer else None


def _card(args: MuseFinetuneArguments, base_model: str, documents: int, config) -> str:
    splits = ", ".join(f"`train/{split}`" for split in TRAIN_SPLITS[args.role])
    return (
        f"# MUSE {args.role} model: `{args.data}`\n\n"
        "Produced by `medunlearn.muse.finetune.run_muse_finetune` (docs/muse.md): next-token loss over raw "
        "documents.\n\n| | |\n|---|---|\n"
        f"| base model | `{base_model}` |\n| corpus | {splits} ({documents} documents) |\n"
        f"| epochs | {args.epochs} |\n| learning rate | {config.learning_rate} |\n"
        f"| batch size | {config.per_device_train_batch_size} |\n| seed | {config.seed} |\n"
    )


__all__ = ["TRAIN_SPLITS", "MuseFinetuneArguments", "folder_texts", "run_muse_finetune", "training_texts"]
