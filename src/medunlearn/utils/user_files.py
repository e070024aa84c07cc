"""Reading the files a user hands us: one place for encodings, file types and parse errors.

Every reader here turns what can go wrong with a user's file into a `FileContentError` that names the file
and, where there is one, the line (1-based, as an editor shows it) and the field:

- text must be UTF-8 (a byte-order mark is honoured, and UTF-16/UTF-32 files that start with one are
  decoded); anything else is refused with the line and byte where decoding failed, never read with
  replacement characters;
- JSON, JSON Lines and YAML parse errors give the line and column; JSON is strict (``NaN`` and ``Infinity``,
  which Python's ``json`` accepts, are refused with the line and field) and neither a JSON object nor a YAML
  mapping may give a key twice (``json`` and PyYAML keep the last silently);
- a JSON Lines row must be an object, a ``.gz`` file must be gzip (and a gzip file is read decompressed,
  whatever its name), a parquet file must be readable whole; a parquet file or a CSV header may not name a
  column twice, and a file that is a symbolic link leading nowhere (a loop) is named as such;
- a dataset card is UTF-8, and its ``configs:`` block (README front matter) names data files inside its
  folder only, in the shapes ``datasets`` reads (`medunlearn.utils.card_paths`).

Size: files are streamed where the format allows (CSV, JSON Lines). Limits on a single value (a note's
length) belong to the reader that knows what the value is; `medunlearn.utils.text_limits` holds the rules
every reader of text fields shares.
"""

from __future__ import annotations

import codecs
import csv
import functools
import gzip
import json
import math
import re
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from medunlearn.errors import FileContentError, MissingInputError
from medunlearn.utils.card_paths import check_inside, data_file_splits
from medunlearn.utils.json_keys import (
    LONE_SURROGATE_ESCAPE,
    DuplicateKeyError,
    first_repeated_key,
    holds_lone_surrogate,
    key_path_of,
    unique_keys,
)

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


def not_a_file(path: str | Path) -> str:
    """Why ``path``, which is not a regular file, cannot be read as one: the end of a message naming it.

    >>> import tempfile
    >>> not_a_file(tempfile.mkdtemp()), not_a_file("no/such.yaml")
    ('is a folder, not a file', 'does not exist')
    """
    path = Path(path)
    if path.is_dir():
        return "is a folder, not a file"
    return "is not a regular file" if path.exists() else "does not exist"


def existing_file(path: str | Path) -> Path:
    """`path` as a `Path`, or a named error when it is missing or a folder."""
    path = Path(path)
    if not path.exists():
        if path.is_symlink():  # a link loop or a link whose target is gone: not "no such file"
            why = "is a symbolic link that leads to no file (a loop, or its target is gone)"
            raise FileContentError(str(path), None, None, why)
        raise MissingInputError(f"{path}: no such file")
    if not path.is_file():
        raise FileContentError(str(path), None, None, "is a folder, not a file")
    return path


def existing_folder(path: str | Path, what: str) -> Path:
    """`path` as a `Path` when it is a folder; else a named error that says which of the two it is not: a
    missing path (``MissingInputError``) or a file (``FileContentError``: ``is a file, not a folder``)."""
    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"{what} {path} does not exist")
    if not path.is_dir():
        raise FileContentError(f"{what} {path}", None, None, "is a file, not a folder")
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
        why = f"is not UTF-8 text (byte {error.start + 1} cannot be decoded): {SAVE_AS_UTF8}"
        raise FileContentError(source, line, None, why) from error
    check_no_nul(text, source, None)
    return text


def check_no_nul(text: str, source: str, line: int | None) -> None:
    """Text files hold no NUL character; ASCII saved as UTF-16 without a byte-order mark is valid UTF-8 with
    a NUL after every letter, so this is how such a file is caught."""
    position = text.find("\x00")
    if position >= 0:
        line = line if line is not None else text.count("\n", 0, position) + 1
        why = f"holds NUL characters (UTF-16 without a byte-order mark?): {SAVE_AS_UTF8}"
        raise FileContentError(source, line, None, why)


def read_text(path: str | Path) -> str:
    """A whole text file (decompressed when it is gzip), decoded as `decode_text` says."""
    path = existing_file(path)
    with open_maybe_gzip(path) as handle, _gzip_errors(path):
        data = handle.read()
    return decode_text(data, str(path))


