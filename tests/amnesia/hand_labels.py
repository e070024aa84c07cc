"""The hand labels of real PMC-Patients notes and how the rule-based classifier is scored on them (issue 23).

Three files under ``data/``: ``hand_labels.tsv`` (50 notes, issue 11; the term table was tuned on them),
``hand_labels_v2.tsv`` (160 other notes, labelled before any rule change of issue 23, half of them frozen as
the test set) and ``hand_labels_v3.tsv`` (120 further notes by a second reader, open for tuning). Shared
by ``test_classifier_generalisation.py`` and ``bench/bench_classifier.py``.

Figures [ours] (docs/benchmarks/amnesia.md, "Disease classifier"): *accuracy* = right / classified notes
(a skip is not counted there), *skip rate* = skipped / all notes of the set (a skip of a "none" note is a skip
too); *right / all* counts a skip of a "none" note as right.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).parent / "data"
V1 = DATA / "hand_labels.tsv"
V2 = DATA / "hand_labels_v2.tsv"
V3 = DATA / "hand_labels_v3.tsv"
# A second blind reading of the frozen half (its own header says how it was made).
FROZEN_SECOND_READING = DATA / "hand_labels_v2_second_reading.tsv"
SAMPLE = "pmc-patients-sample/PMC-Patients-sample-600.csv"


@dataclass(frozen=True)
class Label:
    patient_uid: str
    label: str  # one of the 11 categories or "none"
    half: str  # "v1" (the 50 of issue 11), "tune", "frozen" or "tune3" (the second reader's 120)
    principle: str
    basis: str


def read_label_file(path: Path, default_half: str = "v1") -> list[Label]:
    """Rows of a hand-label TSV (``#`` lines are comments; the first other line is the header)."""
    lines = [
        line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")
    ]
    header = lines[0].split("\t")
    labels = []
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t")))
        labels.append(
            Label(
                row["patient_uid"],
                row["label"],
                row.get("half", default_half),
                row.get("principle", ""),
                row["basis"],
            )
        )
    return labels


def all_labels() -> list[Label]:
    return read_label_file(V1) + read_label_file(V2) + read_label_file(V3)


def second_reading() -> dict[str, Label]:
    """The second reader's labels of the frozen half, by ``patient_uid`` (``principle`` holds "sure" or
    "unsure")."""
    lines = [
        line
        for line in FROZEN_SECOND_READING.read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    header = lines[0].split("\t")
    rows = [dict(zip(header, line.split("\t"))) for line in lines[1:]]
    return {
        row["patient_uid"]: Label(row["patient_uid"], row["label"], "frozen", row["sure"], row["basis"])
        for row in rows
    }


@dataclass(frozen=True)
class ReaderAgreement:
    """How far two readers agree on a set of notes, and the classifier on the notes they agree on."""

    notes: int
    agreed: int
    agreed_sure: int  # agreements among the notes the second reader was sure of
    sure: int
    classifier: Figures  # on the agreed notes only

    def line(self, name: str) -> str:
        return (
            f"{name}: the two readers agree on {self.agreed}/{self.notes} ({self.agreed / self.notes:.1%}; "
            f"{self.agreed_sure}/{self.sure} where the second was sure); "
            + self.classifier.line("the classifier on the agreed notes")
        )


def reader_agreement(
    predicted: list[str | None], labels: list[Label], second: dict[str, Label]
) -> ReaderAgreement:
    """:class:`ReaderAgreement` of ``labels`` (first reader, with the classifier's ``predicted`` in the same
    order) and ``second`` (by ``patient_uid``)."""
    agreed = [
        (p, label) for p, label in zip(predicted, labels) if second[label.patient_uid].label == label.label
    ]
    sure = [label for label in labels if second[label.patient_uid].principle == "sure"]
    return ReaderAgreement(
        notes=len(labels),
        agreed=len(agreed),
        agreed_sure=sum(second[label.patient_uid].label == label.label for label in sure),
        sure=len(sure),
        classifier=figures([p for p, _ in agreed], [label for _, label in agreed]),
    )


def read_sample(shared_data: Path) -> dict[str, dict]:
    """The shared sample's rows by ``patient_uid``."""
    csv.field_size_limit(2**31 - 1)
    with (shared_data / SAMPLE).open(newline="", encoding="utf-8") as handle:
        return {row["patient_uid"]: row for row in csv.DictReader(handle)}


@dataclass(frozen=True)
class Figures:
    notes: int
    skipped: int
    right: int  # right among the classified
    skipped_none: int = 0  # skips of notes labelled "none" (eye, ear, skin: no category fits)

    @property
    def classified(self) -> int:
        return self.notes - self.skipped

    @property
    def accuracy(self) -> float:
        return self.right / self.classified if self.classified else 0.0

    @property
    def skip_rate(self) -> float:
        return self.skipped / self.notes if self.notes else 0.0

    def line(self, name: str) -> str:
        return (
            f"{name}: n={self.notes}, right {self.right}/{self.classified} of the classified "
            f"({self.accuracy:.1%}), skipped {self.skipped} ({self.skip_rate:.1%}; "
            f"{self.skipped_none} of them labelled none)"
        )


def figures(predicted: list[str | None], labels: list[Label]) -> Figures:
    """Accuracy and skips of ``predicted`` (``None`` = skipped) against ``labels``, in the same order."""
    skipped = sum(p is None for p in predicted)
    right = sum(p == label.label for p, label in zip(predicted, labels) if p is not None)
    skipped_none = sum(p is None and label.label == "none" for p, label in zip(predicted, labels))
    return Figures(len(labels), skipped, right, skipped_none)


def line_breaks(text: str) -> str:
    """``medunlearn.amnesia.sources.pmc_patients.line_breaks`` (a test checks they agree), without importing
    the amnesia package: the classifier is ontology-level and runs without it."""
    return text.replace("\\n", "\n")


def classify(labels: list[Label], rows: dict[str, dict], vocabulary=None):
    """The rule-based classifier's analyses of the labelled notes (title and note as a reader reads them)."""
    from medunlearn.ontology.vocabulary import default_vocabulary

    vocabulary = vocabulary or default_vocabulary()
    return vocabulary.analyse_records(
        [line_breaks(rows[label.patient_uid]["title"]) for label in labels],
        [line_breaks(rows[label.patient_uid]["patient"]) for label in labels],
    )
