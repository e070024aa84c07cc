"""Two conventions of the hand labels [ours] that the ICD-10-CM chapter map alone does not give (issue 23;
docs/benchmarks/amnesia.md, "Disease classifier"):

- **an infection named as such is infection_immune** (``data/infection_terms.yaml``): a term holding an
  infection word ("hepatic abscess", "septic arthritis") and a named organism ("Candida glabrata",
  "Streptococcus constellatus", "fasciolosis") are infection mentions, whatever organ chapter ICD-10-CM files
  the term under;
- **eye, ear and skin conditions have no category** (ICD-10-CM chapters 7, 8 and 12, ``OUT_OF_SCOPE``): their
  terms are known (``data/icd10cm_out_of_scope_terms.tsv``), so a title whose primary diagnosis is one of them
  is not given the category of some other word; the note is skipped and counted.

Regenerate the out-of-scope terms with ``python -m medunlearn.ontology.conventions``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources

import yaml

INFECTION = "infection_immune"
# The category of a term of a chapter no category of ours covers [ours]: known, so that it can decide a title
# (as "no category"), but never a category, a score or a keyword.
OUT_OF_SCOPE = "none"
OUT_OF_SCOPE_CHAPTERS: dict[str, str] = {"7": OUT_OF_SCOPE, "8": OUT_OF_SCOPE, "12": OUT_OF_SCOPE}
OUT_OF_SCOPE_FILE = "icd10cm_out_of_scope_terms.tsv"

_ORGANISM_ENDING = re.compile(
    r"[a-z]{3,}(coccus|cocci|coccal|bacter|bacteria|bacterium|bacillus|monas|myces|virus)"
)
_GENUS_DISEASE = re.compile(r"([a-z]{2,}?)(iasis|osis|oses)")
_GENUS_ENDINGS = ("a", "us", "um", "ia", "es", "ella", "")


@lru_cache(maxsize=1)
def _infection_data() -> dict:
    data = resources.files("medunlearn.ontology").joinpath("data")
    return yaml.safe_load(data.joinpath("infection_terms.yaml").read_text())


@lru_cache(maxsize=1)  # looked up once per unmatched word of every text: built once
def organisms() -> frozenset[str]:
    return frozenset(str(name) for name in _infection_data()["organisms"])


def is_organism_name(word: str) -> bool:
    """Whether a lowercase ``word`` names a pathogen or a disease named after one: a listed genus, an
    organism's ending ("streptococcus", "enterobacter"), "-iasis" ("myiasis"), or "-osis" of a listed genus
    ("fasciolosis", "aspergillosis"); not the words of ``not_organisms`` ("cholelithiasis", "psoriasis").

    >>> [is_organism_name(w) for w in ("candida", "streptococcal", "fasciolosis", "myiasis", "fibrosis",
    ...                                 "psoriasis", "virus")]
    [True, True, True, True, False, False, False]
    """
    data = _infection_data()
    if word in data["not_organisms"]:
        return False
    known = organisms()
    if word in known or _ORGANISM_ENDING.fullmatch(word):
        return True
    disease = _GENUS_DISEASE.fullmatch(word)
    if disease is None:
        return False
    if disease.group(2) == "iasis":
        return True
    stem = disease.group(1)
    return any(stem + ending in known or (stem[:-1] + ending) in known for ending in _GENUS_ENDINGS)


# Disease names built on a root of the eye, ear or skin ("keratopathy", "chorioretinitis", "dermatosis").
_OUT_OF_SCOPE_NAME = re.compile(
    r"(kerat|retin|chorioretin|macul|choroid|uve|ophthalm|blephar|conjunctiv|dacryo|dermat|onych|ot|"
    r"tympan|myring|labyrinth)o?(itis|pathy|opathy|osis)"
)


def is_out_of_scope_name(word: str) -> bool:
    """Whether a lowercase ``word`` names an eye, ear or skin disease by its form (an organ root and
    "-itis", "-pathy", "-osis").

    >>> names = ("keratopathy", "maculopathy", "dermatosis", "otitis", "nephropathy")
    >>> [is_out_of_scope_name(w) for w in names]
    [True, True, True, True, False]
    """
    return _OUT_OF_SCOPE_NAME.fullmatch(word) is not None


def names_infection(term: str) -> bool:
    """Whether a vocabulary term (lowercase words) names an infection as such ("hepatic abscess", "septic
    arthritis") and is not negated inside ("non infectious uveitis")."""
    data = _infection_data()
    term_words = set(term.split())
    return bool(term_words & set(data["infection_words"])) and not term_words & set(data["negating_words"])


def infections_named_as_such(terms: Mapping[str, str]) -> dict[str, str]:
    """``terms`` with every term that names an infection as such moved to infection_immune."""
    return {term: INFECTION if names_infection(term) else category for term, category in terms.items()}


def out_of_scope_terms() -> dict[str, str]:
    """The shipped eye, ear and skin terms of ICD-10-CM (chapters 7, 8, 12), each ``OUT_OF_SCOPE``."""
    text = resources.files("medunlearn.ontology").joinpath("data").joinpath(OUT_OF_SCOPE_FILE).read_text()
    return dict(line.split("\t") for line in text.splitlines()[1:])


if __name__ == "__main__":
    from pathlib import Path

    from medunlearn.ontology.icd10cm import derive_icd10cm_terms, render_icd_terms_file

    target = Path(__file__).parent / "data" / OUT_OF_SCOPE_FILE
    target.write_text(render_icd_terms_file(derive_icd10cm_terms(OUT_OF_SCOPE_CHAPTERS)))
    print(f"wrote {target}")
