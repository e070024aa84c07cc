"""Reading benchmark folders through ``datasets``, fresh every time.

``datasets`` caches a local folder under its folder *name* and config name, not its contents: a folder rebuilt
in place, or a second folder with the same name elsewhere, is silently read from the first one's cache. Every
medunlearn command reads local folders through :func:`load_config`, which uses a private, throw-away cache and
in-memory tables (re-reading parquet is cheap). Hub ids go through the normal cache.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

# The config-name grammar lives in medunlearn.config_names; re-exported here, where callers have found it.
from medunlearn.config_names import ConfigNameError as ConfigNameError
from medunlearn.config_names import retain_config_for as retain_config_for
from medunlearn.errors import InputError, MedunlearnError, MissingInputError
from medunlearn.utils.text_limits import MAX_NOTE_CHARACTERS, MAX_TEXT_CHARACTERS, text_problem


@contextmanager
def quiet_datasets() -> Iterator[None]:
    """Silence ``datasets``' per-file progress bars (our commands show one bar for the whole task)."""
    import datasets

    were_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if were_enabled:
            datasets.enable_progress_bars()


def load_config(data: str | os.PathLike, config: str, split: str | None = None):
    """``datasets.load_dataset(data, config, split=split)``, reading a local folder's current files.

    >>> import tempfile
    >>> from medunlearn.amnesia import build_amnesia_folder
    >>> root = tempfile.mkdtemp()
    >>> small = build_amnesia_folder(f"{root}/a/amnesia", patients=20, seed=0)
    >>> large = build_amnesia_folder(f"{root}/b/amnesia", patients=40, seed=0)
    >>> load_config(small, "notes", "train").num_rows, load_config(large, "notes", "train").num_rows
    (20, 40)
    """
    import datasets
    from datasets.exceptions import DatasetGenerationError

    with quiet_datasets():
        if not Path(data).is_dir():
            return datasets.load_dataset(str(data), config, split=split)
        check_local_folder(data, config)
        with tempfile.TemporaryDirectory(prefix="medunlearn-data-") as cache_dir:
            try:
                return datasets.load_dataset(
                    str(data), config, split=split, cache_dir=cache_dir, keep_in_memory=True
                )
            except DatasetGenerationError as error:  # what it wraps says which file and why
                cause = error.__cause__ or error
                raise InputError(f"{data}: cannot read config {config!r}: {cause}") from error


def check_local_folder(folder: str | os.PathLike, config: str) -> None:
    """What ``datasets`` would otherwise fail on with a traceback, or read without a word, named first: the
    README's ``configs:`` block names data files inside the folder only
    (:func:`~medunlearn.utils.user_files.card_data_files`: no ``../x.parquet``, no absolute path, no key given
    twice); a JSON data file is UTF-8 (what ``datasets`` reads), strict JSON (no NaN, no key given twice) and
    one object per row, named by line (``datasets`` reads a latin-1 file, a NaN or a key given twice without a
    word); and the parquet files of
    ``config`` all have the same columns (the file and the missing and unexpected columns are named)."""
    from medunlearn.errors import FileContentError
    from medunlearn.utils.user_files import (
        card_data_files,
        encoding_of,
        parquet_column_names,
        read_json_records,
    )

    folder = Path(folder)
    paths = _split_files(folder, config, card_data_files(folder).get(config, {}))
    for path in paths:
        if path.suffix in (".json", ".jsonl"):
            if not read_json_records(path):  # datasets stops on an empty file with a bare StopIteration
                raise FileContentError(str(path), None, None, "holds no records")
            with path.open("rb") as handle:
                if encoding_of(handle.read(4)).startswith(("utf-16", "utf-32")):  # our reader decodes it
                    raise FileContentError(
                        str(path),
                        None,
                        None,
                        "is UTF-16/32 text; datasets reads data files as UTF-8: save it as UTF-8",
                    )
    files = [path for path in paths if path.suffix == ".parquet"]
    if not files:
        return
    expected = parquet_column_names(files[0])
    for path in files[1:]:
        found = parquet_column_names(path)
        missing = [name for name in expected if name not in found]
        unexpected = [name for name in found if name not in expected]
        if missing or unexpected:
            # Which of the two is wrong only the user knows: both are named, with what each has.
            raise FileContentError(
                str(path),
                None,
                (unexpected or missing)[0],
                f"has column(s) {', '.join(unexpected) or '(none)'} where {files[0]}, another data file of "
                f"config {config!r}, has {', '.join(missing) or '(none)'}: every data file of a config "
                "needs the same columns",
            )
    _check_same_types(files, config)


