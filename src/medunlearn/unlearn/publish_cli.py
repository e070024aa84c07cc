"""``medunlearn publish``: push an unlearned (or fine-tuned) model folder and its model card to the Hub."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from medunlearn.unlearn.errors import UnlearningInputError

EPILOG = """example:
  medunlearn publish --model /tmp/gd --repo-id my-org/llama3-amnesia-graddiff-forget10 --dry-run
  medunlearn publish --model /tmp/gd --repo-id my-org/llama3-amnesia-graddiff-forget10 --private

The folder must hold a model card (README.md, written by `medunlearn unlearn`) and weights as safetensors
(model*.safetensors or adapter_model.safetensors); pickled weights (*.bin, *.pt) are refused."""

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl")


def build_parser(prog: str = "medunlearn publish") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Upload a model folder written by `medunlearn unlearn` or `finetune` to the Hugging Face Hub.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", required=True, type=Path, help="model folder")
    parser.add_argument("--repo-id", required=True, help="Hub repository, owner/name")
    parser.add_argument("--private", action="store_true", help="create the repository private")
    parser.add_argument("--dry-run", action="store_true", help="check and list the files, upload nothing")
    return parser


def files_to_publish(folder: Path) -> list[Path]:
    """The folder's files, after checking it has a model card and safetensors weights only."""
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder {folder} does not exist")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not (folder / "README.md").is_file():
        raise UnlearningInputError(f"{folder} has no README.md model card (written by `medunlearn unlearn`)")
    pickled = [p for p in files if p.suffix in PICKLE_SUFFIXES]
    if pickled:
        raise UnlearningInputError(
            f"{folder}: refusing pickled files {[str(p.relative_to(folder)) for p in pickled]}"
        )
    if not any(p.suffix == ".safetensors" for p in files):
        raise UnlearningInputError(f"{folder} holds no .safetensors weights")
    return files


def run(args) -> int:
    try:
        files = files_to_publish(args.model)
        if "/" not in args.repo_id:
            raise UnlearningInputError(f"--repo-id must be owner/name, got {args.repo_id!r}")
        for path in files:
            print(f"  {path.relative_to(args.model)}")
        if args.dry_run:
            print(f"dry run: {len(files)} files would be uploaded to {args.repo_id}")
            return 0
        from huggingface_hub import HfApi

        api = HfApi()
        api.create_repo(args.repo_id, private=args.private, exist_ok=True)
        api.upload_folder(
            folder_path=str(args.model), repo_id=args.repo_id, commit_message="medunlearn publish"
        )
    except (UnlearningInputError, FileNotFoundError) as error:
        print(f"medunlearn publish: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # network/auth failures: a clear line, not a traceback
        print(f"medunlearn publish: upload to {args.repo_id} failed: {error}", file=sys.stderr)
        return 1
    print(f"published {len(files)} files to https://huggingface.co/{args.repo_id}")
    return 0
