"""MUSE-format benchmarks: the Hub layout of ``muse-bench/MUSE-News`` and ``muse-bench/MUSE-Books``, read from
a local copy.

Layout [ref: the data cards of ``muse-bench/MUSE-News`` and ``muse-bench/MUSE-Books`` at ``main``]: one folder
per config, one data file per split (``knowmem/forget_qa-00000-of-00001.parquet`` on the Hub), declared in the
README's YAML ``configs:`` block (``data_files: [{split, path}]``):

==========  ==========================================================  ======================
config      splits                                                      fields
==========  ==========================================================  ======================
raw         forget, retain1, retain2, holdout                           text
verbmem     forget                                                      prompt, gt
knowmem     forget_qa, forget_qa_icl, retain_qa, retain_qa_icl          question, answer
privleak    forget, retain, holdout                                     text
scal        forget_1, forget_2, forget_3, forget_4 (News only)          text
sust        forget_1, forget_2, forget_3, forget_4 (News only)          text
train       forget, retain1, retain2 (optional here)                    text
==========  ==========================================================  ======================

MUSE-Books has no ``scal`` / ``sust`` (its card: "5 subsets: raw, verbmem, knowmem, privleak, and train"), so
those two configs are optional; when present, all four folds are required.

**Revision.** The layout above is the one OpenUnlearning's MUSE configs read at commit d3d7cf9
(``open-unlearning@d3d7cf9 configs/data/datasets/MUSE_retain_knowmem.yaml:7`` names ``retain_qa``,
``:11`` ``retain_qa_icl``). Older Hub revisions name them ``retain2_qa`` / ``retain2_qa_icl`` and the privleak
split ``retain2`` (MUSE-Books at revision ``63a49b0``). Download a revision whose card lists ``retain_qa``
(``huggingface-cli download muse-bench/MUSE-News --repo-type dataset --revision <sha> --local-dir X``) and
record that sha with your results; :func:`detect_layout` refuses an older layout or an unknown one with a
:class:`MuseLayoutError` rather than guess (docs/muse.md, "Data").

Reading is ours: each split's data files (parquet, or JSON lines for ``.json`` / ``.jsonl``) are read row by
row, so an error names the file, the 1-based row and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from medunlearn.config_names import MUSE_FOLDS
from medunlearn.data_loading import repeated_question
from medunlearn.errors import MedunlearnError, MissingInputError
from medunlearn.utils.user_files import (
    card_data_files,
    existing_folder,
    parse_json,
    read_parquet,
    text_lines,
)

TEXT = ("text",)
QA = ("question", "answer")
FOLDS = MUSE_FOLDS

# config -> split -> the fields every row needs.
REQUIRED_LAYOUT: dict[str, dict[str, tuple[str, ...]]] = {
    "raw": {"forget": TEXT, "retain1": TEXT, "retain2": TEXT, "holdout": TEXT},
    "verbmem": {"forget": ("prompt", "gt")},
    "knowmem": {"forget_qa": QA, "forget_qa_icl": QA, "retain_qa": QA, "retain_qa_icl": QA},
    "privleak": {"forget": TEXT, "retain": TEXT, "holdout": TEXT},
}
OPTIONAL_LAYOUT: dict[str, dict[str, tuple[str, ...]]] = {
    "scal": dict.fromkeys(FOLDS, TEXT),
    "sust": dict.fromkeys(FOLDS, TEXT),
    "train": {"forget": TEXT, "retain1": TEXT, "retain2": TEXT},
}
LAYOUT = {**REQUIRED_LAYOUT, **OPTIONAL_LAYOUT}
# Fields whose empty value leaves a metric undefined (an empty ROUGE reference, an empty prompt).
NON_EMPTY_FIELDS = frozenset({"prompt", "gt", "question", "answer"})
# The knowmem retain split names of older Hub revisions (MUSE-Books 63a49b0, MUSE-News 3a51693).
OLD_REVISION_SPLITS = ("retain2_qa", "retain2_qa_icl")
DATA_SUFFIXES = (".parquet", ".jsonl", ".json")


class MuseFormatError(MedunlearnError, ValueError):
    """A MUSE-format folder, file or row that cannot be used (the message names folder, file, row, field)."""


class MuseLayoutError(MuseFormatError):
    """A folder whose configs and splits are not the pinned MUSE layout (an older revision, or unknown)."""


class MuseMissingSplitError(MuseFormatError):
    """A config or split the MUSE layout requires is not in the folder."""


class MuseRowError(MuseFormatError):
    """A row lacks a field, or holds a value of the wrong kind."""


@dataclass(frozen=True)
class MuseFolder:
    """A local MUSE-format folder and its data files: ``files[config][split]`` lists the split's files."""

    root: Path
    files: dict[str, dict[str, tuple[Path, ...]]]

    def splits(self, config: str) -> tuple[str, ...]:
        return tuple(self.files.get(config, {}))


