"""The medical vocabulary that gives every note its disease keywords and, when no label is given, its
category.

Terms are matched on word boundaries, case-insensitively: text and terms are both reduced to lowercase
alphanumeric words, and a term matches when its word sequence occurs in the text's. Matching is a lookup of
every 1..k-gram of the text in one dictionary (k = longest term), so a note costs O(words · k) whatever the
vocabulary size.

The vocabulary [ours] is our curated terms per category (``data/disease_terms.yaml``) plus short ICD-10-CM
category descriptions and inclusion terms (from the offline ``simple-icd-10-cm`` package), each assigned to
the category of its ICD-10-CM chapter (``ICD_CHAPTER_CATEGORIES``). Curated terms win where the two disagree.
Phrases in which a term has another sense (``data/wrong_sense_terms.yaml``: "depression of consciousness",
"ST depression") hide the terms inside them.

The classifier and the disease keywords [ours] count only affirmed mentions: negated and ruled-out ones
("no dental infection", "negative for hepatitis B", "the differential diagnosis included IgA nephropathy")
are found by NegEx (Chapman et al. 2001) as implemented by negspacy, with its ``en_clinical`` termset and
our additions (``data/negation_terms.yaml``), over sentences from spaCy's blank English pipeline; see
:func:`negation_pipeline`. The title comes first, ties are broken by the title, and each classification
reports a confidence (:meth:`DiseaseVocabulary.analyse_records`, :class:`RecordAnalysis`).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
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


def _fold_char(ch: str) -> str:
    base = unicodedata.normalize("NFKD", ch)[:1]
    return base if base.isascii() and base.isalnum() else ch


_FOLD_TABLE: dict[int, str] = {}


def _fold(text: str) -> str:
    """Lowercase ``text`` with accents dropped, one character for one ("Sjögren" -> "sjogren"), so that word
    offsets in the folded text are offsets in ``text``."""
    text = text.lower()
    if text.isascii():
        return text
    for ch in set(text):
        if ord(ch) > 127 and ord(ch) not in _FOLD_TABLE:
            _FOLD_TABLE[ord(ch)] = _fold_char(ch)
    folded = text.translate(_FOLD_TABLE)
    return folded if len(folded) == len(text) else text


def words(text: str) -> list[str]:
    """Lowercase alphanumeric words of ``text`` (accents dropped): the unit of word-boundary matching."""
    return _WORD.findall(_fold(text))


@dataclass(frozen=True)
class Mention:
    """One occurrence of a term in a text: word positions ``[start, end)``, character offsets, the term as
    written (lowercase words), its category, the terms nested in it, and whether NegEx found it negated or
    ruled out."""

    start: int
    end: int
    start_char: int
    end_char: int
    term: str
    category: str
    nested: tuple[str, ...]
    negated: bool = False


@dataclass(frozen=True)
class RecordAnalysis:
    """What the rule-based classifier [ours] found in one record (title + note).

    ``category`` is ``None`` when no affirmed term was found (the record is skipped and counted, never
    guessed). ``scores``: per category, ``title_weight`` × distinct affirmed mentions in the title + distinct
    affirmed mentions in the note. ``confidence`` [ours]: the winning category's share of all the scores
    (1.0 = every affirmed term points to it; 0.0 when skipped). ``rule``: which rule decided — ``"title"``
    (the only or most-named category of the title), ``"title, first named"`` (a tie among title categories,
    broken by the one named first in the title), ``"note"``, ``"note, first named"``, or ``"no affirmed
    term"``. ``keywords``: the affirmed terms of title then note (nested terms included), each once.
    """

    category: str | None
    confidence: float
    rule: str
    scores: dict[str, float]
    keywords: list[str]


def _data_text(name: str) -> str:
    return resources.files("medunlearn.ontology").joinpath("data").joinpath(name).read_text()


@lru_cache(maxsize=1)
def negation_pipeline():
    """spaCy's blank English tokenizer, its rule-based sentencizer (plus a break at every line break), and
    negspacy's NegEx component with the ``en_clinical`` termset (Chapman et al. 2001, J Biomed Inform
    34:301-310, as shipped by negspacy) extended by ``data/negation_terms.yaml`` [ours: differential
    diagnoses, "excluded", scope ends such as "presented"]. Built once per process; nothing is downloaded."""
    import spacy
    from negspacy.negation import Negex  # noqa: F401  (registers the "negex" factory)
    from negspacy.termsets import termset
    from spacy.language import Language

    if not Language.has_factory("medunlearn_line_breaks"):

        @Language.component("medunlearn_line_breaks")
        def line_breaks(doc):
            for token in doc[:-1]:
                if "\n" in token.text:
                    doc[token.i + 1].is_sent_start = True
            return doc

    extra = yaml.safe_load(_data_text("negation_terms.yaml"))
    # A copy: negspacy's termset.add_patterns would change its module-level defaults for every user.
    patterns = {
        key: sorted(set(values) | set(extra.get(key, ())))
        for key, values in termset("en_clinical").get_patterns().items()
    }
    nlp = spacy.blank("en")
    # spaCy keeps "B." (a letter and a full stop) as one token, an initial; in notes it far more often ends a
    # sentence ("negative for hepatitis B. Stroke followed."), so the stop is split off and the sentence ends.
    for letter in string.ascii_letters:
        nlp.tokenizer.add_special_case(f"{letter}.", [{"ORTH": letter}, {"ORTH": "."}])
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("medunlearn_line_breaks")
    nlp.add_pipe(
        "negex", config={"neg_termset": patterns, "span_keys": [_SPAN_KEY], "extension_name": "negex"}
    )
    return nlp


_SPAN_KEY = "medunlearn_terms"


class DiseaseVocabulary:
    """Disease terms, each with a category; finds terms in texts and classifies texts.

    ``wrong_senses``: phrases in which a term does not name the disease ("depression of consciousness",
    "ST depression", "tumor necrosis factor"); a term inside one is not found. ``negation``: whether
    negated and ruled-out mentions (NegEx, :func:`negation_pipeline`) are dropped by the classifier and the
    keywords; :meth:`find_terms` is lexical and keeps them.
    """

    def __init__(
        self, term_categories: Mapping[str, str], wrong_senses: Iterable[str] = (), negation: bool = True
    ):
        self.term_categories: dict[str, str] = {}
        self.negation = negation
        self._by_words: dict[tuple[str, ...], str | None] = {}
        for phrase in wrong_senses:
            key = tuple(words(phrase))
            if key:
                self._by_words[key] = None
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
        self._lengths_by_first_word = {word: tuple(sorted(n, reverse=True)) for word, n in lengths.items()}

    def __len__(self) -> int:
        return len(self.term_categories)

    def _singular(self, key: tuple[str, ...]) -> tuple[str, ...] | None:
        """The term whose last word is the singular of ``key``'s ("seizures" -> "seizure"), if any."""
        last = key[-1]
        for suffix, ending in (("ies", "y"), ("es", ""), ("s", "")):
            if last.endswith(suffix) and len(last) > len(suffix) + 2:
                singular = (*key[:-1], last[: -len(suffix)] + ending)
                if singular in self._by_words:
                    return singular
        return None

    def mentions(self, text: str) -> list[Mention]:
        """The outermost term occurrences of ``text``, in order, each with the terms nested in it; terms
        inside a wrong-sense phrase are dropped. A term is reported as written (lowercase words: "seizures"
        for the term "seizure"). Lexical only (``negated`` is False): see :meth:`analyse_texts`."""
        spans = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(_fold(text))]
        tokens = [token for _, _, token in spans]
        by_words, lengths_by_first_word = self._by_words, self._lengths_by_first_word
        hits: list[tuple[int, int, str | None]] = []  # (start, end, category; None for a wrong sense)
        for start, token in enumerate(tokens):
            lengths = lengths_by_first_word.get(token, ())
            if not lengths and (len(token) < 4 or token[-1] != "s"):
                continue
            for length in (*lengths, 1) if 1 not in lengths else lengths:
                key = tuple(tokens[start : start + length])
                if len(key) < length:
                    continue
                canonical = key if key in by_words else self._singular(key)
                if canonical is not None:
                    term = by_words[canonical]
                    hits.append((start, start + length, None if term is None else self.term_categories[term]))
        hits.sort(key=lambda hit: (hit[0], -hit[1]))
        mentions: list[Mention] = []
        cover_end = -1
        for index, (start, end, category) in enumerate(hits):
            if end <= cover_end:
                continue  # nested in an earlier outer hit: reported through it
            cover_end = end
            if category is None:
                continue  # a wrong-sense phrase: it and everything in it is not a disease mention
            inside = [(s, e, c) for s, e, c in hits[index + 1 :] if s < end and e <= end]
            nested = [" ".join(tokens[s:e]) for s, e, _ in inside]
            if any(c is None for _, _, c in inside):
                nested = []  # a wrong-sense phrase inside a longer term: keep the term, not its words
            mentions.append(
                Mention(
                    start,
                    end,
                    spans[start][0],
                    spans[end - 1][1],
                    " ".join(tokens[start:end]),
                    category,
                    tuple(dict.fromkeys(nested)),
                )
            )
        return mentions

    def find_terms(self, text: str) -> list[str]:
        """Distinct vocabulary terms in ``text`` (canonical lowercase form), in order of first appearance.

        A term nested in a longer matched term is still reported ("breast cancer" also yields "cancer"), since
        each is a disease word a model could leak. Lexical: negated mentions are found too (the keywords and
        the classifier drop them, :meth:`analyse_texts`); terms inside a wrong-sense phrase are not.

        >>> vocabulary = DiseaseVocabulary(
        ...     {"breast cancer": "cancer", "cancer": "cancer", "gout": "musculoskeletal"}
        ... )
        >>> vocabulary.find_terms("Known BREAST-CANCER; no gouty tophi.")
        ['breast cancer', 'cancer']
        """
        found: dict[str, None] = {}
        for mention in self.mentions(text):
            found.setdefault(mention.term)
            for term in mention.nested:
                found.setdefault(term)
        return list(found)

    def analyse_texts(self, texts: Sequence[str], batch_size: int = 64) -> list[list[Mention]]:
        """:meth:`mentions` of every text with ``negated`` set by NegEx; texts go through spaCy in batches
        (``nlp.pipe``), and only those with at least one mention.

        >>> vocabulary = default_vocabulary()
        >>> mentions = vocabulary.analyse_texts(["No dental infection; CT showed pneumonia."])[0]
        >>> [(m.term, m.negated) for m in mentions]
        [('infection', True), ('pneumonia', False)]
        """
        found = [self.mentions(text) for text in texts]
        if not self.negation:
            return found
        todo = [index for index, mentions in enumerate(found) if mentions]
        nlp = negation_pipeline()
        docs = nlp.pipe((texts[index] for index in todo), batch_size=batch_size, disable=["negex"])
        negex = nlp.get_pipe("negex")
        for index, doc in zip(todo, docs):
            spans = [doc.char_span(m.start_char, m.end_char, alignment_mode="expand") for m in found[index]]
            doc.spans[_SPAN_KEY] = [span for span in spans if span is not None]
            negex(doc)
            found[index] = [
                replace(mention, negated=span is not None and bool(span._.negex))
                for mention, span in zip(found[index], spans)
            ]
        return found

    @staticmethod
    def _affirmed_counts(text: str, mentions: list[Mention]) -> tuple[dict[str, set], dict[str, int]]:
        """Distinct affirmed mentions per category and the word position of each category's first one.
        Mentions of one category separated by spaces only are one mention ("SARS-CoV-2 infection")."""
        distinct: dict[str, set] = {}
        first: dict[str, int] = {}
        previous: tuple[str, int, list[str]] | None = None
        groups: list[tuple[str, int, list[str]]] = []
        for mention in mentions:
            if mention.negated:
                previous = None
                continue
            category = mention.category
            if (
                previous is not None
                and previous[0] == category
                and not text[previous[1] : mention.start_char].strip()
            ):
                previous[2].append(mention.term)
                previous = (category, mention.end_char, previous[2])
                continue
            previous = (category, mention.end_char, [mention.term])
            groups.append(previous)
            first.setdefault(category, mention.start)
        for category, _, terms in groups:
            distinct.setdefault(category, set()).add(tuple(terms))
        return distinct, first

    def analyse_records(
        self, titles: Sequence[str], notes: Sequence[str], title_weight: float = 3.0
    ) -> list[RecordAnalysis]:
        """Category, confidence and keywords of each record [ours], batched (see :class:`RecordAnalysis`).

        The title comes first: when the title names an affirmed disease term, the category is the title's
        category with the most distinct affirmed mentions, a tie going to the one named first in the title;
        the note only counts towards the confidence. Otherwise the note's category with the most distinct
        affirmed mentions, a tie going to the one named first in the note. Never the order of ``DISEASES``.

        >>> vocabulary = default_vocabulary()
        >>> result = vocabulary.analyse_records(["Acute gout of the toe"], ["Urate high; no infection."])[0]
        >>> result.category, result.rule, result.confidence, result.keywords
        ('musculoskeletal', 'title', 1.0, ['gout'])
        """
        titles, notes = list(titles), list(notes)
        if len(titles) != len(notes):
            raise ValueError(f"{len(titles)} titles but {len(notes)} notes")
        analysed = self.analyse_texts(titles + notes)
        results = []
        for title, note, title_mentions, note_mentions in zip(
            titles, notes, analysed[: len(titles)], analysed[len(titles) :]
        ):
            title_counts, title_first = self._affirmed_counts(title, title_mentions)
            note_counts, note_first = self._affirmed_counts(note, note_mentions)
            scores: dict[str, float] = {}
            for category, distinct in title_counts.items():
                scores[category] = scores.get(category, 0.0) + title_weight * len(distinct)
            for category, distinct in note_counts.items():
                scores[category] = scores.get(category, 0.0) + len(distinct)
            keywords = list(
                dict.fromkeys(
                    term
                    for mention in title_mentions + note_mentions
                    if not mention.negated
                    for term in (mention.term, *mention.nested)
                )
            )
            if title_counts:
                counts, first, rule = title_counts, title_first, "title"
            elif note_counts:
                counts, first, rule = note_counts, note_first, "note"
            else:
                results.append(RecordAnalysis(None, 0.0, "no affirmed term", scores, keywords))
                continue
            most = max(len(distinct) for distinct in counts.values())
            tied = [category for category, distinct in counts.items() if len(distinct) == most]
            category = min(tied, key=first.__getitem__)
            if len(tied) > 1:
                rule += ", first named"
            confidence = scores[category] / sum(scores.values())
            results.append(RecordAnalysis(category, round(confidence, 4), rule, scores, keywords))
        return results

    def record_keywords(self, titles: Iterable[str], notes: Iterable[str]) -> list[list[str]]:
        """Disease keywords of each patient record [ours]: the affirmed terms of its title, then those of its
        note, each once (negated and ruled-out mentions are not keywords). The title counts because it is
        part of the record a model is trained on (and it is what the category was assigned from, so every
        record classified from its title has at least one keyword)."""
        return [result.keywords for result in self.analyse_records(list(titles), list(notes))]

    def category_scores(self, title: str, note: str, title_weight: float = 3.0) -> dict[str, float]:
        """Score per category: distinct affirmed mentions in the title count ``title_weight``, in the note
        1."""
        return self.analyse_records([title], [note], title_weight)[0].scores

    def classify(self, title: str, note: str) -> str | None:
        """The category of :meth:`analyse_records` (title first; ties broken by the title, never by category
        order); ``None`` when no affirmed term matches (the record is then skipped and counted, never
        guessed).

        >>> vocabulary = default_vocabulary()
        >>> vocabulary.classify("Acute gout of the toe", "Serum urate was high; no infection was found.")
        'musculoskeletal'
        """
        return self.analyse_records([title], [note])[0].category

    def classify_records(self, titles: Sequence[str], notes: Sequence[str]) -> list[str | None]:
        """:meth:`classify` of many records in one batch."""
        return [result.category for result in self.analyse_records(titles, notes)]


