"""``medunlearn finetune``: the model every unlearning run starts from (AMNESIA's pipeline, on TRL's SFTTrainer).

Stage 1 — continued pretraining, next-token loss on the ``notes`` config (title + note text).
Stage 2 — supervised fine-tuning on the ``full`` config's ``train`` split (seen QA), prompt-completion
conversations under the model's chat template, loss on the completion only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from medunlearn.unlearn.cli import (
    _OverridableParser,
    four_bit_quantization_config,
    load_qa_split,
    lora_config_from_args,
)
from medunlearn.unlearn.errors import UnlearningInputError

EPILOG = """example (CPU, a couple of minutes):
  medunlearn amnesia build --out /tmp/amnesia --patients 40 --seed 0
  medunlearn finetune --model tiny-llama --data /tmp/amnesia --out /tmp/ft --notes-epochs 1 --qa-epochs 2

  medunlearn finetune --model smollm2-135m --data /tmp/amnesia --out /tmp/ft-smol --lora
  medunlearn finetune --model meta-llama/Meta-Llama-3-8B --data DIR --out CKPT --load-in-4bit   # QLoRA (medunlearn[qlora])

Any SFTConfig field can be added as --field value (e.g. --learning_rate 1e-4 --max_length 512); it applies to
both stages. With --lora the adapter is merged at the end so the output is a plain safetensors model (with
--load-in-4bit only the adapter is saved)."""

TINY_LLAMA_LEARNING_RATE = 1e-3  # a randomly initialised model needs a far larger step than a pretrained one


def build_parser(prog: str = "medunlearn finetune") -> argparse.ArgumentParser:
    parser = _OverridableParser(
        prog=prog,
        description="Fine-tune a causal LM on an AMNESIA folder: next-token pretraining on the notes, then "
        "completion-only SFT on the seen QA of all patients. The result is the starting model of `unlearn`.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", required=True, help="Hub id, local folder, tiny-llama or smollm2-135m")
    parser.add_argument("--data", required=True, help="AMNESIA folder (or Hub id)")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument(
        "--notes-epochs", type=float, default=1.0, help="stage 1 epochs over the notes (0: skip)"
    )
    parser.add_argument("--qa-epochs", type=float, default=3.0, help="stage 2 epochs over the seen QA")
    parser.add_argument("--lora", action="store_true", help="train a LoRA adapter (merged at the end)")
    parser.add_argument("--lora-r", type=int, default=16, help="LoRA rank (default 16)")
    parser.add_argument("--lora-alpha", type=int, default=32, help="LoRA alpha (default 32)")
    parser.add_argument("--load-in-4bit", action="store_true", help="QLoRA: 4-bit NF4 base model (bitsandbytes: the qlora extra)")
    parser.add_argument("--tiny-vocab-size", type=int, default=2048, help="tiny-llama tokenizer size")
    parser.add_argument(
        "--benchmark", choices=("amnesia", "tofu"), default="amnesia",
        help="tofu: --data is a TOFU-format folder or Hub id (no notes stage; QA SFT on `full`)",
    )
    return parser


def notes_texts(notes) -> list[str]:
    return [f"{title}\n{note}" for title, note in zip(notes["title"], notes["note"])]


def qa_conversations(qa):
    """Prompt-completion conversational rows, the format for which TRL's SFT trains on completions only."""
    return qa.map(
        lambda batch: {
            "prompt": [[{"role": "user", "content": q}] for q in batch["question"]],
            "completion": [[{"role": "assistant", "content": a}] for a in batch["answer"]],
        },
        batched=True,
        remove_columns=qa.column_names,
    )


