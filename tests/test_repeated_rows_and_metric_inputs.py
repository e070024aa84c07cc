"""A QA row given twice is refused with both rows named; ``model_utility`` refuses an unknown QA type."""

from __future__ import annotations

import json

import pytest

from medunlearn.amnesia.schema import RecordError, validate_qa
from medunlearn.amnesia.sources.pmc_patients import read_qa_file
from medunlearn.metrics.model_utility import model_utility

QA = {"patient_id": "P1", "qa_type": "factual", "question": "What grew in the culture?", "answer": "E. coli"}


def write_qa(tmp_path, rows):
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize(
    "second",
    [
        dict(QA),  # the same line twice
        {**QA, "question": "  what grew in the  CULTURE?"},  # the same question, spaced and cased
        {**QA, "answer": "Klebsiella"},  # the same question with another answer
        {**QA, "qa_type": "reasoning"},
    ],
)
def test_a_question_given_twice_for_one_patient_is_refused_naming_both_rows(tmp_path, second):
    other = {**QA, "patient_id": "P2"}  # the same question about another patient is fine
    table = read_qa_file(write_qa(tmp_path, [QA, other, second]))
    with pytest.raises(RecordError, match=r"qa.jsonl, row 3, field 'question': .*already at row 1") as error:
        validate_qa(table, str(tmp_path / "qa.jsonl"))
    assert error.value.row == 3


def test_distinct_questions_pass(tmp_path):
    rows = [QA, {**QA, "question": "What grew in the blood culture?"}, {**QA, "patient_id": "P2"}]
    validate_qa(read_qa_file(write_qa(tmp_path, rows)), "qa.jsonl")


@pytest.mark.parametrize("qa_types", [["bogus"], ["factual", "Factual"], ["factual", ""], ["all"]])
def test_model_utility_refuses_an_unknown_qa_type(qa_types):
    with pytest.raises(ValueError, match=r"`qa_types`\[\d\] is .*allowed: factual, reasoning"):
        model_utility([0.5] * len(qa_types), qa_types)