def _split_files(folder: Path, config: str, splits: dict[str, list[str]]) -> list[Path]:
    """The data files a config's README paths and globs match, each in one split only: a file that two
    splits (or two paths of one split) match would have its rows read twice (``data/forget_10/*.parquet``
    for ``train`` also matches ``holdout``'s file). Named by the README line of the glob that matched it."""
    owner: dict[Path, tuple[str, str]] = {}
    for split, patterns in splits.items():
        for pattern in patterns:
            for path in sorted(folder.glob(pattern)):
                if path in owner:
                    _refuse_shared_file(folder, config, path, owner[path], (split, pattern))
                owner[path] = (split, pattern)
    return list(owner)


def _refuse_shared_file(folder: Path, config: str, path: Path, first: tuple, second: tuple) -> None:
    from medunlearn.errors import FileContentError
    from medunlearn.utils.user_files import read_text

    readme = folder / "README.md"
    text = read_text(readme)

    def line(pattern: str) -> int | None:
        found = text.find(pattern)
        return text.count("\n", 0, found) + 1 if found >= 0 else None

    is_glob = [any(c in pattern for c in "*?[") for _, pattern in (first, second)]
    (split, pattern), (other_split, other_pattern) = (
        (second, first) if is_glob == [False, True] else (first, second)
    )
    other = f"split {other_split!r}" if other_split != split else "another path of the split"
    other_line = line(other_pattern)
    other += f" reads too ({other_pattern!r}" + (f", line {other_line})" if other_line else ")")
    raise FileContentError(
        str(readme),
        line(pattern),
        None,
        f"config {config!r} split {split!r} path {pattern!r} matches {path.relative_to(folder)}, which "
        f"{other}: each data file belongs to one split, read once",
    )


def _kind(arrow_type) -> str:
    """What a column holds, as ``datasets`` can cast between: text (string or large_string), numbers
    (integers or floats), or the exact type (lists, structs)."""
    import pyarrow as pa

    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "text"
    numeric = pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
    return "numbers" if numeric else str(arrow_type)


def _check_same_types(files: list[Path], config: str) -> None:
    """The parquet files of one config give each column one type (``datasets`` otherwise stops with "Failed to
    parse string ... as a scalar of type double", naming neither file nor column). The file named is the one
    whose column is not text where the other's is (a number where a question or answer belongs), else the
    later one; its first row with a value is named with the field."""
    from medunlearn.errors import FileContentError
    from medunlearn.utils.user_files import parquet_schema, read_parquet

    first = parquet_schema(files[0])
    for path in files[1:]:
        schema = parquet_schema(path)
        for name in first.names:
            ours, theirs = _kind(first.field(name).type), _kind(schema.field(name).type)
            if ours == theirs:
                continue
            first_wrong = theirs == "text"  # the text column is the right one; with none, the later file
            wrong, right = (files[0], path) if first_wrong else (path, files[0])
            wrong_kind, right_kind = (ours, theirs) if first_wrong else (theirs, ours)
            values = read_parquet(wrong, columns=[name])[name]
            row = next((i for i, valid in enumerate(values.is_valid().to_pylist(), start=1) if valid), 1)
            raise FileContentError(
                str(wrong),
                row,
                name,
                f"holds {wrong_kind} where {right}, another data file of config {config!r}, holds "
                f"{right_kind}: every data file of a config needs the same column types",
                unit="row",
            )


def split_source(folder: str | os.PathLike, config: str, split: str) -> str:
    """How an error names a split's rows: its data file as the folder's README lists it (rows are counted
    within it), or the folder, config and split when the split has several files (or ``folder`` is a Hub
    id)."""
    from medunlearn.utils.user_files import card_data_files

    folder = Path(folder)
    files = card_data_files(folder).get(config, {}).get(split, []) if folder.is_dir() else []
    return str(folder / files[0]) if len(files) == 1 else f"{folder}: config {config!r} split {split!r}"


