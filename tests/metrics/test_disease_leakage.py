"""LS against hand computations and against the naive per-keyword regex scan."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medunlearn.metrics.disease_leakage import disease_leakage, leakage_per_example, matched_keywords


def naive_leakage(answer: str, keywords: list[str], question: str | None) -> float:
    """The definition, written the slow obvious way."""
    if not keywords:
        return math.nan
    keywords = list(dict.fromkeys(" ".join(k.lower().split()) for k in keywords))

    def occurs(keyword, text):
        return re.search(r"\b" + re.escape(keyword) + r"\b", text, re.IGNORECASE) is not None

    leaked = [k for k in keywords if occurs(k, answer) and not (question is not None and occurs(k, question))]
    return len(leaked) / len(keywords)


def test_hand_computed_values_and_question_keywords_do_not_count():
    answers = [
        "The patient had Lung Cancer, treated with cisplatin.",  # lung cancer, cancer, cisplatin: 3 of 4
        "Cisplatin was given for the cancer.",  # cancer is in the question: only cisplatin counts, 1 of 4
        "Nothing to report.",
    ]
    keywords = [["lung cancer", "cancer", "cisplatin", "pneumonia"]] * 3
    questions = ["What was found?", "How was the cancer treated?", "Any cancer?"]
    per_example = leakage_per_example(answers, keywords, questions)
    np.testing.assert_allclose(per_example, [3 / 4, 1 / 4, 0.0])
    assert disease_leakage(answers, keywords, questions)["leakage_score"] == pytest.approx(
        (3 / 4 + 1 / 4) / 3
    )


def test_without_questions_every_keyword_in_the_answer_counts():
    assert leakage_per_example(["Cisplatin for the cancer."], [["cancer", "cisplatin"]]).tolist() == [1.0]


def test_word_boundaries_case_and_whitespace():
    assert matched_keywords("carcinomatosis and CARCINOMA", ["carcinoma"]) == {"carcinoma"}
    assert matched_keywords("carcinomatosis", ["carcinoma"]) == set()
    assert matched_keywords("heart failure rate", ["Heart Failure", "failure rate", "rate"]) == {
        "heart failure",
        "failure rate",
        "rate",
    }
    # the longest keyword at a start runs into a word, a shorter one does not
    assert matched_keywords("lung cx", ["lung c", "lung"]) == {"lung"}


def test_empty_keyword_lists_are_left_out_of_the_mean():
    result = disease_leakage(["sepsis", "sepsis"], [["sepsis"], []])
    assert result["leakage_score"] == 1.0 and result["num_scored"] == 1
    assert math.isnan(result["per_example"][1])
    assert disease_leakage(["x"], [[]])["leakage_score"] == 0.0


def test_duplicate_keywords_count_once():
    assert leakage_per_example(["sepsis"], [["Sepsis", "sepsis", "fever"]]).tolist() == [0.5]


WORDS = ["lung", "cancer", "heart", "failure", "rate", "sepsis", "fever", "x", "lungs", "cancerous", "ab"]
text = st.lists(st.sampled_from(WORDS + [",", ".", "-", "  "]), max_size=12).map(" ".join)
keyword = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(answer=text, question=st.one_of(st.none(), text), keywords=st.lists(keyword, max_size=5))
def test_fast_scan_equals_naive_per_keyword_regex(answer, question, keywords):
    expected = naive_leakage(answer, keywords, question)
    got = leakage_per_example([answer], [keywords], None if question is None else [question])[0]
    assert (math.isnan(expected) and math.isnan(got)) or got == pytest.approx(expected)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"predictions": ["a"], "references": [["a"], ["b"]]}, "references"),
        ({"predictions": [], "references": []}, "predictions"),
        ({"predictions": None, "references": [["a"]]}, "predictions"),
        ({"predictions": ["a"], "references": None}, "references"),
        ({"predictions": ["a"], "references": [None]}, "references"),
        ({"predictions": ["a"], "references": ["a"]}, "references"),
        ({"predictions": [float("nan")], "references": [["a"]]}, "predictions"),
        ({"predictions": ["a"], "references": [["a"]], "questions": ["q", "r"]}, "questions"),
        ({"predictions": ["a"], "references": [["a"]], "questions": [None]}, "questions"),
    ],
)
def test_bad_input_names_the_argument(kwargs, named):
    with pytest.raises(ValueError, match=f"`{named}`"):
        disease_leakage(**kwargs)


def test_bad_keyword_rows_are_named_by_index():
    with pytest.raises(ValueError, match=r"`references`\[1\] is None"):
        leakage_per_example(["a", "b"], [["a"], None])
    with pytest.raises(ValueError, match=r"`references`\[1\] holds a non-string"):
        leakage_per_example(["a", "b"], [["a"], ["b", 3]])
    with pytest.raises(ValueError, match=r"`references`\[0\] must be a list"):
        leakage_per_example(["a"], ["sepsis"])
