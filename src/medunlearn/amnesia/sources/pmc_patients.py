"""Real notes: PMC-Patients in its own schema (CSV, JSON or JSONL), joined with a QA file (JSONL).

PMC-Patients columns used: ``patient_uid`` (falls back to ``patient_id``) as the patient id, ``title``,
``patient`` (the note), ``age`` (a Python literal like ``[[60.0, 'year']]``), ``gender``. A ``disease``
column, when present, gives the category; otherwise the rule-based classifier of
:mod:`medunlearn.ontology.vocabulary` assigns one, and notes it cannot classify are skipped and counted (never
guessed).

QA file: one JSON object per line with ``patient_id, qa_type, question, answer`` and optionally ``qa_id``.
In either file a text field holds a string (an id may be a whole number too): a list or a number is a named
error (:func:`~medunlearn.amnesia.schema.text_values`), never stored as its Python text.
"""

from __future__ import annotations

import ast
import csv
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from medunlearn.amnesia.schema import (
    NOTES_SCHEMA,
    QA_SCHEMA,
    RecordError,
    check_allowed,
    check_required_text,
    check_unique,
    text_values,
)
from medunlearn.ontology.amnesia import DISEASES
from medunlearn.ontology.vocabulary import DiseaseVocabulary, RecordAnalysis, default_vocabulary
from medunlearn.utils.text_limits import MAX_NOTE_CHARACTERS
from medunlearn.utils.user_files import (
    check_column_spelling,
    csv_dict_reader,
    existing_file,
    json_type_name,
    read_json,
    read_jsonl,
)

# The columns a notes file (PMC-Patients' own names, or ours) and a QA file are read by.
NOTE_COLUMNS = ("patient_uid", "patient_id", "title", "patient", "note", "age", "gender")
QA_FIELDS = ("patient_id", "qa_type", "question", "answer", "qa_id")
UNCLASSIFIED = "no disease category could be assigned from title and note"
# How the build report and the card define the rule-based classifier's confidence [ours].
CONFIDENCE_DEFINITION = "the winning category's share of the classifier's scores [ours]"
LOW_CONFIDENCE = 0.5


