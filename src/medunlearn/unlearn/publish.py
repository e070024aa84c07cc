"""Publishing a model folder to the Hub: the checks before any upload, then ``huggingface_hub``'s commit of
the model's files, and only those (docs/cli.md, "Publishing")."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.utils.publishing import (
    PublishError,
    check_repo_id,
    checked_files,
    existing_folder,
    upload_files,
)
from medunlearn.utils.user_files import read_front_matter

__all__ = ["MODEL_FILES", "PublishError", "files_to_publish", "publish_model"]

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl")
# What a model folder written by `finetune` or `unlearn` holds that belongs on the Hub: weights, configs,
# tokenizer files, the card and the project's own records. Anything else (a .env, the evaluation's weights
# digest cache, notes) stays local. The probe's best/ step is a model folder of the same files.
MODEL_FILES = (
    "README.md",
    "*.safetensors",
    "model.safetensors.index.json",
    "config.json",
    "generation_config.json",
    "adapter_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
    "unlearning_config.json",
    "conventions.json",
    "probe.json",
)
MODEL_SUBFOLDERS = ("best",)


def _entries(folder: Path) -> list[str]:
    """The names in ``folder`` and in its ``best/`` (not a link), as paths relative to ``folder``."""
    names = []
    for prefix in ("", *(f"{sub}/" for sub in MODEL_SUBFOLDERS)):
        place = folder / prefix
        if place.is_dir() and not place.is_symlink():
            names += [prefix + entry.name for entry in sorted(place.iterdir())]
    return names


def _is_model_file(name: str) -> bool:
    return any(fnmatch.fnmatchcase(Path(name).name, pattern) for pattern in MODEL_FILES)


def files_to_publish(folder: Path) -> list[Path]:
    """The model files of ``folder`` (:data:`MODEL_FILES`), after checking it has a model card and safetensors
    weights only, and that no listed file is a link leading out of it."""
    folder = existing_folder(folder, "model folder")
    if not (folder / "README.md").is_file():
        raise UnlearningInputError(f"{folder} has no README.md model card (written by `medunlearn unlearn`)")
    read_front_matter(folder / "README.md")  # the Hub reads its metadata: a key given twice is named here
    entries = _entries(folder)
    pickled = [name for name in entries if Path(name).suffix in PICKLE_SUFFIXES]
    if pickled:
        raise UnlearningInputError(f"{folder}: refusing pickled files {pickled}")
    names = checked_files(
        folder, [(name, f"{folder} model file") for name in entries if _is_model_file(name)]
    )
    if not any(name.endswith(".safetensors") for name in names):
        raise UnlearningInputError(f"{folder} holds no .safetensors weights")
    return [folder / name for name in names]


def publish_model(
    folder: str | Path, repo_id: str, *, private: bool = False, dry_run: bool = False
) -> list[Path]:
    """Check ``folder`` and upload its model files to the model repository ``repo_id`` (nothing with
    ``dry_run``); returns the files. The token comes from ``HF_TOKEN`` or the user's login, never from an
    argument."""
    check_repo_id(repo_id, "--repo-id")
    files = files_to_publish(Path(folder))
    if dry_run:
        return files
    names = [str(path.relative_to(folder)) for path in files]
    upload_files(
        Path(folder), names, repo_id, repo_type="model", private=private, message="medunlearn publish"
    )
    return files
