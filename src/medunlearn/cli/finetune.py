"""``medunlearn finetune``: the model every unlearning run starts from (AMNESIA's pipeline, on TRL's
SFTTrainer).

Stage 1 — continued pretraining, next-token loss on the ``notes`` config (title + note text).
Stage 2 — supervised fine-tuning on the ``full`` config's ``train`` split (seen QA), prompt-completion
conversations under the model's chat template, loss on the completion only.
The work is :func:`medunlearn.unlearn.run_finetune`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from medunlearn.cli.options import (
    OverridableParser,
    add_conventions_arguments,
    add_dtype_argument,
    add_model_arguments,
    add_training_overwrite_argument,
    announce_precision,
    conventions_from_args,
    epochs,
    model_arguments,
    reference_preset_name,
    vocab_size,
)
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.run import FinetuneArguments, default_sft_config, run_finetune
from medunlearn.utils.precision import default_device, resolve_precision

EPILOG = """example (CPU, a couple of minutes):
  medunlearn amnesia build --out /tmp/amnesia --patients 40 --seed 0
  medunlearn finetune --model tiny-llama --data /tmp/amnesia --out /tmp/ft --notes-epochs 1 --qa-epochs 2

  medunlearn finetune --model smollm2-135m --data /tmp/amnesia --out /tmp/ft-smol --lora
  medunlearn finetune --model meta-llama/Meta-Llama-3-8B --data DIR --out CKPT --load-in-4bit   \
# QLoRA (medunlearn[qlora])

Any SFTConfig field can be added as --field value (e.g. --learning_rate 1e-4 --max_length 512); it applies to
both stages (their epochs come from --notes-epochs and --qa-epochs). With --lora the adapter is merged at the
end so the output is a plain safetensors model (with --load-in-4bit only the adapter is saved).

--preset chooses the conventions the QA stage renders with (open-unlearning: the reference's system prompt);
they are written beside the weights (conventions.json) and `unlearn` uses them unless given another --preset:
  medunlearn finetune --preset open-unlearning --model tiny-llama --data /tmp/amnesia --out /tmp/ft-ou \
      --notes-epochs 0 --qa-epochs 1"""


def build_parser(prog: str = "medunlearn finetune") -> argparse.ArgumentParser:
    parser = OverridableParser(
        prog=prog,
        description="Fine-tune a causal LM on an AMNESIA folder: next-token pretraining on the notes, then "
        "completion-only SFT on the seen QA of all patients. The result is the starting model of `unlearn`.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_arguments(parser, "Hub id, local folder, tiny-llama or smollm2-135m")
    parser.add_argument("--data", required=True, help="AMNESIA folder (or Hub id)")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    add_training_overwrite_argument(parser)
    parser.add_argument(
        "--notes-epochs", type=epochs, default=1.0, help="stage 1 epochs over the notes (0: skip)"
    )
    parser.add_argument(
        "--qa-epochs", type=epochs, default=3.0, help="stage 2 epochs over the seen QA (above 0)"
    )
    parser.add_argument(
        "--tiny-vocab-size",
        type=vocab_size,
        default=2048,
        help="tiny-llama tokenizer size (261, the byte alphabet and 5 special tokens, to 1,000,000)",
    )
    parser.add_argument(
        "--benchmark",
        choices=("amnesia", "tofu"),
        default="amnesia",
        help="tofu: --data is a TOFU-format folder or Hub id (no notes stage; QA SFT on `full`)",
    )
    add_conventions_arguments(parser)
    add_dtype_argument(parser, training=True)
    return parser


def run(args) -> int:
    if not args.model:
        raise UnlearningInputError("--model is required")
    model_args = model_arguments(args)
    conventions = conventions_from_args(args)
    script_args = FinetuneArguments(
        args.data, str(args.out), args.notes_epochs, args.qa_epochs, args.benchmark, conventions=conventions
    )
    parity = reference_preset_name(conventions)
    sft_config = default_sft_config(model_args, args.out, args.overrides, dtype=args.dtype, parity=parity)
    device = "cpu" if sft_config.use_cpu else default_device()
    announce_precision(resolve_precision(args.dtype, device, parity), sft_config)
    out = run_finetune(script_args, model_args, sft_config, overwrite=args.overwrite)
    if out is not None:  # under accelerate launch, only the process that wrote the folder says so
        print(f"fine-tuned model written to {out}")
    return 0
