"""Publishing a model folder to the Hub: the checks before any upload, then ``huggingface_hub``'s commit of
the model's files, and only those (docs/cli.md, "Publishing")."""

from __future__ import annotations

import re
from pathlib import Path

from medunlearn.errors import FileContentError
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.utils.publishing import (
    PublishError,
    check_repo_id,
    checked_files,
    existing_folder,
    upload_files,
)
from medunlearn.utils.user_files import json_type_name, read_front_matter, read_json

__all__ = ["MODEL_FILES", "WEIGHTS", "PublishError", "audit_model_files", "files_to_publish", "publish_model"]

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl")
# What a model folder written by `finetune` or `unlearn` holds that belongs on the Hub: weights, configs,
# tokenizer files, the card and the project's own records. Anything else (a .env, a copy named
# 'secrets .safetensors', the evaluation's weights digest cache, notes) stays local. The probe's best/ step is
# a model folder of the same files. Weights: transformers' names, one file or shards named by the index.
WEIGHTS = re.compile(r"(?P<stem>model|adapter_model)(?P<shard>-\d{5}-of-\d{5})?\.safetensors")
SHARD_INDEX = "model.safetensors.index.json"
MODEL_FILES = (
    "README.md",
    SHARD_INDEX,
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
    return Path(name).name in MODEL_FILES or WEIGHTS.fullmatch(Path(name).name) is not None


def _safetensors_problem(path: Path) -> str | None:
    """Why ``path`` is not a safetensors file (its header and the tensors' offsets, read by the safetensors
    library without loading a tensor), else ``None``: a pickle or random bytes named ``model.safetensors``."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as weights:
            weights.keys()
    except Exception as error:  # SafetensorError, OSError: what the library says, named below
        return f"is not a readable safetensors file ({str(error)[:200]})"
    return None


def audit_model_files(folder: Path, names: list[str]) -> None:
    """The checks of every file :func:`files_to_publish` lists, before any upload: each ``.safetensors`` is a
    safetensors file, each ``.json`` valid JSON, a model folder's ``config.json`` a transformers config (with
    a ``model_type``) or its ``adapter_config.json`` a PEFT one, and shards are exactly those the index
    names. A damaged file is a :class:`~medunlearn.errors.FileContentError` naming it (exit 2)."""
    from medunlearn.models import check_model_configs

    read = {}  # each JSON file's value: the shard index is checked again below, from here
    for name in names:
        path = folder / name
        problem = _safetensors_problem(path) if name.endswith(".safetensors") else None
        if problem:
            raise FileContentError(str(path), None, None, problem)
        if name.endswith(".json"):  # read as transformers reads it
            read[name] = read_json(path, expect=(dict, list), allow_non_finite=True)
    for place in sorted({str(Path(name).parent) for name in names}):
        root = folder / place
        if not (root / "config.json").is_file() and not (root / "adapter_config.json").is_file():
            if any(Path(n).parent == Path(place) and n.endswith(".safetensors") for n in names):
                raise UnlearningInputError(
                    f"{root}: weights without a config.json (or a PEFT adapter_config.json)"
                )
            continue
        check_model_configs(root, "model folder")
        index = read.get(str(Path(place) / SHARD_INDEX))  # Path(".") / name is name
        _check_shards(root, [Path(n).name for n in names if Path(n).parent == Path(place)], index)


def _is_shard(name: str) -> bool:
    """A shard of full weights (``model-00001-of-00002.safetensors``): :data:`WEIGHTS`' shard form."""
    match = WEIGHTS.fullmatch(name)
    return match is not None and match["stem"] == "model" and match["shard"] is not None


def _check_shards(root: Path, names: list[str], index_value) -> None:
    """Sharded weights come with the index (``index_value``: its JSON, as :func:`audit_model_files` read
    it), which names exactly the shards in the folder."""
    shards = {name for name in names if _is_shard(name)}
    if not shards and SHARD_INDEX not in names:
        return
    index = root / SHARD_INDEX
    if SHARD_INDEX not in names:
        raise FileContentError(str(index), None, None, f"missing: it names the shards {sorted(shards)}")
    if not isinstance(index_value, dict):
        why = f"must be an object, not {json_type_name(index_value)}"
        raise FileContentError(str(index), None, None, why)
    weight_map = index_value.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise FileContentError(str(index), None, "weight_map", "must map each tensor to its shard file")
    named = {str(value) for value in weight_map.values()}
    if named != shards:
        missing, extra = sorted(named - shards), sorted(shards - named)
        raise FileContentError(
            str(index),
            None,
            "weight_map",
            f"names the shards {sorted(named)}, the folder holds {sorted(shards)}"
            + (f" (missing: {missing})" if missing else "")
            + (f" (not in the index: {extra})" if extra else ""),
        )


def files_to_publish(folder: Path) -> list[Path]:
    """The model files of ``folder`` (:data:`MODEL_FILES` and :data:`WEIGHTS`' names), after checking it has
    a model card and safetensors weights only, that no listed file is a link leading out of it, and auditing
    each (:func:`audit_model_files`)."""
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
        raise UnlearningInputError(
            f"{folder} holds no .safetensors weights (model.safetensors, model-00001-of-0000N.safetensors "
            "shards or adapter_model.safetensors)"
        )
    audit_model_files(folder, names)
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
