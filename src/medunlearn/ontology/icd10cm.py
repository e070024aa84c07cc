"""ICD-10-CM as medunlearn reads it [ours]: its chapters and blocks mapped to our disease categories, and the
short disease names its descriptions and inclusion terms give (the vocabulary's ICD-derived terms; symptoms by
the organ system their block names, read in titles only). Deriving walks all of ICD-10-CM (the offline
``simple-icd-10-cm`` package, seconds), so the results ship as ``data/icd10cm_terms.tsv`` and
``data/icd10cm_symptom_terms.tsv``; regenerate them with ``python -m medunlearn.ontology.icd10cm`` (a test
checks the shipped files are current). See docs/benchmarks/amnesia.md, "Disease classifier".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources

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
    "U07.0": "respiratory",  # vaping-related lung injury
    "U00-U49": "infection_immune",  # provisional codes: U07.1 COVID-19
    "N60-N65": "",  # disorders of the breast: chapter 14 holds them, but they are no kidney/urinary disease
}
# ICD descriptions holding one of these words are too generic or compound to be a keyword.
_ICD_STOPWORDS = re.compile(
    r"\b(of|and|with|other|due|nos|unspecified|without|in|to|for|by|specified|classified|elsewhere|sequelae|"
    r"personal|history|family|encounter|screening|complications?|disorders?|diseases?|conditions?|abnormal|"
    r"findings?|syndrome|benign|status)\b"
)

# One word before "syndrome" or "disease" that names no particular disease [ours]: "autoimmune disease" (ICD
# files it under connective tissue, chapter 13, where our conventions put immune disorders elsewhere), "pain
# syndrome", "cross syndrome", "infectious disease" (as often the consulting service as a disease).
_VAGUE_HEADS = frozenset(
    "autoimmune pain headache fatigue immobility institutional paralytic cross collagen immune "
    "infectious".split()
)

ICD_TERMS_FILE = "icd10cm_terms.tsv"


# What may follow a disease name after a comma in ICD-10-CM and leave the name whole.
_ICD_QUALIFIER = re.compile(
    r"\s*(unspecified|not elsewhere classified|nec\b|any site|site unspecified|initial encounter|"
    r"subsequent encounter|sequela|not otherwise specified|so stated)\s*$",
    re.IGNORECASE,
)


def icd_description_term(description: str) -> str | None:
    """The disease name an ICD-10-CM description or inclusion term gives, or ``None`` when it gives none
    short and specific enough to be a keyword: "(...)" and "[...]" hold qualifiers or synonyms and are
    dropped, so is
    a qualifier after a comma ("Neurosyphilis, unspecified" -> "neurosyphilis"; a description whose comma
    goes on otherwise gives none), and a leading
    "unspecified", "other", "acute" or "chronic"; at most 4 words; generic words (``_ICD_STOPWORDS``) exclude
    a name, except "syndrome" and "disease" after at least two other words ("complex regional pain syndrome")
    or after one word that names the disease (an eponym, "Takotsubo syndrome", or an organ, "kidney disease";
    not a vague one of ``_VAGUE_HEADS``, "pain syndrome").

    >>> names = ("Neurosyphilis, unspecified", "Complex regional pain syndrome I (CRPS I)",
    ...          "Other intestinal obstruction", "Takotsubo syndrome")
    >>> [icd_description_term(name) for name in names]
    ['neurosyphilis', 'complex regional pain syndrome', 'intestinal obstruction', 'takotsubo syndrome']
    >>> [icd_description_term(name) for name in ("Pain syndrome", "Fistula, unspecified joint")]
    [None, None]
    """
    name, _, rest = re.sub(r"\s*(\(.*?\)|\[.*?\])", "", description).replace(" NOS", "").partition(",")
    if rest and not _ICD_QUALIFIER.match(rest):
        return None  # "Thoracic, thoracolumbar and lumbosacral …": the head alone is no disease
    name = name.lower().strip()
    name = re.sub(r"^(unspecified|other|acute|chronic) ", "", name).strip()
    name = re.sub(r" (i|ii|iii|iv)$", "", name)  # "syndrome I": the type is not part of the name
    head = re.sub(r" (syndrome|disease)$", "", name)
    if len(name.split()) == 2 and (head in _VAGUE_HEADS or len(head) < 4):
        return None  # "pain syndrome", "cross syndrome": the word before names no disease
    if _ICD_STOPWORDS.search(head) or len(name.split()) > 4 or len(name) < 5:
        return None
    return name


def derive_icd10cm_terms(chapter_categories: Mapping[str, str] = ICD_CHAPTER_CATEGORIES) -> dict[str, str]:
    """Short ICD-10-CM category descriptions and inclusion terms, mapped to our categories.

    This walks all of ICD-10-CM (seconds), so its result ships as ``data/icd10cm_terms.tsv``; regenerate it
    with ``python -m medunlearn.ontology.icd10cm`` (a test checks the shipped file is current).
    """
    import simple_icd_10_cm as cm

    terms: dict[str, str] = {}
    for code in cm.get_all_codes(False):
        if not (cm.is_category(code) or cm.is_subcategory(code)):
            continue
        category = chapter_category(code, chapter_categories)
        if not category:  # an unmapped chapter, or a block mapped to no category ("")
            continue
        for description in [cm.get_description(code), *cm.get_inclusion_term(code)]:
            term = icd_description_term(description)
            if term is not None:
                terms.setdefault(term, category)
    return terms


# ICD-10-CM chapter 18 (symptoms and signs) by the organ system its blocks and categories name [ours]; read in
# titles only (data/icd10cm_symptom_terms.tsv), never as disease keywords.
ICD_SYMPTOM_CATEGORIES: dict[str, str] = {
    "R00": "cardiovascular",
    "R01": "cardiovascular",
    "R03": "cardiovascular",
    "R55": "cardiovascular",
    "R04": "respiratory",
    "R05": "respiratory",
    "R06": "respiratory",
    "R09": "respiratory",
    "R10-R19": "digestive",
    "R25-R29": "neurological",
    "R40": "neurological",
    "R41": "neurological",
    "R42": "neurological",
    "R47-R49": "neurological",
    "R56": "neurological",
    "R44": "mental_behavioral",
    "R45": "mental_behavioral",
    "R46": "mental_behavioral",
    "R30-R39": "kidney_urinary",
    "R80-R82": "kidney_urinary",
}
ICD_SYMPTOM_FILE = "icd10cm_symptom_terms.tsv"


def icd10cm_symptom_terms() -> dict[str, str]:
    """The shipped ICD-10-CM symptom terms (``derive_icd10cm_terms(ICD_SYMPTOM_CATEGORIES)``)."""
    text = resources.files("medunlearn.ontology").joinpath("data").joinpath(ICD_SYMPTOM_FILE).read_text()
    return dict(line.split("\t") for line in text.splitlines()[1:])


def render_icd_terms_file(terms: Mapping[str, str]) -> str:
    return "term\tcategory\n" + "".join(f"{term}\t{category}\n" for term, category in sorted(terms.items()))


def icd10cm_terms() -> dict[str, str]:
    """The shipped ICD-10-CM derived terms (see :func:`derive_icd10cm_terms`)."""
    text = resources.files("medunlearn.ontology").joinpath("data").joinpath(ICD_TERMS_FILE).read_text()
    return dict(line.split("\t") for line in text.splitlines()[1:])


ICD_DESCRIPTIONS_FILE = "icd10cm_categories.tsv"
# Chapters that name no diagnosis: external causes (20) and factors influencing health status (21).
NOT_DIAGNOSES = ("20", "21")


def chapter_category(code: str, chapter_categories: Mapping[str, str] = ICD_CHAPTER_CATEGORIES) -> str:
    """Our category of an ICD-10-CM code through its nearest mapped ancestor; "" when there is none."""
    import simple_icd_10_cm as cm

    lineage = [code, *cm.get_ancestors(code)]  # nearest first: a code or block entry overrides its chapter
    return next((chapter_categories[a] for a in lineage if a in chapter_categories), "")


def derive_icd10cm_descriptions() -> list[tuple[str, str, str, str]]:
    """``(code, chapter, category, description)`` of every 3-character ICD-10-CM category, ``category`` ""
    where its chapter maps to none of ours (eye, ear, skin, injuries…): what the embedding second opinion
    compares titles with (:mod:`medunlearn.amnesia.second_opinion`)."""
    import simple_icd_10_cm as cm

    # U07's own description is "Emergency use of U07": its subcategories name the diseases.
    codes = [c for c in cm.get_all_codes(False) if cm.is_category(c) and c != "U07"] + ["U07.0", "U07.1"]
    return [
        (code, cm.get_ancestors(code)[-1], chapter_category(code), cm.get_description(code))
        for code in codes
        if cm.get_ancestors(code)[-1] not in NOT_DIAGNOSES
    ]


def render_descriptions_file(rows) -> str:
    return "code\tchapter\tcategory\tdescription\n" + "".join("\t".join(row) + "\n" for row in rows)


def icd10cm_descriptions() -> list[tuple[str, str, str, str]]:
    """The shipped ICD-10-CM category descriptions (see :func:`derive_icd10cm_descriptions`)."""
    data = resources.files("medunlearn.ontology").joinpath("data").joinpath(ICD_DESCRIPTIONS_FILE)
    return [tuple(line.split("\t")) for line in data.read_text().splitlines()[1:]]


if __name__ == "__main__":
    from pathlib import Path

    for name, chapters in (
        (ICD_TERMS_FILE, ICD_CHAPTER_CATEGORIES),
        (ICD_SYMPTOM_FILE, ICD_SYMPTOM_CATEGORIES),
    ):
        target = Path(__file__).parent / "data" / name
        target.write_text(render_icd_terms_file(derive_icd10cm_terms(chapters)))
        print(f"wrote {target}")
    target = Path(__file__).parent / "data" / ICD_DESCRIPTIONS_FILE
    target.write_text(render_descriptions_file(derive_icd10cm_descriptions()))
    print(f"wrote {target}")
