"""Atomic writes, strict JSON and content fingerprints: a file or folder is the old one or the whole new one.

A reader (a person, ``datasets``, a resumed run) never sees half a file: text goes to a temporary file in the
same folder, then ``os.replace`` renames it over the target (atomic on POSIX). A folder is built in a staging
folder beside it and swapped in whole.

>>> import tempfile
>>> from pathlib import Path
>>> path = atomic_write_text(Path(tempfile.mkdtemp()) / "a" / "b.txt", "hello\\n")
>>> path.read_text()
'hello\\n'
>>> fingerprint({"b": 1, "a": [1, 2]}) == fingerprint({"a": [1, 2], "b": 1})
True
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename (with the
    permissions an ordinary ``open(path, "w")`` would give, not ``mkstemp``'s owner-only ones)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write_bytes` of UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_lines(path: str | os.PathLike, lines: Iterable[str]) -> Path:
    """Write one line per item (each gets a trailing newline), atomically."""
    return atomic_write_text(path, "".join(f"{line}\n" for line in lines))


@contextmanager
def staged_folder(out_dir: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty staging folder beside ``out_dir``; on success it replaces ``out_dir`` (whatever was
    there), on any failure it is removed and ``out_dir`` is left as it was."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    os.chmod(staging, 0o777 & ~_umask())
    try:
        yield staging
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
            os.replace(out_dir, old / out_dir.name)
            os.replace(staging, out_dir)
            shutil.rmtree(old)
        else:
            os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def finite_or_none(value: Any) -> Any:
    """``value`` with every NaN / inf float, in nested dicts, lists and tuples too, replaced by ``None``: an
    undefined metric (AFE when the before model scored 0) is null in strict JSON (``allow_nan=False``).

    >>> finite_or_none({"afe": float("nan"), "mu": [0.5, float("inf")], "ci": (0.1, float("nan"))})
    {'afe': None, 'mu': [0.5, None], 'ci': (0.1, None)}
    """
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite_or_none(item) for item in value]
    if isinstance(value, tuple):
        return tuple(finite_or_none(item) for item in value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fingerprint(value: Any) -> str:
    """A short SHA-256 of :func:`canonical_json` of ``value`` (16 hex digits)."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:16]


def file_fingerprint(path: str | os.PathLike) -> str:
    """A short SHA-256 of a file's bytes (16 hex digits), read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]