def read_records(path: str | Path, known: Iterable[str] = ()) -> list[dict]:
    """Rows of a CSV, JSON (a list of objects, or ``{id: object}``) or JSONL file, as dicts of strings/values.

    The file is read by :mod:`medunlearn.utils.user_files`: UTF-8 (or byte-order-marked UTF-16/32) or a
    named error, parse errors located by line and column, every row an object; a column (or the first row's
    key) that is one of the ``known`` names but for case or spaces is refused (``check_column_spelling``).
    """
    path = existing_file(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        csv.field_size_limit(2**31 - 1)  # PMC-Patients notes exceed csv's default field limit
        rows = list(csv_dict_reader(path, known))
        for number, row in enumerate(rows, start=1):
            if None in row:  # csv's key for the fields beyond the header's
                raise RecordError(str(path), number, None, "more fields than the header names")
        return rows
    if suffix == ".jsonl":
        numbered = list(read_jsonl(path))
        if numbered:
            check_column_spelling(numbered[0][1], known, str(path), numbered[0][0])
        return [row for _, row in numbered]
    if suffix == ".json":
        data = read_json(path, expect=(list, dict), what="a notes or QA .json file")
        if isinstance(data, dict):  # {id: record} is a common dump shape
            data = [_keyed_record(path, key, value) for key, value in data.items()]
        for number, row in enumerate(data, start=1):
            if not isinstance(row, dict):
                raise RecordError(
                    str(path), number, None, f"expected a JSON object, got {json_type_name(row)}"
                )
        if data:
            check_column_spelling(data[0], known, str(path), None)
        return data
    raise RecordError(str(path), None, None, f"unsupported file type {suffix!r}; use .csv, .json or .jsonl")


def _keyed_record(path: Path, key: str, value) -> dict:
    if not isinstance(value, dict):
        raise RecordError(str(path), None, key, f"expected a JSON object, got {json_type_name(value)}")
    return {"patient_id": key, **value}


def line_breaks(text: str) -> str:
    r"""Most notes of the PMC-Patients CSV release mark paragraph breaks with the two characters ``\n`` (a
    backslash and an n); they are read as line breaks, where the classifier's sentences end.

    >>> line_breaks("Fever.\\nOn day 2, cough.")
    'Fever.\nOn day 2, cough.'
    """
    return text.replace("\\n", "\n")


def parse_age_years(value) -> int | None:
    """PMC-Patients ages: ``"[[60.0, 'year']]"`` → 60; months/weeks/days → 0; anything unparseable → None.

    >>> parse_age_years("[[60.0, 'year']]"), parse_age_years("[[8.0, 'month']]"), parse_age_years("")
    (60, 0, None)
    """
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    try:
        parsed = ast.literal_eval(str(value))
    except (ValueError, SyntaxError):
        return None
    if isinstance(parsed, list) and parsed and isinstance(parsed[0], (list, tuple)) and len(parsed[0]) == 2:
        amount, unit = parsed[0]
        return int(amount) if str(unit).startswith("year") else 0
    return None


@dataclass(frozen=True)
class NoteRecords:
    """A PMC-Patients file's rows with its identity, title and note columns validated column-wise."""

    source: str
    rows: list[dict]
    columns: set[str]
    table: pa.Table  # patient_id, title, note (literal ``\\n`` read as line breaks)

    def ages(self) -> list[int | None]:
        return [parse_age_years(r.get("age")) for r in self.rows]

    def sexes(self) -> list[str | None]:
        return [{"M": "male", "F": "female"}.get(str(r.get("gender", "")).upper()) for r in self.rows]


def read_note_records(path: str | Path) -> NoteRecords:
    """Rows of a PMC-Patients file (CSV, JSON or JSONL) whose id, title and note are present, non-empty and
    unique; a bad record fails naming the file, row and field."""
    source = str(path)
    rows = read_records(path, NOTE_COLUMNS)
    if not rows:
        raise RecordError(source, None, None, "no records")
    columns = set(rows[0])
    id_column = "patient_uid" if "patient_uid" in columns else "patient_id"
    note_column = "patient" if "patient" in columns else "note"
    for required in (id_column, "title", note_column):
        if required not in columns:
            raise RecordError(source, None, required, f"missing column (found: {', '.join(sorted(columns))})")
    raw = pa.table(
        {
            "patient_id": text_values(rows, id_column, source, ids=True),
            "title": [line_breaks(title) for title in text_values(rows, "title", source)],
            "note": [
                line_breaks(note)
                for note in text_values(rows, note_column, source, limit=MAX_NOTE_CHARACTERS)
            ],
        }
    )
    check_required_text(raw, ["patient_id", "title"], source)
    try:
        check_required_text(raw, ["note"], source)
    except RecordError as error:
        raise RecordError(source, error.row, note_column, error.problem) from None
    check_unique(raw, "patient_id", source)
    return NoteRecords(source, rows, columns, raw)


def note_titles(path: str | Path) -> dict[str, str]:
    """Every note's title by patient id (skipped notes included), as the classifier read it."""
    table = read_note_records(path).table
    return dict(zip(table["patient_id"].to_pylist(), table["title"].to_pylist()))


def read_pmc_patients(
    path: str | Path, vocabulary: DiseaseVocabulary | None = None
) -> tuple[pa.Table, list[str]]:
    """Notes table (``NOTES_SCHEMA``) and the ids of patients skipped because no category could be
    assigned."""
    table, skipped, _ = read_pmc_patients_with_analyses(path, vocabulary)
    return table, skipped


def read_pmc_patients_with_analyses(
    path: str | Path, vocabulary: DiseaseVocabulary | None = None
) -> tuple[pa.Table, list[str], dict[str, RecordAnalysis] | None]:
    """What :func:`read_pmc_patients` returns, plus the rule-based classifier's analysis of every note by
    patient id (skipped ones included); ``None`` when the file has a ``disease`` column (no classifier
    ran)."""
    records = read_note_records(path)
    source, rows, columns, raw = records.source, records.rows, records.columns, records.table
    vocabulary = vocabulary or default_vocabulary()
    titles, notes = raw["title"].to_pylist(), raw["note"].to_pylist()
    if "disease" in columns:
        diseases = text_values(rows, "disease", source)
        check_allowed(pa.table({"disease": diseases}), "disease", DISEASES, source)
        analyses = None
    else:
        analyses = vocabulary.analyse_records(titles, notes)  # one batched pass: categories and keywords
        diseases = [analysis.category for analysis in analyses]
    keep = [d is not None for d in diseases]
    skipped = [pid for pid, k in zip(raw["patient_id"].to_pylist(), keep) if not k]
    kept_notes = [n for n, k in zip(notes, keep) if k]
    table = pa.table(
        {
            "patient_id": [p for p, k in zip(raw["patient_id"].to_pylist(), keep) if k],
            "title": [t for t, k in zip(titles, keep) if k],
            "note": kept_notes,
            "disease": [d for d in diseases if d is not None],
            "disease_keywords": (
                vocabulary.record_keywords([t for t, k in zip(titles, keep) if k], kept_notes)
                if analyses is None
                else [analysis.keywords for analysis in analyses if analysis.category is not None]
            ),
            "age": [age for age, k in zip(records.ages(), keep) if k],
            "sex": [sex for sex, k in zip(records.sexes(), keep) if k],
        },
        schema=NOTES_SCHEMA,
    )
    by_patient = None if analyses is None else dict(zip(raw["patient_id"].to_pylist(), analyses))
    return table, skipped, by_patient


def classifier_summary(analyses: Iterable[RecordAnalysis]) -> dict:
    """Summary of rule-based classifications [ours]: classified notes by deciding rule, their confidence
    (mean, median, min), how many fall below ``LOW_CONFIDENCE``, and how many were skipped (no affirmed
    term). Rounded to 4 decimals with sorted keys, so it is deterministic.

    >>> from medunlearn.ontology.vocabulary import RecordAnalysis as A
    >>> summary = classifier_summary([A("cancer", 1.0, "title", {}, []), A("cancer", 0.25, "note", {}, []),
    ...                               A(None, 0.0, "no affirmed term", {}, [])])
    >>> summary["by_rule"], summary["confidence"], summary["skipped_no_affirmed_term"]
    ({'note': 1, 'title': 1}, {'mean': 0.625, 'median': 0.625, 'min': 0.25}, 1)
    >>> summary["low_confidence"]
    {'threshold': 0.5, 'count': 1, 'share': 0.5}
    """
    analyses = list(analyses)
    classified = [a for a in analyses if a.category is not None]
    confidences = [float(a.confidence) for a in classified]
    by_rule: dict[str, int] = {}
    for analysis in classified:
        by_rule[analysis.rule] = by_rule.get(analysis.rule, 0) + 1
    low = sum(c < LOW_CONFIDENCE for c in confidences)

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    return {
        "notes": len(classified),
        "by_rule": dict(sorted(by_rule.items())),
        "confidence": {
            "mean": rounded(statistics.fmean(confidences) if confidences else None),
            "median": rounded(statistics.median(confidences) if confidences else None),
            "min": rounded(min(confidences) if confidences else None),
        },
        "low_confidence": {
            "threshold": LOW_CONFIDENCE,
            "count": low,
            "share": rounded(low / len(confidences) if confidences else None),
        },
        "skipped_no_affirmed_term": len(analyses) - len(classified),
    }


def classifier_report(
    analyses: Mapping[str, RecordAnalysis], kept: Iterable[str], second_opinion: dict | None = None
) -> dict:
    """The ``classifier`` section of ``amnesia_build.json`` [ours]: per kept patient its ``category``,
    ``confidence`` and deciding ``rule`` (the principle that decided), and :func:`classifier_summary` over
    those kept notes (the skipped count is of every note without an affirmed term); with ``second_opinion``
    (:mod:`medunlearn.amnesia.second_opinion`) the embedding's opinion beside the rule's."""
    kept_ids = sorted(set(kept))
    patients = {
        pid: {
            "category": analyses[pid].category,
            "confidence": round(float(analyses[pid].confidence), 4),
            "rule": analyses[pid].rule,
        }
        for pid in kept_ids
    }
    summary = classifier_summary([analyses[pid] for pid in kept_ids])
    summary["skipped_no_affirmed_term"] = sum(a.category is None for a in analyses.values())
    report = {"confidence_definition": CONFIDENCE_DEFINITION, "patients": patients, "summary": summary}
    if second_opinion is not None:
        report["second_opinion"] = second_opinion
    return report


def read_qa_file(path: str | Path) -> pa.Table:
    """QA table (``QA_SCHEMA``; ``disease`` left empty until joined with the notes)."""
    source = str(path)
    rows = read_records(path, QA_FIELDS)
    if not rows:
        raise RecordError(source, None, None, "no records")
    for index, row in enumerate(rows, start=1):
        for required in ("patient_id", "qa_type", "question", "answer"):
            if required not in row:
                raise RecordError(source, index, required, "missing field")
    patient_ids = text_values(rows, "patient_id", source, ids=True)
    qa_types = text_values(rows, "qa_type", source)
    # Without given ids, number each patient's QA by type in file order: P-F1..F4, P-R1..R4.
    counters: dict[tuple[str, str], int] = {}
    qa_ids = []
    for given, patient_id, qa_type in zip(
        text_values(rows, "qa_id", source, ids=True), patient_ids, qa_types
    ):
        if given:
            qa_ids.append(given)
            continue
        counters[patient_id, qa_type] = counters.get((patient_id, qa_type), 0) + 1
        qa_ids.append(f"{patient_id}-{qa_type[:1].upper()}{counters[patient_id, qa_type]}")
    table = pa.table(
        {
            "qa_id": qa_ids,
            "patient_id": patient_ids,
            "disease": [""] * len(rows),
            "qa_type": qa_types,
            "question": text_values(rows, "question", source),
            "answer": text_values(rows, "answer", source),
        },
        schema=QA_SCHEMA,
    )
    return table