def check_text_fields(split, columns, source: str) -> None:
    """Every value of ``columns`` (those ``split``, a ``datasets.Dataset``, has) is text: a null or a number
    (a parquet column of another type, read by ``datasets`` without a word) would reach a prompt, a score or
    a training document as ``"None"`` or ``"3.5"``; and no text holds a NUL character or runs past the
    limit of its field (:func:`medunlearn.utils.text_limits.text_problem`: a note 1,000,000 characters, any
    other field 100,000), as the readers of source files refuse them. Named by ``source``
    (:func:`split_source`), row (from 1) and field."""
    from medunlearn.errors import FileContentError, shown

    for column in (name for name in columns if name in split.column_names):
        limit = MAX_NOTE_CHARACTERS if column == "note" else MAX_TEXT_CHARACTERS
        for row, value in enumerate(split[column], start=1):
            problem = f"expected text, got {shown(value)}" if not isinstance(value, str) else None
            problem = problem or text_problem(value, limit=limit)
            if problem:
                raise FileContentError(source, row, column, problem, unit="row")


def repeated_question(questions: Iterable, groups: Iterable | None = None) -> tuple[int, int] | None:
    """``(row, first_row)``, both from 1, of the first question asked again (within its group: an AMNESIA
    patient; ``None``, the whole split), compared without case and extra spaces; ``None`` when none is. A QA
    row given twice would be trained on twice, or land in both a seen and an unseen split (one home: AMNESIA's
    QA file and a TOFU-format split are checked by it).

    >>> repeated_question(["Who wrote it?", "Where?", "who  wrote it? "])
    (3, 1)
    """
    first_row: dict[tuple, int] = {}
    for row, key in enumerate(_question_keys(questions, groups), start=1):
        if key in first_row:
            return row, first_row[key]
        first_row[key] = row
    return None


def _question_keys(questions: Iterable, groups: Iterable | None) -> Iterator[tuple]:
    """Each question as :func:`repeated_question` compares it: with its group, without case or extra
    spaces."""
    groups = itertools.repeat(None) if groups is None else groups
    return ((group, " ".join(str(question).split()).casefold()) for group, question in zip(groups, questions))


def _groups(split) -> list | None:
    """The groups a split's questions are compared within: its patients (AMNESIA), or none (TOFU)."""
    return list(split["patient_id"]) if "patient_id" in split.column_names else None


def check_no_repeated_question(split, source: str) -> None:
    """No question of ``split`` (a ``datasets.Dataset`` of QA) is asked twice (:func:`repeated_question`):
    within a patient when the split has a ``patient_id`` column (AMNESIA asks every patient its age), else
    within the whole split (TOFU: the reference data asks no question twice). Named by ``source``
    (:func:`split_source`), row (from 1) and field, with the row it was first asked at."""
    from medunlearn.errors import FileContentError

    groups = _groups(split)
    repeat = repeated_question(split["question"], groups)
    if repeat is not None:
        row, first = repeat
        who = "this question is" if groups is None else f"patient {groups[row - 1]!r} is asked this question"
        why = f"{who} asked already at row {first}: a QA row given twice (remove one of the two rows)"
        raise FileContentError(source, row, "question", why, unit="row")


def check_no_question_in_both(first, first_source: str, second, second_source: str) -> None:
    """No question of ``second`` is one of ``first`` (both ``datasets.Dataset`` of QA; compared as
    :func:`repeated_question` compares, within a patient for AMNESIA): a question in both a forget and a
    retain split would be unlearned and kept at once, and scored as both. Named by both files
    (:func:`split_source`) and rows (from 1)."""
    from medunlearn.errors import FileContentError

    first_row: dict[tuple, int] = {}
    for row, key in enumerate(_question_keys(first["question"], _groups(first)), start=1):
        first_row.setdefault(key, row)
    for row, key in enumerate(_question_keys(second["question"], _groups(second)), start=1):
        if key in first_row:
            why = (
                f"this question is also row {first_row[key]} of {first_source}: a question in both splits "
                "would be forgotten and retained at once (remove it from one of them)"
            )
            raise FileContentError(second_source, row, "question", why, unit="row")


def load_split(data: str | os.PathLike, config: str, split: str = "train"):
    """One split of a benchmark folder or Hub id, with errors that name the folder and the config."""
    if not (Path(data).exists() or "/" in str(data)):
        raise MissingInputError(f"data folder {data} does not exist")
    try:
        return load_config(data, config, split)
    except MedunlearnError:
        raise  # already names the file (check_local_folder)
    except (ValueError, FileNotFoundError) as error:  # datasets names the configs, or the missing data file
        raise InputError(f"{data}: cannot load config {config!r}: {error}") from error
