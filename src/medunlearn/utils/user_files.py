"""Reading the files a user hands us: one place for encodings, file types and parse errors.

Every reader here turns what can go wrong with a user's file into a `FileContentError` that names the file
and, where there is one, the line (1-based, as an editor shows it) and the field:

- text must be UTF-8 (a byte-order mark is honoured, and UTF-16/UTF-32 files that start with one are
  decoded); anything else is refused with the line and byte where decoding failed, never read with
  replacement characters;
- JSON, JSON Lines and YAML parse errors give the line and column;
- a JSON Lines row must be an object, a ``.gz`` file must be gzip, a parquet file must be readable whole.

Size: files are streamed where the format allows (CSV, JSON Lines). Limits on a single value (a note's
length) belong to the reader that knows what the value is; see `check_text_length`.
"""

from __future__ import annotations

import codecs
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medunlearn.errors import FileContentError, MissingInputError

GZIP_MAGIC = b"\x1f\x8b"
SAVE_AS_UTF8 = "save it as UTF-8"
# Byte-order marks, longest first (the UTF-32 LE mark starts with the UTF-16 LE one).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def existing_file(path: str | Path) -> Path:
    """`path` as a `Path`, or a named error when it is missing or a folder."""
    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"{path}: no such file")
    if not path.is_file():
        raise FileContentError(str(path), None, None, "is a folder, not a file")
    return path


def encoding_of(head: bytes) -> str:
    """The encoding a file's first bytes announce with a byte-order mark; UTF-8 when there is none."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    return "utf-8"


def decode_text(data: bytes, source: str) -> str:
    """`data` decoded (BOM honoured, UTF-8 otherwise), or an error naming the line and byte that failed."""
    try:
        text = data.decode(encoding_of(data[:4]))
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise FileContentError(
            source,
            line,
            None,
            f"is not UTF-8 text (byte {error.start + 1} cannot be decoded): {SAVE_AS_UTF8}",
        ) from error
    check_no_nul(text, source, None)
    return text


def check_no_nul(text: str, source: str, line: int | None) -> None:
    """Text files hold no NUL character; ASCII saved as UTF-16 without a byte-order mark is valid UTF-8 with
    a NUL after every letter, so this is how such a file is caught."""
    position = text.find("\x00")
    if position >= 0:
        line = line if line is not None else text.count("\n", 0, position) + 1
        raise FileContentError(
            source, line, None, f"holds NUL characters (UTF-16 without a byte-order mark?): {SAVE_AS_UTF8}"
        )


def read_text(path: str | Path) -> str:
    """A whole text file, decoded as `decode_text` says."""
    path = existing_file(path)
    return decode_text(path.read_bytes(), str(path))


def text_lines(path: str | Path) -> Iterator[str]:
    """The lines of a text file, line endings kept, streamed (UTF-8 decoded line by line: a newline byte never
    occurs inside a UTF-8 character). A file with a UTF-16/32 byte-order mark is decoded whole."""
    path = existing_file(path)
    with path.open("rb") as handle:
        encoding = encoding_of(handle.read(4))
    if encoding.startswith("utf-16") or encoding.startswith("utf-32"):
        yield from read_text(path).splitlines(keepends=True)
        return
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise FileContentError(
                    str(path),
                    number,
                    None,
                    f"is not UTF-8 text (byte {error.start + 1} of the line): {SAVE_AS_UTF8}",
                ) from error
            check_no_nul(line, str(path), number)
            yield line


def parse_json(text: str, source: str) -> Any:
    """`json.loads(text)`, with a parse error located by line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise FileContentError(
            source, error.lineno, None, f"invalid JSON at column {error.colno}: {error.msg}"
        ) from error


def read_json(path: str | Path, expect: type | tuple[type, ...] | None = None, what: str = "") -> Any:
    """A JSON file's value; `expect` (``dict``, ``(list, dict)``) is the type its top level must have."""
    path = existing_file(path)
    value = parse_json(read_text(path), str(path))
    if expect is not None and not isinstance(value, expect):
        raise FileContentError(
            str(path),
            None,
            None,
            f"{what or 'the file'} must be {_type_names(expect)}, not {json_type_name(value)}",
        )
    return value


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSON Lines file; each must be an object."""
    path = existing_file(path)
    for number, line in enumerate(text_lines(path), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line.rstrip("\r\n"))
        except json.JSONDecodeError as error:
            raise FileContentError(
                str(path), number, None, f"invalid JSON at column {error.colno}: {error.msg}"
            ) from error
        if not isinstance(value, dict):
            raise FileContentError(
                str(path), number, None, f"expected a JSON object, got {json_type_name(value)}"
            )
        yield number, value


def read_yaml(path: str | Path, expect: type | None = dict) -> Any:
    """A YAML file read with `yaml.safe_load` (never `yaml.load`); syntax errors give line and column."""
    import yaml

    path = existing_file(path)
    try:
        value = yaml.safe_load(read_text(path))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        line = mark.line + 1 if mark is not None else None
        column = f" at column {mark.column + 1}" if mark is not None else ""
        raise FileContentError(str(path), line, None, f"invalid YAML{column}: {problem}") from error
    if expect is not None and value is not None and not isinstance(value, expect):
        raise FileContentError(
            str(path), None, None, f"must hold a YAML mapping, not {json_type_name(value)}"
        )
    return value


def open_maybe_gzip(path: str | Path):
    """A binary handle on `path`, decompressed when it is gzip. A name ending in ``.gz`` must be gzip."""
    path = existing_file(path)
    with path.open("rb") as handle:
        is_gzip = handle.read(2) == GZIP_MAGIC
    if path.suffix == ".gz" and not is_gzip:
        raise FileContentError(str(path), None, None, "is named .gz but is not gzip-compressed")
    return gzip.open(path, "rb") if is_gzip else path.open("rb")


def read_parquet(path: str | Path, columns: list[str] | None = None):
    """A parquet file as a `pyarrow.Table`; a truncated or corrupt file is a named error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = existing_file(path)
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as error:
        raise FileContentError(
            str(path), None, None, f"is not a readable parquet file (truncated or corrupt?): {error}"
        ) from error


def parquet_column_names(path: str | Path) -> list[str]:
    """The column names of a parquet file, read from its footer; a truncated or corrupt file is a named
    error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = existing_file(path)
    try:
        return pq.read_schema(path).names
    except (pa.ArrowException, OSError) as error:
        raise FileContentError(
            str(path), None, None, f"is not a readable parquet file (truncated or corrupt?): {error}"
        ) from error


def check_text_length(text: str, limit: int, source: str, row: int | None, field_name: str) -> None:
    """Refuse a value longer than `limit` characters, before a tokenizer or parser spends minutes on it."""
    if len(text) > limit:
        raise FileContentError(
            source, row, field_name, f"is {len(text):,} characters long; the limit is {limit:,}", unit="row"
        )


def _type_names(expect: type | tuple[type, ...]) -> str:
    kinds = expect if isinstance(expect, tuple) else (expect,)
    return " or ".join(_JSON_NAMES.get(kind, kind.__name__) for kind in kinds)


def json_type_name(value: Any) -> str:
    for kind, name in _JSON_NAMES.items():  # bool before int: True is an int to isinstance
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


_JSON_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}
