"""How the rule-based classifier [ours] picks a category from the terms it found: principles that follow how a
clinician reads a case report's title (issue 23; docs/benchmarks/amnesia.md, "Disease classifier").

In the title, in this order:

1. **pregnancy first** ("title: pregnancy (ICD-10-CM chapter 15)"): ICD-10-CM gives chapter 15 sequencing
   priority over the chapter of the condition, so a title naming a pregnancy is maternal_child;
2. **an underlying neoplasm over its complications** ("title: underlying neoplasm"): a neoplasm named in the
   title, or a neoplasm treatment ("anti-PD-1 therapy"), makes it cancer whatever else the title names;
3. **the cause over its consequence** ("title: underlying cause"): after "due to", "secondary to", "caused
   by"…, the first disease named is the underlying one;
4. **the title's primary diagnosis** ("title: primary diagnosis"): the first disease the title names (the head
   of "X in a patient with Y", "X associated with Y"), skipping a trigger ("X-induced Y", "Y induced by X":
   the condition Y, as ICD-10-CM codes an adverse effect by its nature first, and as both hand readers read
   such titles) unless the trigger is an infection, which ICD-10-CM sequences first ("code first" the
   infection: COVID-19, sepsis);
5. **the organ system** ("title: organ system"): a title naming no disease but an organ or a procedure
   ("dental implant", "sleeve gastrectomy") goes to that organ's system.

Only a title with none of these leaves the choice to the note:

6. **an underlying neoplasm in the opening lines** ("note: underlying neoplasm"), the note's first two
   sentences;
7. **the presenting problem over a comorbidity list** ("note: presenting problem"): the category with most
   distinct affirmed mentions outside history scopes ("with a history of hypertension, diabetes and…", up to
   the end of the sentence or the next "presented", "admitted"…); a tie goes to the one named first
   (", first named");
8. **the history alone** ("note: history only") when the note names nothing outside one.

Categories of the named terms follow the ICD-10-CM chapter hierarchy (the vocabulary,
:mod:`medunlearn.ontology.vocabulary`). The functions here are pure: mentions in, a decision out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from medunlearn.ontology.conventions import INFECTION

if TYPE_CHECKING:
    from medunlearn.ontology.vocabulary import Mention

NEOPLASM = "cancer"
PREGNANCY = "maternal_child"
# Eye, ear and skin (ICD-10-CM chapters 7, 8, 12): no category of ours (medunlearn.ontology.conventions).
OUT_OF_SCOPE = "none"
_NO_CATEGORY = "title: no category (eye, ear or skin: ICD-10-CM chapters 7, 8, 12)"
# Title cue categories that are not organ systems (data/title_cues.yaml).
PREGNANCY_CUE, NEOPLASM_CUE = "pregnancy", "neoplasm"

_CAUSE_FOLLOWS = re.compile(
    r"\b(due to|secondary to|caused by|resulting from|arising from|attributed to|triggered by|"
    r"as a complication of|as a manifestation of|with an initial manifestation of)\b",
    re.IGNORECASE,
)
# "X-induced Y" / "X induced Y": X triggered the condition Y, which is the diagnosis (principle 4); an
# infection that triggered it stays first, as ICD-10-CM sequences the infection first.
_TRIGGER_FOLLOWS = re.compile(r"^[\s-]*induced\b(?!\s+by\b)", re.IGNORECASE)
_HISTORY = re.compile(
    r"\b(history of|medical history|past history|histories of|background of|comorbidit(?:y|ies)|"
    r"co-morbidit(?:y|ies)|known case of|known|previously diagnosed|underlying|was on treatment for|"
    r"treated for)\b",
    re.IGNORECASE,
)
# Where a history scope ends: a sentence end, a clause (";"), or the turn to the present illness.
_HISTORY_END = re.compile(
    r"[.;!?\n]|\b(present(?:ed|ing|s)?|admitted|developed|complain(?:ed|ing|s)?|referred|came|visited|"
    r"was brought|now|with a chief complaint|due to|because of)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")
OPENING_SENTENCES = 2


@dataclass(frozen=True)
class Decision:
    category: str | None
    rule: str


def history_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of ``text`` that list the patient's history: from a trigger ("history of",
    "comorbidities", "known") to the end of its sentence or clause or the next turn to the present illness
    ("presented", "admitted", "developed"…).

    >>> text = "A man with a history of hypertension and diabetes presented with chest pain."
    >>> [text[start:end] for start, end in history_spans(text)]
    ['history of hypertension and diabetes ']
    """
    spans = []
    for match in _HISTORY.finditer(text):
        end = _HISTORY_END.search(text, match.end())
        spans.append((match.start(), end.start() if end else len(text)))
    return spans