def _load_yaml(name: str):
    return yaml.safe_load(resources.files("medunlearn.ontology").joinpath("data").joinpath(name).read_text())


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

    This walks all of ICD-10-CM (seconds), so its result ships as ``data/icd10cm_terms.tsv``; regenerate it
    with ``python -m medunlearn.ontology.vocabulary`` (a test checks the shipped file is current).
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
            # "(...)" and "[...]" hold qualifiers or synonyms ("varicella [chickenpox]"), not part of the name
            description = re.sub(r"\s*(\(.*?\)|\[.*?\])", "", description).replace(" NOS", "")
            description = re.sub(r"^(unspecified|other|acute|chronic) ", "", description.lower()).strip()
            if "," in description or _ICD_STOPWORDS.search(description):
                continue
            if len(description.split()) <= 3 and len(description) >= 5:
                terms.setdefault(description, category)
    return terms


def condition_terms() -> dict[str, str]:
    """The diagnoses of the fictitious cohort, so every synthetic note has at least one keyword of its
    category."""
    return {
        condition["diagnosis"]: category
        for category, conditions in _load_yaml("cohort_conditions.yaml").items()
        for condition in conditions
    }


def render_icd_terms_file(terms: Mapping[str, str]) -> str:
    return "term\tcategory\n" + "".join(f"{term}\t{category}\n" for term, category in sorted(terms.items()))


def icd10cm_terms() -> dict[str, str]:
    """The shipped ICD-10-CM derived terms (see :func:`derive_icd10cm_terms`)."""
    text = resources.files("medunlearn.ontology").joinpath("data").joinpath(ICD_TERMS_FILE).read_text()
    return dict(line.split("\t") for line in text.splitlines()[1:])


def wrong_sense_terms() -> list[str]:
    """Phrases in which a disease term does not name the disease (``data/wrong_sense_terms.yaml``) [ours]."""
    return [str(phrase) for phrase in _load_yaml("wrong_sense_terms.yaml")]


@lru_cache(maxsize=1)
def default_vocabulary() -> DiseaseVocabulary:
    merged: dict[str, str] = {}
    merged.update(icd10cm_terms())
    merged.update(condition_terms())
    merged.update(curated_terms())  # curated last: it wins
    return DiseaseVocabulary(merged, wrong_senses=wrong_sense_terms())


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).parent / "data" / ICD_TERMS_FILE
    target.write_text(render_icd_terms_file(derive_icd10cm_terms()))
    print(f"wrote {target}")
