"""The digest of a saved model folder's weights, from its files' own bytes, computed once per folder.

What the evaluation outputs' fingerprint names as the model's weights (``docs/evaluation.md``, "The evaluation
folder"): sha256 over the folder's weight files and its ``config.json`` (names, sizes, bytes, streamed), so a
changed weight file gives a new digest and its old outputs are never reused. The digest is cached under
``$MEDUNLEARN_CACHE/digests/`` (default ``~/.cache/medunlearn``), one file per model folder, keyed by each
weight file's name, size and modification time (in nanoseconds): never in the model folder itself, which is
the command's input and is never written. A LoRA adapter folder's digest covers its base model's folder too.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import Future
from pathlib import Path

from medunlearn.utils.files import atomic_write_text

# The name of the cache earlier versions wrote into the model folder: never written now, and never published.
DIGEST_FILE = ".medunlearn-digest.json"
DIGEST_VERSION = 1
# The files a folder's model is made of: its weights (every format transformers and peft save) and what
# shapes them.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
CONFIG_FILES = ("config.json", "adapter_config.json")
CHUNK = 16 << 20


def _weight_files(folder: Path) -> list[Path]:
    return sorted(
        path
        for path in folder.iterdir()
        if path.is_file() and (path.suffix in WEIGHT_SUFFIXES or path.name in CONFIG_FILES)
    )


def _stat_key(files: list[Path]) -> dict[str, list[int]]:
    return {path.name: [path.stat().st_size, path.stat().st_mtime_ns] for path in files}


def _user_cache_file(folder: Path) -> Path:
    root = Path(os.environ.get("MEDUNLEARN_CACHE", Path.home() / ".cache" / "medunlearn"))
    return root / "digests" / f"{hashlib.sha256(str(folder).encode()).hexdigest()[:32]}.json"


def _read_cache(path: Path, key: dict) -> str | None:
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if cached.get("version") == DIGEST_VERSION and all(
        cached.get(name) == value for name, value in key.items()
    ):
        return cached.get("digest")
    return None


def _write_cache(path: Path, payload: dict) -> None:
    try:
        atomic_write_text(path, json.dumps(payload, indent=2))
    except OSError:  # an unwritable cache only costs the hashing again next time
        pass


def hash_files(files: list[Path]) -> str:
    """sha256 over each file's name, size and bytes (streamed in 16 MiB chunks), in the order given."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}\x1f{path.stat().st_size}\x1f".encode())
        with path.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def folder_weights_digest(folder: str | Path, *, cached_only: bool = False) -> str | None:
    """The digest of the model saved in ``folder`` (see the module docstring); ``None`` when ``folder`` is not
    a local folder holding weight files (a Hub id, an adapter whose base is not a local folder): the caller
    then hashes the loaded tensors instead.

    Hashes the files only when the cache is missing or any file's name, size or mtime changed; with
    ``cached_only``, returns ``None`` then instead of hashing.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    folder = folder.resolve()
    files = _weight_files(folder)
    if not any(path.suffix in WEIGHT_SUFFIXES for path in files):
        return None
    base = ""
    if (folder / "adapter_config.json").is_file():
        try:
            base_name = json.loads((folder / "adapter_config.json").read_text()).get(
                "base_model_name_or_path"
            )
        except (OSError, ValueError, AttributeError):  # damaged: the model load names it; no digest here
            return None
        base = folder_weights_digest(base_name, cached_only=cached_only) if base_name else None
        if base is None:
            return None
    # An adapter's cached digest is also keyed by its base's (a changed base invalidates it).
    key = {"files": _stat_key(files), "base": base}
    cache = _user_cache_file(folder)
    cached = _read_cache(cache, key)
    if cached is not None:
        return cached
    if cached_only:
        return None
    digest = hash_files(files)
    if base:
        digest = hashlib.sha256(f"{digest}\x1fbase {base}".encode()).hexdigest()
    digest = digest[:32]
    _write_cache(cache, {"version": DIGEST_VERSION, **key, "digest": digest})
    return digest


def start_folder_digest(folder: str | Path) -> Future:
    """:func:`folder_weights_digest` of ``folder`` in a background thread (its ``result()`` is the digest).

    Started before the model is loaded from the same folder, the hashing (file reads and sha256 release the
    GIL) overlaps the load instead of adding to it, on a folder whose digest is not cached yet.
    """
    from concurrent.futures import ThreadPoolExecutor

    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="medunlearn-digest")
    future = executor.submit(folder_weights_digest, folder)
    executor.shutdown(wait=False)
    return future


__all__ = ["DIGEST_FILE", "folder_weights_digest", "hash_files", "start_folder_digest"]