def opening_end(text: str, sentences: int = OPENING_SENTENCES) -> int:
    """Character offset where the first ``sentences`` sentences of ``text`` end."""
    position = 0
    for _ in range(sentences):
        match = _SENTENCE_END.search(text, position)
        if match is None:
            return len(text)
        position = match.end()
    return position


def _first_category(mentions: Sequence[Mention]) -> str | None:
    return mentions[0].category if mentions else None


def _not_a_trigger(title: str, mentions: Sequence[Mention]) -> list[Mention]:
    """``mentions`` less those written as the trigger of a later condition ("hypothyroidism-induced
    rhabdomyolysis": hypothyroidism; not an infection: "COVID-19-induced Guillain-Barré syndrome" stays
    COVID-19), unless that would leave none."""
    conditions = [
        m for m in mentions if m.category == INFECTION or not _TRIGGER_FOLLOWS.match(title[m.end_char :])
    ]
    return conditions or list(mentions)


def decide_title(title: str, mentions: Sequence[Mention], cues: Sequence[Mention]) -> Decision | None:
    """Principles 1–5 on a title's affirmed ``mentions`` and its ``cues`` (organ, pregnancy and neoplasm-
    treatment words of ``data/title_cues.yaml``); ``None`` when the title names neither a disease nor a cue.

    >>> from medunlearn.ontology.vocabulary import default_vocabulary
    >>> vocabulary = default_vocabulary()
    >>> title = "Intussusception secondary to Burkitt lymphoma"
    >>> decide_title(title, vocabulary.mentions(title), vocabulary.title_cues(title))
    Decision(category='cancer', rule='title: underlying neoplasm')
    """
    if any(cue.category == PREGNANCY_CUE for cue in cues):
        return Decision(PREGNANCY, "title: pregnancy (ICD-10-CM chapter 15)")
    if any(m.category == NEOPLASM for m in mentions):
        return Decision(NEOPLASM, "title: underlying neoplasm")
    if mentions:
        connective = _CAUSE_FOLLOWS.search(title)
        causes = [m for m in mentions if connective is not None and m.start_char >= connective.end()]
        decision = (
            Decision(causes[0].category, "title: underlying cause")
            if causes
            else Decision(_not_a_trigger(title, mentions)[0].category, "title: primary diagnosis")
        )
        return Decision(None, _NO_CATEGORY) if decision.category == OUT_OF_SCOPE else decision
    if any(cue.category == NEOPLASM_CUE for cue in cues):
        return Decision(NEOPLASM, "title: neoplasm treatment")
    organs = [cue for cue in cues if cue.category not in (PREGNANCY_CUE, NEOPLASM_CUE)]
    if not organs:
        return None
    category = _first_category(organs)
    return (
        Decision(None, _NO_CATEGORY)
        if category == OUT_OF_SCOPE
        else Decision(category, "title: organ system")
    )


def _most_named(mentions: Sequence[Mention]) -> tuple[str, bool]:
    """The category with most distinct terms among ``mentions`` (in order), a tie going to the one named
    first; and whether there was a tie."""
    distinct: dict[str, set[str]] = {}
    for mention in mentions:
        distinct.setdefault(mention.category, set()).add(mention.term)
    most = max(len(terms) for terms in distinct.values())
    tied = [category for category, terms in distinct.items() if len(terms) == most]
    return tied[0], len(tied) > 1  # dicts keep first-mention order


def decide_note(note: str, mentions: Sequence[Mention]) -> Decision:
    """Principles 6–8 on a note's affirmed ``mentions`` (in text order).

    >>> from medunlearn.ontology.vocabulary import default_vocabulary
    >>> note = "A man with a history of hypertension and diabetes presented with pneumonia."
    >>> decide_note(note, default_vocabulary().mentions(note))
    Decision(category='infection_immune', rule='note: presenting problem')
    """
    mentions = [m for m in mentions if m.category != OUT_OF_SCOPE]
    if not mentions:
        return Decision(None, "no affirmed term")
    opening = opening_end(note)
    if any(m.category == NEOPLASM and m.start_char < opening for m in mentions):
        return Decision(NEOPLASM, "note: underlying neoplasm")
    spans = history_spans(note)
    present = [m for m in mentions if not any(start <= m.start_char < end for start, end in spans)]
    if present:
        category, tie = _most_named(present)
        return Decision(category, "note: presenting problem" + (", first named" if tie else ""))
    category, tie = _most_named(mentions)
    return Decision(category, "note: history only" + (", first named" if tie else ""))