def _declared_data_files(root: Path) -> dict[str, dict[str, tuple[Path, ...]]] | None:
    """The README's ``configs:`` block as config -> split -> files (globs resolved); None without one. The
    shared card reader names a path leading out of the folder or a key given twice; a glob that reaches a link
    leading out is refused too."""
    declared = {}
    for config, splits in card_data_files(root).items():
        declared[config] = {
            split: tuple(sorted(path for pattern in patterns for path in _inside(root, pattern)))
            for split, patterns in splits.items()
        }
    return declared or None


def _inside(root: Path, pattern: str) -> list[Path]:
    paths = list(root.glob(pattern))
    for path in paths:
        if root.resolve() not in path.resolve().parents:
            raise MuseFormatError(f"{root / 'README.md'}: data file {path} is a link leading out of {root}")
    return paths


def _scanned_data_files(root: Path) -> dict[str, dict[str, tuple[Path, ...]]]:
    """Without a README ``configs:`` block: ``<config>/<split>[-NNNNN-of-NNNNN].<suffix>`` files."""
    found: dict[str, dict[str, list[Path]]] = {}
    for path in sorted(root.glob("*/*")):
        if path.suffix in DATA_SUFFIXES and path.is_file():
            split = path.name[: -len(path.suffix)].split("-")[0]
            found.setdefault(path.parent.name, {}).setdefault(split, []).append(path)
    return {config: {s: tuple(p) for s, p in splits.items()} for config, splits in found.items()}


def open_muse_folder(folder: str | Path) -> MuseFolder:
    """The configs, splits and data files of a local MUSE-format folder, checked against the pinned layout."""
    root = Path(folder)
    if not root.exists():
        raise MissingInputError(
            f"MUSE folder {folder} does not exist (download a copy: docs/muse.md, 'Data')"
        )
    root = existing_folder(root, "MUSE folder")  # a file is named as one, not as missing
    files = _declared_data_files(root) or _scanned_data_files(root)
    muse = MuseFolder(root, files)
    detect_layout(muse)
    return muse


def detect_layout(muse: MuseFolder) -> str:
    """``"current"`` when the folder has the pinned layout; otherwise a named error.

    The knowmem split names tell the revision: ``retain_qa`` / ``retain_qa_icl`` (current), ``retain2_qa`` /
    ``retain2_qa_icl`` (an older revision: :class:`MuseLayoutError`), anything else (unknown: the same
    error). Then every required config and split must be there (:class:`MuseMissingSplitError`), each with
    at least one data file.
    """
    knowmem = set(muse.splits("knowmem"))
    if not knowmem:
        raise MuseMissingSplitError(f"MUSE folder {muse.root}: no config 'knowmem' (has: {_listing(muse)})")
    if set(OLD_REVISION_SPLITS) <= knowmem:
        raise MuseLayoutError(
            f"MUSE folder {muse.root}: knowmem has splits {', '.join(OLD_REVISION_SPLITS)}, the layout of an "
            "older Hub revision; download a revision whose knowmem splits are retain_qa / retain_qa_icl, "
            "the ones OpenUnlearning's configs read (docs/muse.md, 'Data')"
        )
    if not {"retain_qa", "retain_qa_icl"} <= knowmem:
        raise MuseLayoutError(
            f"MUSE folder {muse.root}: unknown layout, knowmem splits are {sorted(knowmem)}; expected "
            f"{sorted(REQUIRED_LAYOUT['knowmem'])} (docs/muse.md, 'Data')"
        )
    for config, splits in LAYOUT.items():
        present = muse.splits(config)
        if config in OPTIONAL_LAYOUT and not present:
            continue
        for split in splits:
            if split not in present:
                raise MuseMissingSplitError(
                    f"MUSE folder {muse.root}: config {config!r} lacks split {split!r} "
                    f"(has: {', '.join(present) or 'none'})"
                )
            if not muse.files[config][split]:
                raise MuseMissingSplitError(
                    f"MUSE folder {muse.root}: split {config}/{split} is declared but has no data file"
                )
    return "current"