def text_lines(path: str | Path) -> Iterator[str]:
    """The lines of a text file (decompressed when it is gzip), line endings kept, streamed: UTF-8 decoded
    line by line (a newline byte never occurs inside a UTF-8 character), so an error names its line. A file
    with a UTF-16/32 byte-order mark is decoded whole."""
    path = existing_file(path)
    with open_maybe_gzip(path) as handle, _gzip_errors(path):
        head = handle.read(4)
        if encoding_of(head).startswith(("utf-16", "utf-32")):
            yield from decode_text(head + handle.read(), str(path)).splitlines(keepends=True)
            return
        for number, raw in enumerate(_byte_lines(head, handle), start=1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                why = f"is not UTF-8 text (byte {error.start + 1} of the line): {SAVE_AS_UTF8}"
                raise FileContentError(str(path), number, None, why) from error
            check_no_nul(line, str(path), number)
            yield line


def csv_dict_reader(path: str | Path, known: Iterable[str] = ()) -> csv.DictReader:
    """A `csv.DictReader` over the lines of `path` (:func:`text_lines`), its header read: a column named
    twice is a named error (the reader would give each row the later column's value without a word), and so
    is every CSV parse error, at the line its record starts on (:class:`_CsvReader`), and a column that is
    one of the `known` names but for case or spaces (:func:`check_column_spelling`)."""
    reader = _CsvReader(existing_file(path))
    names = reader.fieldnames or []
    for column, name in enumerate(names):
        if name in names[:column]:
            twice = f"columns {names.index(name) + 1} and {column + 1}"
            why = f"the header names this column twice ({twice}): every column needs its own name"
            raise FileContentError(str(path), reader.line_num, name, why)
    check_column_spelling(names, known, str(path), reader.line_num)
    return reader


def check_column_spelling(names: Iterable[str], known: Iterable[str], source: str, line: int | None) -> None:
    """Refuse a column named as a `known` one but for case or surrounding spaces (``' patient_uid '``,
    ``'Patient_UID'``) when the file has no column of that exact name: the reader would take another
    column in its place (``patient_id``) or call it missing, and blame a later file.

    >>> check_column_spelling(["Patient_UID", "title"], ["patient_uid", "title"], "notes.csv", 1)
    Traceback (most recent call last):
    ...
    medunlearn.errors.FileContentError: notes.csv, line 1, field 'Patient_UID': this column ...
    """
    names = [str(name) for name in names]
    for name in names:
        meant = next((k for k in known if name != k and name.strip().lower() == k.lower()), None)
        if meant is not None and meant not in names:
            why = f"this column is not {meant!r} (names are exact, case and spaces included); rename it"
            raise FileContentError(source, line, name, f"{why} {meant!r}")


class _CsvReader(csv.DictReader):
    """A strict `csv.DictReader`: the lax default reads a file cut off inside a quoted field as if the quote
    closed at the end, so its last record came back silently short; strict refuses it (and stray characters
    after a closing quote). A `csv.Error` becomes a `FileContentError` at the line its record starts on."""

    def __init__(self, path: Path):
        super().__init__(text_lines(path), strict=True)
        self.path = path
        self._named(lambda: self.fieldnames)  # the header, read now so that its errors are named too

    def __next__(self) -> dict:
        return self._named(super().__next__)

    def _named(self, read):
        start = self.reader.line_num + 1
        try:
            return read()
        except csv.Error as error:
            cut = "unexpected end of data" in str(error)
            why = "the file ends inside a quoted field (cut off, or a quote never closed)" if cut else error
            raise FileContentError(str(self.path), start, None, f"invalid CSV record: {why}") from error


def _byte_lines(head: bytes, handle) -> Iterator[bytes]:
    """The lines of `head` and the rest of `handle`, split at newlines only, as iterating a binary file."""
    first = head + handle.readline()
    yield from re.findall(rb"[^\n]*\n|[^\n]+\Z", first)
    yield from handle


@contextmanager
def _gzip_errors(path: Path) -> Iterator[None]:
    """Turn a damaged gzip stream, found while reading, into a named error."""
    try:
        yield
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        problem = f"the gzip stream is damaged or truncated ({error})"
        raise FileContentError(str(path), None, None, problem) from error


def parse_json(text: str, source: str, line: int = 1, *, allow_non_finite: bool = False) -> Any:
    """`json.loads(text)` as strict JSON, with a parse error located by line and column; `line` is the line of
    the file that `text` starts on (a JSON Lines row).

    ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (RFC 8259), though Python's ``json`` reads them: a
    value that holds one is refused with its line and field, so a score or an answer is never silently NaN
    (``allow_non_finite`` admits them, for a file another library writes that way: a model's config).

    >>> parse_json('{"answer": "A.", "score": NaN}', "qa.jsonl", line=3)
    Traceback (most recent call last):
    ...
    medunlearn.errors.FileContentError: qa.jsonl, line 3, field 'score': NaN is not a JSON number ...
    """
    constants: list[str] = []

    def mark(token: str) -> Any:
        if allow_non_finite:
            return float(token)
        constants.append(token)
        return _NonFinite(token)

    def number(token: str) -> Any:
        value = float(token)
        return value if math.isfinite(value) else mark(token)  # 1e999 reads as inf

    try:
        value = json.loads(text, parse_constant=mark, parse_float=number, object_pairs_hook=unique_keys)
    except DuplicateKeyError:
        at, first, key = first_repeated_key(text)
        why = (
            f"the key is given twice (first at line {line + first - 1}); JSON readers keep only the last, so "
            "one of the two values would be ignored"
        )
        raise FileContentError(source, line + at - 1, key, why) from None
    except json.JSONDecodeError as error:
        raise FileContentError(
            source, line + error.lineno - 1, None, f"invalid JSON at column {error.colno}: {error.msg}"
        ) from error
    except RecursionError:  # a value nested thousands deep: no record of ours is
        raise FileContentError(source, line, None, "JSON nested too deeply to be a record") from None
    if constants:
        raise FileContentError(
            source,
            line + _line_of_token(text, constants[0]) - 1,
            key_path_of(value, lambda item: isinstance(item, _NonFinite))[1],
            f"{constants[0]} is not a JSON number (strict JSON has no NaN or Infinity: write null or a "
            "number)",
        )
    escape = LONE_SURROGATE_ESCAPE.search(
        text
    )  # \ud800 alone reads as a str no parquet or tokenizer can encode
    if escape:
        found, where = key_path_of(value, holds_lone_surrogate)
        if found:
            raise FileContentError(
                source,
                line + text.count("\n", 0, escape.start()),
                where and where.encode("utf-8", "backslashreplace").decode(),  # a key may be the one
                "holds a lone surrogate escape (half of a UTF-16 pair, e.g. \\ud800), which is no character: "
                "write the character itself, or both halves of its pair",
            )
    return value


class _NonFinite(str):
    """What `parse_json` reads ``NaN`` / ``Infinity`` / ``1e999`` as, so the field holding it can be found."""


def _line_of_token(text: str, token: str) -> int:
    """The line (1-based) of the first `token` of `text` that is not inside a JSON string."""
    pattern = re.compile(r'"(?:[^"\\]|\\.)*"|(' + re.escape(token) + r")")
    found = next((match for match in pattern.finditer(text) if match.group(1)), None)
    return text.count("\n", 0, found.start(1)) + 1 if found else 1


def read_json(
    path: str | Path,
    expect: type | tuple[type, ...] | None = None,
    what: str = "",
    *,
    allow_non_finite: bool = False,
) -> Any:
    """A JSON file's value; `expect` (``dict``, ``(list, dict)``) is the type its top level must have."""
    path = existing_file(path)
    value = parse_json(read_text(path), str(path), allow_non_finite=allow_non_finite)
    if expect is not None and not isinstance(value, expect):
        why = f"{what or 'the file'} must be {_type_names(expect)}, not {json_type_name(value)}"
        raise FileContentError(str(path), None, None, why)
    return value


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSON Lines file; each must be an object."""
    path = existing_file(path)
    for number, line in enumerate(text_lines(path), start=1):
        if not line.strip():
            continue
        value = parse_json(line.rstrip("\r\n"), str(path), number)
        if not isinstance(value, dict):
            why = f"expected a JSON object, got {json_type_name(value)}"
            raise FileContentError(str(path), number, None, why)
        yield number, value


def read_json_records(path: str | Path) -> list[dict]:
    """The objects of a data file that is either a JSON list or JSON Lines (``datasets`` reads both under a
    ``.json`` name), each checked as `read_json` / `read_jsonl` check them."""
    path = existing_file(path)
    head = next((line for line in text_lines(path) if line.strip()), "")
    if not head.lstrip().startswith("["):
        return [row for _, row in read_jsonl(path)]
    rows = read_json(path, expect=list)
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            why = f"expected a JSON object, got {json_type_name(row)}"
            raise FileContentError(str(path), number, None, why, unit="row")
    return rows


def read_yaml(path: str | Path, expect: type | None = dict) -> Any:
    """A YAML file read as `parse_yaml` says; `expect` is the type its top level must have (a mapping)."""
    path = existing_file(path)
    value = parse_yaml(read_text(path), str(path))
    if expect is not None and value is not None and not isinstance(value, expect):
        why = f"must hold a YAML mapping, not {json_type_name(value)}"
        raise FileContentError(str(path), None, None, why)
    return value


def parse_yaml(text: str, source: str, line: int = 1) -> Any:
    r"""`text` read with a subclass of PyYAML's `SafeLoader` (never the unsafe loader) that refuses a mapping
    giving a key twice; errors name `source`, the line (`line` is the line of the file that `text` starts on:
    a README's front matter) and the column or key.

    >>> parse_yaml("method: npo\nlearning_rate: 1e-5\nmethod: grad_diff\n", "npo.yaml")
    Traceback (most recent call last):
    ...
    medunlearn.errors.FileContentError: npo.yaml, line 3, field 'method': the key is given twice (first at...
    """
    import yaml

    try:
        return yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader subclass: safe_load's loader
    except _DuplicateKeyError as error:
        raise FileContentError(
            source,
            line + error.mark.line,
            str(error.key),
            f"the key is given twice (first at line {line + error.first_line - 1}); YAML keeps only the "
            "last, so one of the two values would be ignored",
        ) from error
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        where = line + mark.line if mark is not None else None
        column = f" at column {mark.column + 1}" if mark is not None else ""
        raise FileContentError(source, where, None, f"invalid YAML{column}: {problem}") from error


@functools.cache
def _unique_key_loader():
    """PyYAML's `SafeLoader`, refusing a mapping that gives a key twice (made on first use: yaml is imported
    lazily)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                _check_unique_keys(self, node)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


class _DuplicateKeyError(Exception):
    """A YAML mapping gives `key` twice: first on `first_line`, again at `mark` (0-based, PyYAML's)."""

    def __init__(self, key, first_line: int, mark):
        super().__init__(f"duplicate key {key!r}")
        self.key, self.first_line, self.mark = key, first_line, mark


def _check_unique_keys(loader, node) -> None:
    """Raise `_DuplicateKeyError` at the second occurrence of a key of the mapping `node`. Checked before
    merge keys (``<<: *base``) are expanded: a key that overrides a merged one is not a duplicate."""
    seen: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in seen:
                raise _DuplicateKeyError(key, seen[key], key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        except TypeError:  # an unhashable key: PyYAML's own check names it
            continue


# A README's front matter: a YAML block between two ``---`` lines at the very top (a dataset or model card).
_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(?P<yaml>.*?)^---[ \t]*\r?$", re.DOTALL | re.MULTILINE)


def read_front_matter(readme: str | Path) -> dict | None:
    """The YAML header of a README (a dataset or model card) as a mapping, read as `parse_yaml` says (its
    errors name the README's own lines); ``None`` when the README has no header. A card is UTF-8 (a UTF-8
    byte-order mark is fine): ``datasets`` and the Hub read no other encoding."""
    readme = existing_file(readme)
    with readme.open("rb") as handle:
        encoding = encoding_of(handle.read(4))
    if encoding.startswith(("utf-16", "utf-32")):  # read_text decodes it; datasets and the Hub do not
        why = f"is {encoding.upper()} text: datasets reads a dataset card as UTF-8, {SAVE_AS_UTF8}"
        raise FileContentError(str(readme), None, None, why)
    match = _FRONT_MATTER.match(read_text(readme))
    if match is None:
        return None
    value = parse_yaml(match["yaml"], str(readme), line=2)
    if value is not None and not isinstance(value, dict):
        raise FileContentError(
            str(readme), 2, None, f"the YAML header must be a mapping, not {json_type_name(value)}"
        )
    return value or {}


def card_data_files(folder: str | Path) -> dict[str, dict[str, list[str]]]:
    """``{config: {split: [path or glob, ...]}}`` from a dataset folder's README ``configs:`` block, in the
    shapes ``datasets`` reads (`medunlearn.utils.card_paths`: any other is named), every path inside the
    folder; empty without a README or a ``configs:`` block."""
    folder = Path(folder)
    readme = folder / "README.md"
    header = read_front_matter(readme) if readme.is_file() else None
    configs = (header or {}).get("configs")
    if configs is None:
        return {}
    text = read_text(readme)
    if not isinstance(configs, list):
        raise FileContentError(str(readme), _line_of(text, "configs:"), "configs", "must be a list")
    declared: dict[str, dict[str, list[str]]] = {}
    for index, entry in enumerate(configs):
        field = f"configs[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("config_name"), str):
            raise FileContentError(
                str(readme), _line_of(text, "configs:"), field, "must be a mapping with a config_name"
            )
        name = entry["config_name"]
        line = _line_of(text, f"config_name: {name}")
        splits = data_file_splits(entry.get("data_files"), str(readme), line, f"{field}.data_files")
        for patterns in splits.values():
            for pattern in patterns:
                check_inside(folder, pattern, str(readme), _line_of(text, pattern), f"{field}.data_files")
        declared[name] = splits
    return declared


def _line_of(text: str, needle: str) -> int | None:
    """The first line (1-based) of `text` that contains `needle`."""
    position = text.find(needle)
    return text.count("\n", 0, position) + 1 if position >= 0 else None


def open_maybe_gzip(path: str | Path):
    """A binary handle on `path`, decompressed when it is gzip. A name ending in ``.gz`` must be gzip."""
    path = existing_file(path)
    with path.open("rb") as handle:
        is_gzip = handle.read(2) == GZIP_MAGIC
    if path.suffix == ".gz" and not is_gzip:
        raise FileContentError(str(path), None, None, "is named .gz but is not gzip-compressed")
    return gzip.open(path, "rb") if is_gzip else path.open("rb")


def read_parquet(path: str | Path, columns: list[str] | None = None):
    """A parquet file as a `pyarrow.Table`; a truncated or corrupt file, or one with a column name given
    twice, is a named error (:func:`parquet_schema`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = existing_file(path)
    names = parquet_schema(path).names  # a corrupt file or a column named twice: named here
    missing = [name for name in columns or [] if name not in names]
    if missing:  # pyarrow's "No match for FieldRef" would read as a corrupt file
        raise FileContentError(str(path), None, missing[0], "the column is missing")
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as error:
        raise _unreadable_parquet(path, error) from error


def read_parquet_frame(path: str | Path, columns: list[str] | None = None):
    """A parquet file as a pandas `DataFrame`, read as :func:`read_parquet` says (``pd.read_parquet`` would
    raise pyarrow's error on a truncated or empty file)."""
    return read_parquet(path, columns).to_pandas()


def parquet_schema(path: str | Path):
    """The schema (a `pyarrow.Schema`: column names and types) of a parquet file, read from its footer; a
    truncated or corrupt file is a named error, and so is a column name given twice (which of the two a
    reader takes is arbitrary: pyarrow refuses to select it, pandas and ``datasets`` keep one)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = existing_file(path)
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError) as error:
        raise _unreadable_parquet(path, error) from error
    twice = [name for index, name in enumerate(schema.names) if name in schema.names[:index]]
    if twice:
        why = "the column name appears twice: every column needs its own name"
        raise FileContentError(str(path), None, twice[0], why)
    return schema


def _unreadable_parquet(path: Path, error: Exception) -> FileContentError:
    why = f"is not a readable parquet file (truncated or corrupt?): {error}"
    return FileContentError(str(path), None, None, why)


def parquet_column_names(path: str | Path) -> list[str]:
    """The column names of a parquet file (:func:`parquet_schema`)."""
    return parquet_schema(path).names


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
