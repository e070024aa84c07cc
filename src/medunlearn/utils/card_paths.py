"""The data files a dataset card's ``configs:`` block names: the one parser of a config's ``data_files``.

``datasets`` reads ``data_files`` in three shapes only (``datasets.utils.metadata.MetadataConfigs``): a path
(or glob), a list of paths, or a list of ``{split, path}`` mappings whose ``path`` is a path or a list of
paths; a split named twice, a mapping of split to path, or a mapping with other keys makes it fail when it
reads the card. Each is refused here with the README's line and the field, so that a command reading a folder
never meets a shape it does not expect (`medunlearn.utils.user_files.card_data_files` is the reader).

Every path must also stay inside the folder (`check_inside`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from medunlearn.errors import FileContentError

_GLOB_CHARACTERS = re.compile(r"[*?\[]")
# A split name as `datasets` accepts it in a card (datasets.naming._split_re).
_SPLIT_NAME = re.compile(r"\w+(\.\w+)*")
SHAPES = "a path, a list of paths or a list of {split, path} mappings (the shapes datasets reads in a card)"


def data_file_splits(data_files, source: str, line: int | None, field: str) -> dict[str, list[str]]:
    """A config's ``data_files`` (`field` of the card `source`, near `line`) as ``{split: [paths]}``, ``{}``
    when it has none; a shape ``datasets`` refuses is a named error."""

    def refuse(where: str, why: str) -> FileContentError:
        return FileContentError(source, line, f"{field}{where}", why)

    if data_files is None:
        return {}
    if isinstance(data_files, str):
        return {"train": [_path(data_files, refuse, "")]}
    if not isinstance(data_files, list) or not data_files:
        raise refuse("", f"must be {SHAPES}, not {_kind(data_files)}")
    if all(isinstance(item, str) for item in data_files):
        return {"train": [_path(item, refuse, f"[{index}]") for index, item in enumerate(data_files)]}
    splits: dict[str, list[str]] = {}
    for index, item in enumerate(data_files):
        if not isinstance(item, dict) or set(item) != {"split", "path"}:
            found = f"the keys {', '.join(map(str, item))}" if isinstance(item, dict) else _kind(item)
            raise refuse(
                f"[{index}]", f"must be a mapping with the keys split and path, not {found}: {SHAPES}"
            )
        split, paths = item["split"], item["path"]
        if not isinstance(split, str) or _SPLIT_NAME.fullmatch(split) is None:
            raise refuse(f"[{index}].split", f"{split!r} is not a split name (letters, digits, _ and .)")
        if split in splits:
            raise refuse(f"[{index}].split", f"split {split!r} is given twice: datasets refuses the card")
        paths = [paths] if isinstance(paths, str) else paths
        if not isinstance(paths, list) or not paths:
            raise refuse(f"[{index}].path", f"must be a path or a list of paths, not {_kind(item['path'])}")
        splits[split] = [_path(path, refuse, f"[{index}].path") for path in paths]
    return splits


def _path(value, refuse, where: str) -> str:
    """`value` when it is a non-empty path; else the error `refuse` makes for the field ending `where`."""
    if not isinstance(value, str) or not value.strip():
        raise refuse(where, f"must be a file path, not {_kind(value)}")
    return value


def _kind(value) -> str:
    """What a YAML value is, for a message: ``a mapping``, ``an empty list``, ``the number 3``."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "an empty list" if not value else "a list"
    return "an empty path" if value == "" else f"{value!r}"


def check_inside(folder: Path, pattern: str, source: str, line: int | None, field: str) -> None:
    """Refuse a data file path of a card that leads out of `folder`: relative, no ``..``, no ``~``, no URL,
    and not a link leading out, so that reading a folder never reads a file elsewhere."""
    parts = Path(pattern.replace("\\", "/"))
    leaves = (
        parts.is_absolute()
        or pattern.startswith(("~", "\\"))
        or "://" in pattern
        or re.match(r"[A-Za-z]:", pattern) is not None
        or ".." in parts.parts
    )
    if not leaves and not _GLOB_CHARACTERS.search(pattern) and os.path.lexists(folder / pattern):
        try:
            target = (folder / pattern).resolve()
        except (RuntimeError, OSError) as error:  # Python 3.11 raises RuntimeError on a loop, later OSError
            where = f"{source}, line {line}" if line is not None else source
            raise FileContentError(
                str(folder / pattern), None, None, f"is a symbolic link that loops back on itself ({where})"
            ) from error
        leaves = folder.resolve() not in target.parents
    if leaves:
        raise FileContentError(
            source,
            line,
            field,
            f"{pattern!r} leads outside the dataset folder {folder}: a data file path is relative to the "
            "folder and stays inside it",
        )
