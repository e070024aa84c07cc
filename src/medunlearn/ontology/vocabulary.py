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
our additions (``data/negation_terms.yaml``: differentials, hypotheses, family history), over sentences from
spaCy's blank English pipeline; see :func:`negation_pipeline`. The category follows how a clinician reads a
title (:mod:`medunlearn.ontology.principles`), and each classification reports the principle that decided and
a confidence (:meth:`DiseaseVocabulary.analyse_records`, :class:`RecordAnalysis`). A term followed by "-like"
names a resemblance, not the disease; "-oma" words name neoplasms (:func:`is_neoplasm_name`).
"""

from __future__ import annotations

import itertools
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
from medunlearn.ontology.conventions import (
    INFECTION,
    OUT_OF_SCOPE,
    infections_named_as_such,
    is_organism_name,
    is_out_of_scope_name,
    out_of_scope_terms,
)
from medunlearn.ontology.icd10cm import (  # noqa: F401  (re-exported: the vocabulary's ICD-derived terms)
    ICD_CHAPTER_CATEGORIES,
    ICD_TERMS_FILE,
    derive_icd10cm_terms,
    icd10cm_symptom_terms,
    icd10cm_terms,
    render_icd_terms_file,
)
from medunlearn.ontology.principles import NEOPLASM_CUE, PREGNANCY_CUE, decide_note, decide_title

_WORD = re.compile(r"[a-z0-9]+")

NEOPLASM_CATEGORY = "cancer"
# Neoplasm morphology [ours]: ICD-O names neoplasms "-oma" ("pseudomyxoma", "lymphangioma"); these "-oma"
# words
# name no neoplasm (a collection, a scar, an infection, a sign) and are not read as one.
_NOT_NEOPLASMS = frozenset(
    "hematoma haematoma granuloma lipogranuloma glaucoma trachoma scotoma stoma coma diploma aroma atheroma "
    "xanthoma seroma urinoma biloma lymphocele cholesteatoma tuberculoma mycetoma eumycetoma actinomycetoma "
    "endometrioma condyloma leukoma leucoma staphyloma chalazoma hygroma stroma".split()
)
_OMA = re.compile(r"[a-z]{3,}omas?")
_LIKENESS = re.compile(r"\s*[-\u2010\u2011\u2013]\s*(like|resembling|mimicking)\b", re.IGNORECASE)
_ANATOMICAL_PREFIX = re.compile(
    r"^(intra|inter|extra|peri|para|sub|supra|retro|trans|endo|epi|post|pre|leuko|leuco|poly|hemi|hyper|hypo|"
    r"micro|macro|pan)(?=[a-z]{4})"
)


def is_neoplasm_name(word: str) -> bool:
    """Whether a lowercase ``word`` has the morphology of a neoplasm's name ("-oma", "-omas") and is not one
    of
    the "-oma" words that name something else (a hematoma, a granuloma, glaucoma).

    >>> [is_neoplasm_name(w) for w in ("pseudomyxoma", "lymphangiomas", "hematoma", "glaucoma", "somatic")]
    [True, True, False, False, False]
    """
    if not _OMA.fullmatch(word):
        return False
    return (word[:-1] if word.endswith("s") else word) not in _NOT_NEOPLASMS


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


# Words a term may not hold for its word-order variants: a term with them already reads as a phrase.
_PHRASE_WORDS = frozenset("of the in with and or to for by on at".split())
MAX_VARIANT_WORDS = 4


def word_order_variants(key: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The other ways English writes a multi-word disease name [ours]: its modifiers in another order,
    the head noun last ("malignant neuroleptic syndrome" -> "neuroleptic malignant syndrome"), and the head
    first with "of" ("adenosine deaminase 2 deficiency" -> "deficiency of adenosine deaminase 2", "deficiency
    of the …"). ICD-10-CM writes names one way; titles write them either way. Terms of 2 to
    ``MAX_VARIANT_WORDS`` words without phrase words (``_PHRASE_WORDS``) have variants.

    >>> word_order_variants(("femur", "fracture"))
    [('fracture', 'of', 'femur'), ('fracture', 'of', 'the', 'femur')]
    >>> len(word_order_variants(("malignant", "neuroleptic", "syndrome")))
    3
    """
    if not 2 <= len(key) <= MAX_VARIANT_WORDS or _PHRASE_WORDS.intersection(key):
        return []
    *modifiers, head = key
    reordered = [(*order, head) for order in itertools.permutations(modifiers) if list(order) != modifiers]
    return reordered + [(head, "of", *modifiers), (head, "of", "the", *modifiers)]


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
    (1.0 = every affirmed term points to it; 0.0 when skipped; a title decided by a cue alone counts the cue
    as one title mention). ``rule``: the principle that decided (:mod:`medunlearn.ontology.principles`:
    ``"title: primary diagnosis"``, ``"title: underlying neoplasm"``, ``"note: presenting problem"``…) or
    ``"no affirmed term"``. ``keywords``: the affirmed terms of title then note (nested terms of the same
    category included), each once.
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
        self,
        term_categories: Mapping[str, str],
        wrong_senses: Iterable[str] = (),
        negation: bool = True,
        neoplasm_morphology: bool = False,
        cues: DiseaseVocabulary | None = None,
        roots: Mapping[str, str] | None = None,
        convention_morphology: bool = False,
    ):
        self.term_categories: dict[str, str] = {}
        self.negation = negation
        self.neoplasm_morphology = neoplasm_morphology
        self.convention_morphology = convention_morphology
        self.cues = cues
        self.roots = dict(roots or {})
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
        for key, canonical in list(self._by_words.items()):
            if canonical is None:
                continue
            for variant in word_order_variants(key):
                self._by_words.setdefault(variant, canonical)  # a term or wrong sense written so wins
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

    def _word_category(self, word: str) -> str | None:
        """The category a word's form gives when no term matched it: a neoplasm's "-oma"
        (:func:`is_neoplasm_name`, with ``neoplasm_morphology``), or an organ root after an anatomical prefix
        (``roots``: "intrahepatic" -> hepat -> digestive)."""
        if self.neoplasm_morphology and is_neoplasm_name(word):
            return NEOPLASM_CATEGORY
        if self.convention_morphology and is_organism_name(word):
            return INFECTION  # a pathogen named as such (medunlearn.ontology.conventions)
        if self.convention_morphology and is_out_of_scope_name(word):
            return OUT_OF_SCOPE  # "keratopathy", "maculopathy": an eye, ear or skin disease
        if self.roots and len(word) >= 5:
            stem = _ANATOMICAL_PREFIX.sub("", word)
            for length in range(min(len(stem), 8), 3, -1):
                category = self.roots.get(stem[:length])
                if category is not None:
                    return category
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
        if self.neoplasm_morphology or self.convention_morphology or self.roots:
            named = {hit[0] for hit in hits}
            for start, token in enumerate(tokens):
                category = None if start in named else self._word_category(token)
                if category is not None:
                    hits.append((start, start + 1, category))
        hits.sort(key=lambda hit: (hit[0], -hit[1]))
        mentions: list[Mention] = []
        cover_end = -1
        for index, (start, end, category) in enumerate(hits):
            if end <= cover_end:
                continue  # nested in an earlier outer hit: reported through it
            cover_end = end
            if category is None:
                continue  # a wrong-sense phrase: it and everything in it is not a disease mention
            if _LIKENESS.match(text, spans[end - 1][1]):
                continue  # "tumor-like", "sarcoid-like": it resembles the disease, it is not the disease
            inside = [(s, e, c) for s, e, c in hits[index + 1 :] if s < end and e <= end]
            # A nested term of another category names another disease ("hypertension" in "portal
            # hypertension").
            nested = [" ".join(tokens[s:e]) for s, e, c in inside if c == category]
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

    def title_cues(self, title: str) -> list[Mention]:
        """Organ, pregnancy and neoplasm-treatment words of ``title`` (``data/title_cues.yaml``), for
        :mod:`medunlearn.ontology.principles`; none for a vocabulary built without ``cues``."""
        return self.cues.mentions(title) if self.cues is not None else []

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

        The category is decided by the principles of :mod:`medunlearn.ontology.principles` (the title's
        pregnancy, neoplasm, cause, primary diagnosis or organ system first; only then the note's underlying
        neoplasm or presenting problem); the note otherwise only counts towards the confidence. Never the
        order of ``DISEASES``.

        >>> vocabulary = default_vocabulary()
        >>> result = vocabulary.analyse_records(["Acute gout of the toe"], ["Urate high; no infection."])[0]
        >>> result.category, result.rule, result.confidence, result.keywords
        ('musculoskeletal', 'title: primary diagnosis', 1.0, ['gout'])
        """
        titles, notes = list(titles), list(notes)
        if len(titles) != len(notes):
            raise ValueError(f"{len(titles)} titles but {len(notes)} notes")
        analysed = self.analyse_texts(titles + notes)
        results = []
        for title, note, title_all, note_all in zip(
            titles, notes, analysed[: len(titles)], analysed[len(titles) :]
        ):
            # Eye, ear and skin terms decide a title (as "no category") and nothing else.
            title_mentions = [m for m in title_all if m.category != OUT_OF_SCOPE]
            note_mentions = [m for m in note_all if m.category != OUT_OF_SCOPE]
            title_counts, _ = self._affirmed_counts(title, title_mentions)
            note_counts, _ = self._affirmed_counts(note, note_mentions)
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
            affirmed_title = [m for m in title_all if not m.negated]
            decision = decide_title(title, affirmed_title, self.title_cues(title)) or decide_note(
                note, [m for m in note_mentions if not m.negated]
            )
            if decision.category is None:
                results.append(RecordAnalysis(None, 0.0, decision.rule, scores, keywords))
                continue
            # A title decided by a cue alone has no score of its own: the cue counts as one title mention.
            if decision.category not in scores:
                scores[decision.category] = title_weight
            confidence = scores[decision.category] / sum(scores.values())
            results.append(
                RecordAnalysis(decision.category, round(confidence, 4), decision.rule, scores, keywords)
            )
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


def _terms_by_category(by_category: dict, source: str) -> dict[str, str]:
    """``{category: [term, ...]}`` from a data file as term -> category (a term listed twice keeps its first
    category); an unknown category is an :class:`InputError` naming ``source``."""
    terms: dict[str, str] = {}
    for category, category_terms in by_category.items():
        if category not in DISEASES:
            raise InputError(f"{source}: unknown category {category!r}; allowed: {', '.join(DISEASES)}")
        for term in category_terms:
            terms.setdefault(str(term), category)
    return terms


def curated_terms() -> dict[str, str]:
    return _terms_by_category(_load_yaml("disease_terms.yaml"), "disease_terms.yaml")


def condition_terms() -> dict[str, str]:
    """The diagnoses of the fictitious cohort, so every synthetic note has at least one keyword of its
    category."""
    return {
        condition["diagnosis"]: category
        for category, conditions in _load_yaml("cohort_conditions.yaml").items()
        for condition in conditions
    }


def wrong_sense_terms() -> list[str]:
    """Phrases in which a disease term does not name the disease (``data/wrong_sense_terms.yaml``) [ours]."""
    return [str(phrase) for phrase in _load_yaml("wrong_sense_terms.yaml")]


def title_cue_terms() -> dict[str, str]:
    """Title cue -> ``"pregnancy"``, ``"neoplasm"`` or an organ system's category (``data/title_cues.yaml``
    and the ICD-10-CM symptom terms)."""
    data = _load_yaml("title_cues.yaml")
    cues = {str(cue): PREGNANCY_CUE for cue in data["pregnancy"]}
    cues.update({str(cue): NEOPLASM_CUE for cue in data["neoplasm"]})
    for term, category in icd10cm_symptom_terms().items():
        cues.setdefault(term, category)
    for cue, category in _terms_by_category(data["organ"], "title_cues.yaml").items():
        cues.setdefault(cue, category)
    for cue in data["no_category"]:
        cues.setdefault(str(cue), OUT_OF_SCOPE)  # eye, ear, skin (medunlearn.ontology.conventions)
    return cues


def organ_roots() -> dict[str, str]:
    """Organ root -> its system's category (``data/title_cues.yaml``, ``organ_roots``)."""
    return _terms_by_category(_load_yaml("title_cues.yaml")["organ_roots"], "title_cues.yaml organ_roots")


@lru_cache(maxsize=1)
def default_vocabulary() -> DiseaseVocabulary:
    merged: dict[str, str] = {}
    merged.update(icd10cm_terms())
    for term, category in out_of_scope_terms().items():
        merged.setdefault(term, category)  # eye, ear, skin: known, so they can say "no category"
    merged.update(condition_terms())
    merged.update(curated_terms())  # curated last: it wins
    cues = DiseaseVocabulary(title_cue_terms(), negation=False, roots=organ_roots())
    return DiseaseVocabulary(
        infections_named_as_such(merged),
        wrong_senses=wrong_sense_terms(),
        neoplasm_morphology=True,
        cues=cues,
        convention_morphology=True,
    )
