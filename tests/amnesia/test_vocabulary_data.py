"""The vocabulary's data files (src/medunlearn/ontology/data/*.yaml) are read as term -> category by one
helper: an unknown category is named with its file, and a term listed twice keeps its first category."""

from __future__ import annotations

import pytest

from medunlearn.errors import InputError
from medunlearn.ontology import vocabulary


def _with_data(monkeypatch, name: str, value) -> None:
    real = vocabulary._load_yaml
    monkeypatch.setattr(vocabulary, "_load_yaml", lambda asked: value if asked == name else real(asked))


@pytest.mark.parametrize(
    "reader, name, value, where",
    [
        (vocabulary.curated_terms, "disease_terms.yaml", {"gout": ["gout"]}, "disease_terms.yaml"),
        (
            vocabulary.title_cue_terms,
            "title_cues.yaml",
            {"pregnancy": [], "neoplasm": [], "organ": {"gout": ["toe"]}},
            "title_cues.yaml",
        ),
        (vocabulary.organ_roots, "title_cues.yaml", {"organ_roots": {"gout": ["toe"]}}, "organ_roots"),
    ],
)
def test_an_unknown_category_is_named_with_its_file(monkeypatch, reader, name, value, where):
    _with_data(monkeypatch, name, value)
    with pytest.raises(InputError, match=f"{where}.*unknown category 'gout'"):
        reader()


def test_a_term_listed_twice_keeps_its_first_category(monkeypatch):
    _with_data(
        monkeypatch, "title_cues.yaml", {"organ_roots": {"cardiovascular": ["cardi", 7], "cancer": ["cardi"]}}
    )
    assert vocabulary.organ_roots() == {"cardi": "cardiovascular", "7": "cardiovascular"}
    _with_data(monkeypatch, "disease_terms.yaml", {"cancer": ["tumour"], "digestive": ["tumour", "ulcer"]})
    assert vocabulary.curated_terms() == {"tumour": "cancer", "ulcer": "digestive"}
