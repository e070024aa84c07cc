"""``medunlearn publish``: push an unlearned (or fine-tuned) model folder and its model card to the Hub."""

from __future__ import annotations

import argparse
from pathlib import Path

from medunlearn.unlearn.publish import publish_model

EPILOG = """example:
  medunlearn publish --model /tmp/gd --repo-id my-org/llama3-amnesia-graddiff-forget10 --dry-run
  medunlearn publish --model /tmp/gd --repo-id my-org/llama3-amnesia-graddiff-forget10 --private

The folder must hold a model card (README.md, written by `medunlearn unlearn`) and weights as safetensors
(model*.safetensors or adapter_model.safetensors); pickled weights (*.bin, *.pt) are refused."""


def build_parser(prog: str = "medunlearn publish") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Upload a model folder written by `medunlearn unlearn` or `finetune` "
        "to the Hugging Face Hub.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", required=True, type=Path, help="model folder")
    parser.add_argument("--repo-id", required=True, help="Hub repository, owner/name")
    parser.add_argument("--private", action="store_true", help="create the repository private")
    parser.add_argument("--dry-run", action="store_true", help="check and list the files, upload nothing")
    return parser


def run(args) -> int:
    files = publish_model(args.model, args.repo_id, private=args.private, dry_run=args.dry_run)
    for path in files:
        print(f"  {path.relative_to(args.model)}")
    if args.dry_run:
        print(f"dry run: {len(files)} files would be uploaded to {args.repo_id}")
    else:
        print(f"published {len(files)} files to https://huggingface.co/{args.repo_id}")
    return 0