def _listing(muse: MuseFolder) -> str:
    return ", ".join(f"{c}/{s}" for c, splits in muse.files.items() for s in splits) or "nothing"


def _read_rows(path: Path) -> list:
    """A data file's rows, through the shared reader: a file that is not UTF-8, a line that is not JSON (or
    holds a NaN) or a damaged parquet file is named with its line."""
    if path.suffix == ".parquet":
        return read_parquet(path).to_pylist()
    rows = []
    for number, line in enumerate(text_lines(path), start=1):
        if line.strip():
            rows.append(parse_json(line.rstrip("\r\n"), str(path), number))
    return rows


def check_row(row, fields: tuple[str, ...], where: str) -> dict:
    """``row`` restricted to ``fields``, or a :class:`MuseRowError` naming ``where`` and the field.

    >>> check_row({"prompt": "The", "gt": "cat", "id": 1}, ("prompt", "gt"), "verbmem/forget row 1")
    {'prompt': 'The', 'gt': 'cat'}
    """
    if not isinstance(row, dict):
        raise MuseRowError(f"{where}: a row must be an object with fields {', '.join(fields)}")
    for field in fields:
        value = row.get(field)
        if value is None:
            raise MuseRowError(f"{where}: field {field!r} is missing")
        if not isinstance(value, str):
            raise MuseRowError(f"{where}: field {field!r} must be a string, got {type(value).__name__}")
        if field in NON_EMPTY_FIELDS and not value.strip():
            raise MuseRowError(f"{where}: field {field!r} is empty")
    return {field: row[field] for field in fields}


def load_muse_split(folder: str | Path | MuseFolder, config: str, split: str) -> list[dict]:
    """The rows of one split (only the layout's fields), checked row by row; a folder or an opened one."""
    muse = folder if isinstance(folder, MuseFolder) else open_muse_folder(folder)
    if config not in LAYOUT or split not in LAYOUT[config]:
        known = ", ".join(f"{c}/{s}" for c, splits in LAYOUT.items() for s in splits)
        raise MuseFormatError(f"unknown MUSE split {config}/{split}; known: {known}")
    if split not in muse.splits(config):
        raise MuseMissingSplitError(f"MUSE folder {muse.root}: config {config!r} lacks split {split!r}")
    rows, origins = [], []
    for path in muse.files[config][split]:
        for number, row in enumerate(_read_rows(path), start=1):
            rows.append(check_row(row, LAYOUT[config][split], f"{path} ({config}/{split}) row {number}"))
            origins.append((path, number))
    if not rows:
        files = ", ".join(str(path) for path in muse.files[config][split])
        raise MuseFormatError(
            f"{files} ({config}/{split}): the split holds no row; every split of the layout needs at least "
            "one (an empty split would leave its score undefined, or score nothing as if it were a result)"
        )
    if LAYOUT[config][split] == QA:
        _check_no_repeated_question(rows, origins, f"{config}/{split}")
    return rows


def _check_no_repeated_question(rows: list[dict], origins: list[tuple[Path, int]], split: str) -> None:
    """No question of a knowmem split is asked twice (`medunlearn.data_loading.repeated_question`, the rule
    of an AMNESIA or TOFU split): a QA row given twice weighs double in the score. Named by file, row and
    field, with where it was first asked."""
    repeat = repeated_question(row["question"] for row in rows)
    if repeat is not None:
        (path, row), (first_path, first) = origins[repeat[0] - 1], origins[repeat[1] - 1]
        where = f"row {first}" if first_path == path else f"{first_path} row {first}"
        raise MuseRowError(
            f"{path} ({split}) row {row}, field 'question': this question is asked already at {where}: a QA "
            "row given twice (remove one of the two rows)"
        )


__all__ = [
    "FOLDS",
    "LAYOUT",
    "OPTIONAL_LAYOUT",
    "REQUIRED_LAYOUT",
    "MuseFolder",
    "MuseFormatError",
    "MuseLayoutError",
    "MuseMissingSplitError",
    "MuseRowError",
    "check_row",
    "detect_layout",
    "load_muse_split",
    "open_muse_folder",
]