def sft_config(stage: str, out: Path, epochs: float, overrides: list[str], tiny: bool, cpu: bool):
    from trl import SFTConfig, TrlParser

    parser = TrlParser(dataclass_types=[SFTConfig])
    defaults = {
        "output_dir": str(out / stage),
        "num_train_epochs": epochs,
        "save_strategy": "no",
        "report_to": "none",
        "logging_steps": 10,
        "gradient_checkpointing": False,
    }
    if tiny:
        defaults["learning_rate"] = TINY_LLAMA_LEARNING_RATE
    if cpu:
        defaults.update(use_cpu=True, bf16=False)
    parser.set_defaults_with_config(**defaults)
    config, unknown = parser.parse_args_into_dataclasses(args=list(overrides), return_remaining_strings=True)
    if unknown:
        raise UnlearningInputError(f"unknown SFTConfig options: {unknown}")
    if stage == "notes":
        config.dataset_text_field = "text"
    return config


def load_base(args, texts: list[str]):
    from medunlearn.chat import require_chat_template
    from medunlearn.models import build_tiny_llama_for_texts, load_model_and_tokenizer

    if args.model == "tiny-llama":
        if args.load_in_4bit:
            raise UnlearningInputError(
                "--load-in-4bit quantises a model as it is loaded; tiny-llama is built from config in float32. "
                "Fine-tune tiny-llama without it, then pass the saved folder as --model with --load-in-4bit"
            )
        model, tokenizer = build_tiny_llama_for_texts(texts, vocab_size=args.tiny_vocab_size)
    else:
        kwargs = {"quantization_config": four_bit_quantization_config()} if args.load_in_4bit else {}
        model, tokenizer = load_model_and_tokenizer(args.model, **kwargs)
    require_chat_template(tokenizer)
    return model, tokenizer


def finetune(args) -> Path | None:
    """Both stages; returns the output folder on the process that wrote it (None on the other launched ones)."""
    import datasets
    import torch
    from trl import SFTTrainer

    from medunlearn.unlearn.base import leave_process_group

    tofu = args.benchmark == "tofu"  # TOFU has QA only: no notes stage
    notes = None if tofu else load_qa_split(args.data, "notes")
    qa = load_qa_split(args.data, "full")
    if len(qa) == 0:
        raise UnlearningInputError(f"{args.data}: config 'full' split 'train' has no rows")
    texts = [] if notes is None else notes_texts(notes)
    model, tokenizer = load_base(args, texts + list(qa["question"]) + list(qa["answer"]))
    cpu = not torch.cuda.is_available()
    tiny = args.model == "tiny-llama"
    peft_config = lora_config_from_args(args)

    if args.notes_epochs > 0 and texts:
        config = sft_config("notes", args.out, args.notes_epochs, args.overrides, tiny, cpu)
        trainer = SFTTrainer(
            model=model,
            args=config,
            train_dataset=datasets.Dataset.from_dict({"text": texts}),
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        trainer.train()
        model = trainer.model
        peft_config = None  # stage 2 continues the same adapter
    config = sft_config("qa", args.out, args.qa_epochs, args.overrides, tiny, cpu)
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=qa_conversations(qa),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    trainer.train()
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload") and not args.load_in_4bit:
        model = model.merge_and_unload()
    writer = trainer.is_world_process_zero()  # under accelerate launch, one process writes the folder
    if writer:
        write_finetuned_folder(args.out, model, tokenizer)
    leave_process_group(trainer.accelerator)
    return args.out if writer else None


def write_finetuned_folder(out: Path, model, tokenizer) -> None:
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    for stage in ("notes", "qa"):  # the stages' Trainer output folders stay empty unless checkpoints were asked for
        stage_dir = out / stage
        if stage_dir.is_dir() and not any(stage_dir.iterdir()):
            stage_dir.rmdir()


def run(args) -> int:
    try:
        out = finetune(args)
    except (UnlearningInputError, FileNotFoundError) as error:
        print(f"medunlearn finetune: error: {error}", file=sys.stderr)
        return 2
    if out is not None:  # under accelerate launch, only the process that wrote the folder says so
        print(f"fine-tuned model written to {out}")
    return 0
