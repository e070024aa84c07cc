"""The medical vocabulary that gives every note its disease keywords and, when no label is given, its category.

Terms are matched on word boundaries, case-insensitively: text and terms are both reduced to lowercase
alphanumeric words, and a term matches when its word sequence occurs in the text's. Matching is a lookup of
every 1..k-gram of the text in one dictionary (k = longest term), so a note costs O(words · k) whatever the
vocabulary size.

The vocabulary [ours] is our curated terms per category (``data/disease_terms.yaml``) plus short ICD-10-CM
category descriptions and inclusion terms (from the offline ``simple-icd-10-cm`` package), each assigned to
the category of its ICD-10-CM chapter (``ICD_CHAPTER_CATEGORIES``). Curated terms win where the two disagree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import resources

import yaml

from medunlearn.errors import InputError
from medunlearn.ontology.amnesia import DISEASES

_WORD = re.compile(r"[a-z0-9]+")

# ICD-10-CM chapter (or block) -> our category [ours]. Unlisted chapters (eye, ear, skin, symptoms, injuries,
# external causes, health-service factors) give no terms: they say little about a disease category.
ICD_CHAPTER_CATEGORIES: dict[str, str] = {
    "1": "infection_immune",
    "2": "cancer",
    "D80-D89": "infection_immune",  # immune mechanism disorders; the rest of chapter 3 is blood
    "4": "endocrine_metabolic",
    "5": "mental_behavioral",
    "6": "neurological",
    "9": "cardiovascular",
    "10": "respiratory",
    "11": "digestive",
    "13": "musculoskeletal",
    "14": "kidney_urinary",
    "15": "maternal_child",
    "16": "maternal_child",
    "17": "maternal_child",
}
# ICD descriptions holding one of these words are too generic or compound to be a keyword.
_ICD_STOPWORDS = re.compile(
    r"\b(of|and|with|other|due|nos|unspecified|without|in|to|for|by|specified|classified|elsewhere|sequelae|"
    r"personal|history|family|encounter|screening|complications?|disorders?|diseases?|conditions?|abnormal|"
    r"findings?|syndrome|benign|status)\b"
)


def words(text: str) -> list[str]:
    """Lowercase alphanumeric words of ``text``: the unit of word-boundary matching."""
    return _WORD.findall(text.lower())


class DiseaseVocabulary:
    """Disease terms, each with a category; finds terms in texts and classifies texts."""

    def __init__(self, term_categories: Mapping[str, str]):
        self.term_categories: dict[str, str] = {}
        self._by_words: dict[tuple[str, ...], str] = {}
        for term, category in term_categories.items():
            key = tuple(words(term))
            if not key or key in self._by_words:
                continue
            canonical = " ".join(key)
            self._by_words[key] = canonical
            self.term_categories[canonical] = category
        # Lengths of the terms that start with each word: most words start no term and cost one lookup.
        lengths: dict[str, set[int]] = {}
        for key in self._by_words:
            lengths.setdefault(key[0], set()).add(len(key))
        self._lengths_by_first_word = {word: tuple(sorted(n)) for word, n in lengths.items()}

    def __len__(self) -> int:
        return len(self.term_categories)

    def find_terms(self, text: str) -> list[str]:
        """Distinct vocabulary terms in ``text`` (canonical lowercase form), in order of first appearance.

        A term nested in a longer matched term is still reported ("breast cancer" also yields "cancer"), since each
        is a disease word a model could leak.

        >>> vocabulary = DiseaseVocabulary({"breast cancer": "cancer", "cancer": "cancer", "gout": "musculoskeletal"})
        >>> vocabulary.find_terms("Known BREAST-CANCER; no gouty tophi.")
        ['breast cancer', 'cancer']
        """
        tokens = words(text)
        found: dict[str, None] = {}
        by_words, lengths_by_first_word = self._by_words, self._lengths_by_first_word
        for start, token in enumerate(tokens):
            for length in lengths_by_first_word.get(token, ()):
                term = by_words.get(tuple(tokens[start : start + length]))
                if term is not None:
                    found.setdefault(term)
        return list(found)

    def record_keywords(self, titles: Iterable[str], notes: Iterable[str]) -> list[list[str]]:
        """Disease keywords of each patient record [ours]: the terms of its title, then those of its note, each once.
        The title counts because it is part of the record a model is trained on (and it is what the category was
        assigned from, so every classified record has at least one keyword)."""
        return [
            list(dict.fromkeys(self.find_terms(title) + self.find_terms(note)))
            for title, note in zip(titles, notes)
        ]

    def category_scores(self, title: str, note: str, title_weight: float = 3.0) -> dict[str, float]:
        """Score per category: distinct terms in the title count ``title_weight``, in the note 1."""
        scores: dict[str, float] = {}
        for term in self.find_terms(title):
            category = self.term_categories[term]
            scores[category] = scores.get(category, 0.0) + title_weight
        for term in self.find_terms(note):
            category = self.term_categories[term]
            scores[category] = scores.get(category, 0.0) + 1.0
        return scores

    def classify(self, title: str, note: str) -> str | None:
        """The category with the highest score; ties go to the category listed first in ``DISEASES``;
        ``None`` when no term matches (the record is then skipped and counted, never guessed).

        >>> vocabulary = default_vocabulary()
        >>> vocabulary.classify("Acute gout of the toe", "Serum urate was high; no infection was found.")
        'musculoskeletal'
        """
        scores = self.category_scores(title, note)
        if not scores:
            return None
        order = {category: index for index, category in enumerate(DISEASES)}
        return max(scores, key=lambda c: (scores[c], -order.get(c, len(order))))


def _load_yaml(name: str):
    return yaml.safe_load(resources.files("medunlearn.amnesia").joinpath("data").joinpath(name).read_text())


def curated_terms() -> dict[str, str]:
    terms = {}
    for category, category_terms in _load_yaml("disease_terms.yaml").items():
        if category not in DISEASES:
            raise InputError(
                f"disease_terms.yaml: unknown category {category!r}; allowed: {', '.join(DISEASES)}"
            )
        for term in category_terms:
            terms.setdefault(str(term), category)
    return terms


ICD_TERMS_FILE = "icd10cm_terms.tsv"


def derive_icd10cm_terms(chapter_categories: Mapping[str, str] = ICD_CHAPTER_CATEGORIES) -> dict[str, str]:
    """Short ICD-10-CM category descriptions and inclusion terms, mapped to our categories.

    This walks all of ICD-10-CM (seconds), so its result ships as ``data/icd10cm_terms.tsv``; regenerate it with
    ``python -m medunlearn.amnesia.vocabulary`` (a test checks the shipped file is current).
    """
    import simple_icd_10_cm as cm

    terms: dict[str, str] = {}
    for code in cm.get_all_codes(False):
        if not cm.is_category(code):
            continue
        ancestors = cm.get_ancestors(code)
        category = next((chapter_categories[a] for a in ancestors if a in chapter_categories), None)
        if category is None:
            continue
        for description in [cm.get_description(code), *cm.get_inclusion_term(code)]:
            description = re.sub(r"\s*\(.*?\)", "", description).replace(" NOS", "")
            description = re.sub(r"^(unspecified|other|acute|chronic) ", "", description.lower()).strip()
            if "," in description or _ICD_STOPWORDS.search(description):
                continue
            if len(description.split()) <= 3 and len(description) >= 5:
                terms.setdefault(description, category)
    return terms


def condition_terms() -> dict[str, str]:
    """The diagnoses of the fictitious cohort, so every synthetic note has at least one keyword of its category."""
    return {
        condition["diagnosis"]: category
        for category, conditions in _load_yaml("cohort_conditions.yaml").items()
        for condition in conditions
    }


def render_icd_terms_file(terms: Mapping[str, str]) -> str:
    return "term\tcategory\n" + "".join(f"{term}\t{category}\n" for term, category in sorted(terms.items()))


def icd10cm_terms() -> dict[str, str]:
    """The shipped ICD-10-CM derived terms (see :func:`derive_icd10cm_terms`)."""
    text = resources.files("medunlearn.amnesia").joinpath("data").joinpath(ICD_TERMS_FILE).read_text()
    return dict(line.split("\t") for line in text.splitlines()[1:])


@lru_cache(maxsize=1)
def default_vocabulary() -> DiseaseVocabulary:
    merged: dict[str, str] = {}
    merged.update(icd10cm_terms())
    merged.update(condition_terms())
    merged.update(curated_terms())  # curated last: it wins
    return DiseaseVocabulary(merged)


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).parent / "data" / ICD_TERMS_FILE
    target.write_text(render_icd_terms_file(derive_icd10cm_terms()))
    print(f"wrote {target}")
