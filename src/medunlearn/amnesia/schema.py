"""Typed records of AMNESIA and their validation.

A patient has one note and one disease category; each patient has QA pairs of two types. Records are validated
column-wise (so a full-size cohort validates in milliseconds) and every error names the file, row and field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from medunlearn.data_loading import repeated_question
from medunlearn.errors import FileContentError
from medunlearn.ontology.amnesia import DISEASES, QA_TYPES
from medunlearn.utils.text_limits import MAX_TEXT_CHARACTERS, text_problem
from medunlearn.utils.user_files import json_type_name

NOTES_SCHEMA = pa.schema(
    [
        ("patient_id", pa.string()),
        ("title", pa.string()),
        ("note", pa.string()),
        ("disease", pa.string()),
        ("disease_keywords", pa.list_(pa.string())),
        ("age", pa.int32()),
        ("sex", pa.string()),
    ]
)
QA_SCHEMA = pa.schema(
    [
        ("qa_id", pa.string()),
        ("patient_id", pa.string()),
        ("disease", pa.string()),
        ("qa_type", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
    ]
)


class RecordError(FileContentError):
    """A record is invalid. The message names the source file, the row (1-based) and the field."""

    def __init__(self, source: str, row: int | None, field_name: str | None, problem: str):
        super().__init__(source, row, field_name, problem, unit="row")
        self.row = row


@dataclass(frozen=True)
class Patient:
    """One de-identified patient: a note and its disease category."""

    patient_id: str
    title: str
    note: str
    disease: str
    disease_keywords: list[str] = field(default_factory=list)
    age: int | None = None
    sex: str | None = None


@dataclass(frozen=True)
class QAPair:
    """One question about one patient, answerable only from that patient's note."""

    qa_id: str
    patient_id: str
    disease: str
    qa_type: str
    question: str
    answer: str


def patients_to_table(patients: Sequence[Patient]) -> pa.Table:
    return pa.Table.from_pylist([p.__dict__ for p in patients], schema=NOTES_SCHEMA)


def qa_to_table(qa: Sequence[QAPair]) -> pa.Table:
    return pa.Table.from_pylist([q.__dict__ for q in qa], schema=QA_SCHEMA)


def _first_bad_row(mask) -> int:
    """1-based row of the first True in a boolean numpy mask."""
    return int(mask.nonzero()[0][0]) + 1


def text_values(
    rows: Sequence[Mapping], key: str, source: str, *, ids: bool = False, limit: int = MAX_TEXT_CHARACTERS
) -> list[str]:
    """Field ``key`` of every row (read from a CSV, JSON or JSON Lines file) as text: missing or null is
    ``""`` (:func:`check_required_text` names an empty required value). Anything but a string is a named
    error, as ``str()`` would store a list as the text ``"['a', 'b']"`` and an answer ``42`` as ``"42"``; with
    ``ids``, a whole number is text too (PMC-Patients' JSON numbers its patients). A value longer than
    ``limit`` characters, or holding a NUL character (JSON's ``\u0000``: no text of a note or a QA, and
    the end of a string to C code a tokenizer or parquet reader may hand it to), is a named error too.

    >>> text_values([{"answer": "Yes."}, {"answer": ["a", "b"]}], "answer", "qa.jsonl")
    Traceback (most recent call last):
    ...
    medunlearn.amnesia.schema.RecordError: qa.jsonl, row 2, field 'answer': expected text, got a list
    """
    values = []
    for row, record in enumerate(rows, start=1):
        value = record.get(key)
        whole = ids and isinstance(value, int) and not isinstance(value, bool)
        if value is not None and not isinstance(value, str) and not whole:
            expected = "text or a whole number" if ids else "text"
            raise RecordError(source, row, key, f"expected {expected}, got {json_type_name(value)}")
        text = "" if value is None else str(value)
        problem = text_problem(text, limit=limit)
        if problem:
            raise RecordError(source, row, key, problem)
        values.append(text)
    return values


def check_required_text(table: pa.Table, columns: Sequence[str], source: str) -> None:
    """Every column exists and holds a non-empty string in every row."""
    import pyarrow.compute as pc

    for column in columns:
        if column not in table.column_names:
            raise RecordError(
                source, None, column, f"missing column (found: {', '.join(table.column_names)})"
            )
        values = table[column]
        empty = pc.or_kleene(
            pc.is_null(values), pc.equal(pc.utf8_trim_whitespace(values.cast(pa.string())), "")
        )
        empty = empty.to_numpy(zero_copy_only=False)
        if empty.any():
            raise RecordError(source, _first_bad_row(empty), column, "empty value")


def check_unique(table: pa.Table, column: str, source: str) -> None:
    import numpy as np

    values = np.asarray(table[column].to_pylist(), dtype=object)
    _, first_index, counts = np.unique(values, return_index=True, return_counts=True)
    if (counts > 1).any():
        duplicated_value = values[first_index[counts > 1][0]]
        rows = (values == duplicated_value).nonzero()[0][:2] + 1
        raise RecordError(
            source, int(rows[1]), column, f"duplicate value {duplicated_value!r} (first at row {rows[0]})"
        )


def check_no_repeated_question(table: pa.Table, source: str) -> None:
    """No patient is asked the same question twice (compared without case and extra spaces): a QA row given
    twice would be trained on twice, or land in both the seen and the held-out split. Names both rows."""
    patients = table["patient_id"].to_pylist()
    repeat = repeated_question(table["question"].to_pylist(), patients)
    if repeat is not None:
        row, first = repeat
        raise RecordError(
            source,
            row,
            "question",
            f"patient {patients[row - 1]!r} is asked this question already at row {first}: a QA row given "
            "twice (remove one of the two rows)",
        )


def check_allowed(table: pa.Table, column: str, allowed: Sequence[str], source: str) -> None:
    import numpy as np

    values = np.asarray(table[column].to_pylist(), dtype=object)
    bad = ~np.isin(values, np.asarray(list(allowed), dtype=object))
    if bad.any():
        row = _first_bad_row(bad)
        value = values[row - 1]
        meant = [name for name in allowed if str(value).strip().lower() == name.lower()]
        hint = f" (values are case-sensitive: {meant[0]!r}?)" if meant else ""
        raise RecordError(
            source, row, column, f"unknown value {value!r}; allowed: {', '.join(allowed)}{hint}"
        )


def validate_notes(table: pa.Table, source: str = "notes", diseases: Sequence[str] = DISEASES) -> None:
    """Raise :class:`RecordError` unless ``table`` is a valid notes table."""
    check_required_text(table, ["patient_id", "title", "note", "disease"], source)
    check_unique(table, "patient_id", source)
    check_allowed(table, "disease", diseases, source)


def validate_qa(table: pa.Table, source: str = "qa") -> None:
    """Raise :class:`RecordError` unless ``table`` is a valid QA table."""
    check_required_text(table, ["qa_id", "patient_id", "qa_type", "question", "answer"], source)
    # qa_type first: a qa_id left out is derived from it (P-R1), so a wrong qa_type ('Reasoning') showed as a
    # qa_id given twice, a field the user never wrote.
    check_allowed(table, "qa_type", QA_TYPES, source)
    check_unique(table, "qa_id", source)
    check_no_repeated_question(table, source)
