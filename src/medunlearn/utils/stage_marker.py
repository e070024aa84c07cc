"""Stage markers: a stage is finished when its marker file holds the stage's fingerprint.

A resumable pipeline (the study runner, docs/study.md) writes one small JSON file per finished stage, in the
stage's folder, last: ``{"fingerprint": ..., <anything else worth keeping>}``. A marker that is missing,
unreadable or holds another fingerprint means the stage must run again: a killed run never leaves a marker (it
is written atomically, after the outputs), and a changed setting changes the fingerprint.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> is_done(folder, "abc")
    False
    >>> _ = mark_done(folder, "abc", {"seconds": 1.5})
    >>> is_done(folder, "abc"), is_done(folder, "xyz"), read_marker(folder)["seconds"]
    (True, False, 1.5)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from medunlearn.utils.files import atomic_write_text

DONE = "done.json"


def marker_path(folder: str | os.PathLike, name: str = DONE) -> Path:
    return Path(folder) / name


def read_marker(folder: str | os.PathLike, name: str = DONE) -> dict | None:
    """The marker's record, or ``None`` when there is none (or it is not a JSON object: a half-edited file
    means "not finished", never an error)."""
    path = marker_path(folder, name)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def is_done(folder: str | os.PathLike, fingerprint: str, name: str = DONE) -> bool:
    """Whether ``folder``'s marker holds ``fingerprint``."""
    record = read_marker(folder, name)
    return record is not None and record.get("fingerprint") == fingerprint


def mark_done(
    folder: str | os.PathLike, fingerprint: str, record: dict[str, Any] | None = None, name: str = DONE
) -> Path:
    """Write the marker (``record`` with ``fingerprint`` set) atomically; returns its path."""
    payload = {**(record or {}), "fingerprint": fingerprint}
    return atomic_write_text(marker_path(folder, name), json.dumps(payload, indent=2, default=str))


__all__ = ["DONE", "is_done", "mark_done", "marker_path", "read_marker"]
