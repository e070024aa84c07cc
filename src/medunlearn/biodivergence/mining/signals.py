"""Divergence-sensitive signals of a claim pair, used to rank mined candidates (stage 5 of the construction
pipeline, docs/biodivergence.md).

The paper ranks similar claims by "polarity reversal, negation, entity mismatch, context-conflict cues"
[paper] without giving the rules; every rule and weight below is ours. The signals are ranking cues, not
classifiers: a pair that scores high is worth an annotator's (or the LLM labeller's) time.

Per pair (a, b):

* ``polarity_reversal`` ∈ {0, 1}: the two claims' *stances* oppose. A claim's stance (:func:`claim_stances`)
  is what it says about an effect:

  - ``null``: it reports no effect: a negator before an effect word within two words ("did not improve",
    "did not reduce", "not associated", "failed to increase", "not significantly different", "did not
    differ"), "no (significant) association / effect / benefit / correlation / difference / change",
    similar, comparable, unchanged, unaffected, unrelated, ineffective, (statistically) non-significant,
    or a p-value above 0.05;
  - ``up``: up words only (increase, higher, greater, elevated, improve, enhance, benefit, effective,
    efficacy, superior); ``down``: down words only (decrease, reduce, lower, decline, diminish, worsen,
    impair, inferior);
  - ``effect``: an effect without one direction: up and down words both, or a relation (associated,
    correlated, predicts, protective, risk factor, significant(ly), differed);
  - ``mixed``: a null and an effect in one claim ("reduced A but did not change B"); ``none``: no stance.

  Stances oppose when one is ``up`` and the other ``down``, or one reports an effect (up, down, effect) and
  the other none (``null``). So "X reduced mortality" against "X did not reduce mortality" is a reversal, and
  so are "associated with increased risk" against "associated with reduced risk", and "X reduced
  mortality" against "X improved survival": the cue is lexical. ``mixed`` and ``none`` oppose nothing.
* ``negation_mismatch`` ∈ {0, 1}: exactly one of the two claims holds a negator (no, not, none, neither,
  nor, never, without, cannot, lack of, absence of, unable to, failed to, did/does/do/was/were/is/are not,
  n't). "Not only", "whether or not", "if not" and "no longer than" are not negators. The NegEx termsets
  shipped with negspacy are tuned for clinical notes ("versus", "free", "declined" negate there) and would
  misfire on abstracts, hence our short list.
* ``entity_mismatch`` ∈ [0, 1]: the Jaccard distance 1 − |E_a ∩ E_b| / |E_a ∪ E_b| of the claims'
  biomedical entity sets (0 when neither has one). Entities are (1) the disease terms of
  :func:`medunlearn.ontology.vocabulary.default_vocabulary` (our curated terms plus ICD-10-CM titles from
  ``simple-icd-10-cm``; a nested term counts too: "breast cancer" gives "breast cancer" and "cancer");
  (2) drug-like words, by the WHO INN / USAN stems (…mab, …nib, …cillin, …mycin, …floxacin, …azole, …vir,
  …statin, …pril, …sartan, …olol, …platin, …taxel, …cycline, …penem, …formin, …); (3) gene- or
  protein-like symbols (an upper-case letter, then upper-case letters or digits, optionally a hyphen part:
  BRCA1, TP53, HER2, IL-6, PD-L1), less a stop list of statistical, design and assay abbreviations (CI, OR,
  RCT, PCR, MIC, …); (4) pathogens: abbreviated binomials ("E. coli") and common bacterial and fungal
  genera. All are compared lower-cased. ``shared_entities`` is |E_a ∩ E_b|: how many entities the claims
  share (evidence that they are about one question; the mismatch alone is 0 both for equal sets and for two
  claims without any entity).
* ``context_cues`` ∈ {0, …, 6}: the number of context families whose terms differ between the claims
  (their sets of canonical terms are unequal, a term on one side only included). Families, after the
  paper's axes: ``population`` (children, adults, elderly, women, pregnant, mice, …), ``geography``
  (countries, continents, rural/urban, low-/high-income), ``period`` (the decade of a year 1900–2099,
  the COVID-19 pandemic), ``dose`` (a number with a unit such as mg/kg, low/high dose, daily schedules),
  ``assay`` (PCR, ELISA, culture, sequencing, microdilution, immunohistochemistry, imaging, …) and
  ``design`` (randomised, cohort, case-control, cross-sectional, meta-analysis, in vitro, phase, …).
  ``context_families`` names them, comma-separated.

``divergence_score`` (ours) is the weighted sum

    divergence_score = w_p · polarity_reversal + w_n · negation_mismatch + w_e · entity_mismatch
                       + w_c · context_cues / 6

with the weights of :class:`SignalWeights` (default 0.40, 0.20, 0.15, 0.25; they sum to 1, so the score is
in [0, 1]). Polarity weighs most because a reversed finding on similar claims is the surface contradiction
the benchmark is about; entity mismatch weighs least because on its own it often means "different topic".

Everything is computed once per distinct text (compiled regular expressions over a pandas Series, and one
vocabulary look-up per distinct text, the only Python loop), then gathered for the pairs with numpy and
sparse indicator matrices.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from medunlearn.errors import InputError

__all__ = [
    "CONTEXT_FAMILIES",
    "SIGNAL_COLUMNS",
    "STANCES",
    "SignalWeights",
    "claim_stances",
    "divergence_signals",
    "stances_oppose",
]

SIGNAL_COLUMNS = ("polarity_reversal", "negation_mismatch", "entity_mismatch", "context_cues")


@dataclass(frozen=True)
class SignalWeights:
    """Weights of :func:`divergence_signals`' ``divergence_score`` (ours; see the module docstring).

    Parameters:
        polarity_reversal (`float`, defaults to `0.40`): weight of a reversed direction (0 or 1).
        negation_mismatch (`float`, defaults to `0.20`): weight of exactly one side being negated (0 or 1).
        entity_mismatch (`float`, defaults to `0.15`): weight of the entity Jaccard distance (in [0, 1]).
        context_cues (`float`, defaults to `0.25`): weight of the share of the six context families that
            differ (``context_cues / 6``).
    """

    polarity_reversal: float = 0.40
    negation_mismatch: float = 0.20
    entity_mismatch: float = 0.15
    context_cues: float = 0.25


_NEGATOR = (
    r"(?:\bno\b|\bnot\b|\bnone\b|\bneither\b|\bnor\b|\bnever\b|\bwithout\b|\bcannot\b|\black of\b|"
    r"\babsence of\b|\bunable to\b|\bfail(?:s|ed)? to\b|n't\b)"
)
_PSEUDO_NEGATION = re.compile(r"\bnot only\b|\bwhether or not\b|\bif not\b|\bno longer than\b")
_NEGATION = re.compile(_NEGATOR)
_DIRECTION_UP = (
    r"(?:increas\w*|higher|greater|elevat\w*|improv\w*|enhanc\w*|benefi\w*|effective\w*|efficac\w*|superior)"
)
_DIRECTION_DOWN = r"(?:decreas\w*|reduc\w*|lower\w*|declin\w*|diminish\w*|wors\w*|impair\w*|inferior)"
_RELATION = (
    r"(?:associat\w*|correlat\w*|predict\w*|protect\w*|risk factors?|significant\w*|differ(?:ed|s)?\b)"
)
# What a negator may deny (within two words): an effect, a change or a difference.
_DENIABLE = (
    rf"(?:{_DIRECTION_UP}|{_DIRECTION_DOWN}|{_RELATION}|affect\w*|effects?|alter\w*|chang\w*|influenc\w*)"
)
# A denial runs to the end of its clause ("no significant difference in the rate of decline", "not associated
# with increased mortality or decreased survival"): what it denies is not read as an effect of its own.
_CLAUSE_END = r"(?=[,;:()]|\bbut\b|\bwhereas\b|\bwhile\b|\balthough\b|\bhowever\b|$)"
_NULL = re.compile(
    rf"{_NEGATOR}\s+(?:[\w-]+\s+){{0,2}}?{_DENIABLE}[^,;:()]*?{_CLAUSE_END}"
    r"|\b(?:similar(?! to)|comparable|unchanged|unaffected|unrelated|ineffective\w*|non-?significant\w*|"
    r"equivalent|independent of)\b"
    r"|\bp\s?(?:>|≥|=)\s?0?\.(?:0[6-9]|[1-9])\d*|\bp\s?>\s?0?\.05\b"
)
_UP = re.compile(rf"\b{_DIRECTION_UP}")
_DOWN = re.compile(rf"\b{_DIRECTION_DOWN}")
_RELATED = re.compile(rf"\b{_RELATION}")
STANCES = ("none", "null", "up", "down", "effect", "mixed")
_EFFECTS = frozenset({"up", "down", "effect"})

_GENE_STOPLIST = frozenset(
    "CI OR HR RR AUC ROC SD SE IQR BMI RCT RCTS ICU ED US USA UK EU DNA RNA MRNA PCR QPCR MIC ELISA CT MRI "
    "PET ECG EEG WHO FDA NIH II III IV VI NS NA ANOVA GWAS SNP SNPS WGS OS PFS DFS QOL NNT AE AES SAE".split()
)
_DRUG_STEMS = (
    "mab|nib|cillin|mycin|micin|floxacin|oxacin|azole|vir|statin|pril|sartan|olol|parib|platin|taxel|"
    "rubicin|cycline|penem|bactam|gliptin|glitazone|prazole|triptan|azepam|oxetine|tidine|lukast|semide|"
    "thiazide|dronate|formin|caine|profen|tropin|setron|dipine"
)
_GENERA = (
    "staphylococcus|streptococcus|escherichia|klebsiella|pseudomonas|acinetobacter|enterococcus|"
    "enterobacter|mycobacterium|salmonella|shigella|campylobacter|clostridium|clostridioides|helicobacter|"
    "neisseria|haemophilus|listeria|legionella|candida|aspergillus|cryptococcus|plasmodium|toxoplasma"
)
_LOWERCASE_ENTITY_PATTERNS = (0, 3)  # matched on the lower-cased text; the symbols need the case
_ENTITY_PATTERNS = (
    re.compile(rf"\b([a-z]{{3,}}(?:{_DRUG_STEMS}))\b"),
    re.compile(r"(?<![\w-])([A-Z][A-Z0-9]{1,9}(?:-[A-Z0-9]{1,4})?)(?![\w-])"),
    re.compile(r"\b([A-Z]\.\s?[a-z]{3,})\b"),
    re.compile(rf"\b((?:{_GENERA})(?:\s+[a-z]{{4,}})?)\b"),
)

# One regex per family, one named group per canonical term, so the group that matched names the term.
CONTEXT_FAMILIES: dict[str, tuple[tuple[str, str], ...]] = {
    "population": (
        ("children", r"child(?:ren|hood)?|p(?:a)?ediatric|infant\w*|neonat\w*|newborn\w*"),
        ("adolescents", r"adolescen\w*|teenage\w*|youth"),
        ("adults", r"adults?|middle-aged"),
        ("elderly", r"elderly|older (?:adults|people|patients)|aged (?:65|70|75|80)"),
        ("women", r"wom[ae]n|female\w*"),
        ("men", r"\bm[ae]n\b|males?"),
        ("pregnant", r"pregnan\w*|maternal"),
        ("animals", r"mice|murine|rats?|porcine|bovine|canine|primates?|zebrafish|animals?"),
        ("healthy", r"healthy (?:volunteers|subjects|controls|individuals)"),
    ),
    "geography": (
        ("east_asia", r"chin(?:a|ese)|japan(?:ese)?|korea(?:n)?|taiwan(?:ese)?|hong kong"),
        ("south_asia", r"india(?:n)?|pakistan\w*|bangladesh\w*|nepal\w*|sri lanka\w*"),
        ("north_america", r"united states|u\.s\.|usa|americans?|canad(?:a|ian)|mexic(?:o|an)"),
        (
            "europe",
            r"europe(?:an)?|united kingdom|britain|british|england|german[y]?|france|french|"
            r"ital(?:y|ian)|spain|spanish|netherlands|dutch|swed(?:en|ish)|denmark|danish|norw\w*",
        ),
        ("africa", r"africa(?:n)?|sub-saharan|nigeria\w*|ethiopia\w*|kenya\w*|ugand\w*|tanzania\w*|ghana\w*"),
        ("latin_america", r"brazil\w*|argentin\w*|chile(?:an)?|colombia\w*|peru(?:vian)?|latin america\w*"),
        ("middle_east", r"iran(?:ian)?|turk(?:ey|ish)|saudi|egypt\w*|israel\w*|middle east\w*"),
        ("oceania", r"australia(?:n)?|new zealand"),
        ("rural", r"rural"),
        ("urban", r"urban"),
        ("low_income", r"low(?:er)?[- ](?:and middle[- ])?income|developing countr\w*|resource-limited"),
        ("high_income", r"high[- ]income|developed countr\w*"),
    ),
    "period": (
        ("decade", r"(?:19|20)\d\d\b"),  # a value term: the decade of the year ("2000s")
        ("covid_pandemic", r"pandemic|covid-19 era|lockdown"),
    ),
    "dose": (
        ("dose_value", r"\d+(?:\.\d+)?\s?(?:mg/kg|mg/m2|mg|µg|μg|mcg|g/day|iu|units?/kg|mmol|ml/kg)\b"),
        ("low_dose", r"low[- ]dose|lower doses?"),
        ("high_dose", r"high[- ]dose|higher doses?"),
        ("standard_dose", r"standard[- ]dose"),
        ("daily", r"once[- ]daily|twice[- ]daily|daily"),
        ("weekly", r"weekly"),
        ("single_dose", r"single[- ]dose"),
    ),
    "assay": (
        ("pcr", r"(?:rt-|q|real-time )?pcr"),
        ("elisa", r"elisa|immunoassay"),
        ("culture", r"cultur(?:e|ed|es|ing)|blood cultures?"),
        ("sequencing", r"sequencing|wgs|16s rrna|genotyping"),
        ("susceptibility_testing", r"disk diffusion|disc diffusion|broth microdilution|e-?test|\bmics?\b"),
        ("immunohistochemistry", r"immunohistochemi\w*|ihc"),
        ("flow_cytometry", r"flow cytometr\w*"),
        ("mass_spectrometry", r"mass spectrometr\w*|lc-ms\w*|maldi-tof"),
        ("microarray", r"microarray\w*|expression profiling"),
        ("western_blot", r"western blot\w*|immunoblot\w*"),
        (
            "imaging",
            r"\bmri\b|magnetic resonance|\bct\b|computed tomography|ultraso\w*|\bpet\b|radiograph\w*",
        ),
        ("serology", r"serolog\w*|antibod(?:y|ies) titers?"),
        ("self_report", r"questionnaire\w*|self-report\w*|survey\w*|interview\w*"),
        ("biopsy", r"biops\w*|histolog\w*"),
    ),
    "design": (
        ("randomized", r"randomi[sz]ed|randomi[sz]ation|\brcts?\b"),
        ("blinded", r"double-blind\w*|single-blind\w*|placebo-controlled|placebo"),
        ("cohort", r"cohort"),
        ("prospective", r"prospective\w*"),
        ("retrospective", r"retrospective\w*"),
        ("case_control", r"case-control|case control"),
        ("cross_sectional", r"cross-sectional"),
        ("meta_analysis", r"meta-analy\w*|systematic review\w*|pooled analys\w*"),
        ("case_report", r"case reports?|case series"),
        ("in_vitro", r"in vitro"),
        ("in_vivo", r"in vivo"),
        ("observational", r"observational"),
        ("trial_phase", r"phase (?:i{1,3}|iv|[1-4])\b"),
        ("registry", r"registry|register-based|population-based"),
        ("mendelian_randomization", r"mendelian randomi[sz]ation"),
    ),
}


def _family_regex(terms: tuple[tuple[str, str], ...]) -> tuple[str, list[str]]:
    names = [name for name, _ in terms]
    # One word-boundary test before the alternation: most positions are inside words and fail at once.
    pattern = r"\b(?:" + "|".join(rf"(?P<g{index}>{body})" for index, (_, body) in enumerate(terms)) + ")"
    return pattern, names


_FAMILY_REGEXES = {family: _family_regex(terms) for family, terms in CONTEXT_FAMILIES.items()}
# Terms whose canonical form is computed from the matched text (a family's first entry): "10 mg" differs
# from "20 mg", 2004 and 2019 are different decades.
_VALUE_TERMS = {
    "dose_value": lambda matched: matched.str.lower().str.replace(" ", ""),
    "decade": lambda matched: matched.str[:3] + "0s",
}


def _indicator(rows: np.ndarray, terms: np.ndarray, n_texts: int) -> sparse.csr_matrix:
    """Binary (n_texts × distinct terms) matrix: text i holds term j."""
    codes, uniques = pd.factorize(terms)
    matrix = sparse.csr_matrix(
        (np.ones(len(codes), dtype=np.float32), (rows, codes)), shape=(n_texts, max(len(uniques), 1))
    )
    matrix.data[:] = 1.0  # duplicates were summed
    return matrix


def _family_terms(lowered: pd.Series, family: str) -> sparse.csr_matrix:
    pattern, names = _FAMILY_REGEXES[family]
    found = lowered.str.extractall(pattern)
    if found.empty:
        return sparse.csr_matrix((len(lowered), 1), dtype=np.float32)
    group = found.notna().to_numpy().argmax(axis=1)
    rows = found.index.get_level_values(0).to_numpy()
    terms = np.asarray(names, dtype=object)[group]
    if names[0] in _VALUE_TERMS:
        matched = pd.Series(found.to_numpy()[np.arange(len(found)), group], dtype=object)
        values = _VALUE_TERMS[names[0]](matched.where(group == 0, "")).to_numpy(dtype=object)
        terms = np.where(group == 0, values, terms)
    return _indicator(rows, terms, len(lowered))


def _entity_terms(texts: pd.Series, lowered: pd.Series) -> sparse.csr_matrix:
    from medunlearn.ontology.vocabulary import default_vocabulary

    vocabulary = default_vocabulary()
    rows_parts, term_parts = [], []
    # The vocabulary matches word n-grams in Python: one call per distinct text, the only loop here.
    diseases = [vocabulary.find_terms(text) for text in texts]
    lengths = np.fromiter((len(found) for found in diseases), dtype=np.int64, count=len(diseases))
    rows_parts.append(np.repeat(np.arange(len(texts)), lengths))
    term_parts.append(np.asarray([term for found in diseases for term in found], dtype=object))
    for index, pattern in enumerate(_ENTITY_PATTERNS):
        found = (lowered if index in _LOWERCASE_ENTITY_PATTERNS else texts).str.extractall(pattern)
        if found.empty:
            continue
        values = found[0]
        if index == 1:
            values = values[~values.str.upper().str.replace("-", "").isin(_GENE_STOPLIST)]
            values = values[values.str.len() >= 3]  # two-letter capitals are mostly abbreviations
        rows_parts.append(values.index.get_level_values(0).to_numpy())
        term_parts.append(values.str.lower().str.replace(r"\s+", " ", regex=True).to_numpy(dtype=object))
    rows = np.concatenate(rows_parts)
    if not len(rows):
        return sparse.csr_matrix((len(texts), 1), dtype=np.float32)
    return _indicator(rows, np.concatenate(term_parts), len(texts))


def _as_series(name: str, values: Sequence[str]) -> pd.Series:
    series = pd.Series(np.asarray(values, dtype=object).ravel() if len(values) else [], dtype=object)
    if len(series) and pd.api.types.infer_dtype(series, skipna=False) != "string":
        bad = ~series.map(lambda value: isinstance(value, str))
        index = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(
            f"divergence_signals: {name}[{index}] is {type(series[index]).__name__}, not a string"
        )
    return series


def _rows_differ(matrix: sparse.csr_matrix, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(abs(matrix[a] - matrix[b]).sum(axis=1)).ravel() > 0


def _stances(masked: pd.Series) -> np.ndarray:
    """Stance of each (lower-cased, pseudo-negation-masked) text: the module docstring's rules."""
    null = masked.str.contains(_NULL, regex=True).to_numpy()
    rest = masked.str.replace(_NULL, " ", regex=True)
    up = rest.str.contains(_UP, regex=True).to_numpy()
    down = rest.str.contains(_DOWN, regex=True).to_numpy()
    related = rest.str.contains(_RELATED, regex=True).to_numpy()
    effect = up | down | related
    return np.select(
        [null & effect, null, up & ~down, down & ~up, effect],
        ["mixed", "null", "up", "down", "effect"],
        default="none",
    ).astype(object)


def claim_stances(texts: Sequence[str]) -> np.ndarray:
    """The stance of each claim: ``none``, ``null``, ``up``, ``down``, ``effect`` or ``mixed`` (the module
    docstring's rules [ours]).

    >>> claim_stances(["X reduced mortality.", "X did not reduce mortality.", "No significant difference "
    ...     "was found (p = 0.4).", "X was associated with Y.", "X reduced A but did not change B.",
    ...     "X was studied."]).tolist()
    ['down', 'null', 'null', 'effect', 'mixed', 'none']
    """
    lowered = _as_series("texts", texts).str.lower()
    return _stances(lowered.str.replace(_PSEUDO_NEGATION, " ", regex=True))


def stances_oppose(stance_a: np.ndarray, stance_b: np.ndarray) -> np.ndarray:
    """True where one stance is up and the other down, or one reports an effect and the other ``null``."""
    a, b = np.asarray(stance_a, dtype=object), np.asarray(stance_b, dtype=object)
    effect_a, effect_b = np.isin(a, list(_EFFECTS)), np.isin(b, list(_EFFECTS))
    signed = ((a == "up") & (b == "down")) | ((a == "down") & (b == "up"))
    return signed | (effect_a & (b == "null")) | (effect_b & (a == "null"))


def divergence_signals(
    text_a: Sequence[str], text_b: Sequence[str], *, weights: SignalWeights | None = None
) -> pd.DataFrame:
    """The divergence signals of each pair ``(text_a[i], text_b[i])`` and their weighted ``divergence_score``.

    Returns one row per pair with the columns ``polarity_reversal``, ``negation_mismatch`` (int 0/1),
    ``entity_mismatch`` (float in [0, 1]), ``context_cues`` (int 0–6), ``context_families`` (the differing
    families, comma-separated), ``divergence_score`` (float in [0, 1] with the default weights),
    ``stance_a`` / ``stance_b`` (:data:`STANCES`) and ``shared_entities`` (int). The rules and the formula
    are in the module docstring.

    >>> signals = divergence_signals(
    ...     ["Vancomycin improved survival in children in China."],
    ...     ["Vancomycin did not improve survival in adults in Brazil."],
    ... )
    >>> signals[["polarity_reversal", "negation_mismatch", "context_cues"]].iloc[0].tolist()
    [1, 1, 2]
    >>> round(float(signals["divergence_score"].iloc[0]), 4)  # 0.40 + 0.20 + 0.25 * 2 / 6
    0.6833
    """
    weights = weights or SignalWeights()
    a, b = _as_series("text_a", text_a), _as_series("text_b", text_b)
    if len(a) != len(b):
        raise InputError(f"divergence_signals: text_a has {len(a)} texts, text_b {len(b)}")
    n = len(a)
    codes, unique = pd.factorize(pd.concat([a, b], ignore_index=True))
    texts = pd.Series(unique, dtype=object).astype(str)
    ia, ib = codes[:n], codes[n:]

    # Patterns are lower-case and matched on lower-cased texts: about twice as fast as re.IGNORECASE.
    lowered = texts.str.lower()
    masked = lowered.str.replace(_PSEUDO_NEGATION, " ", regex=True)
    negated = masked.str.contains(_NEGATION, regex=True).to_numpy()
    stance = _stances(masked)
    polarity_reversal = stances_oppose(stance[ia], stance[ib]).astype(np.int64)
    negation_mismatch = (negated[ia] != negated[ib]).astype(np.int64)

    entities = _entity_terms(texts, lowered)
    sizes = np.asarray(entities.sum(axis=1), dtype=np.float64).ravel()
    shared = np.asarray(entities[ia].multiply(entities[ib]).sum(axis=1), dtype=np.float64).ravel()
    union = sizes[ia] + sizes[ib] - shared
    entity_mismatch = np.where(union > 0, 1.0 - shared / np.maximum(union, 1), 0.0)

    family_names = np.asarray([f"{family}," for family in CONTEXT_FAMILIES], dtype=object)
    differs = np.zeros((n, len(CONTEXT_FAMILIES)), dtype=bool)
    for column, family in enumerate(CONTEXT_FAMILIES):
        differs[:, column] = _rows_differ(_family_terms(lowered, family), ia, ib)
    context_cues = differs.sum(axis=1).astype(np.int64)
    families = (
        pd.Series(np.where(differs, family_names[None, :], "").sum(axis=1) if n else [], dtype=object)
        .astype(str)
        .str.rstrip(",")
    )

    score = (
        weights.polarity_reversal * polarity_reversal
        + weights.negation_mismatch * negation_mismatch
        + weights.entity_mismatch * entity_mismatch
        + weights.context_cues * context_cues / len(CONTEXT_FAMILIES)
    )
    return pd.DataFrame(
        {
            "polarity_reversal": polarity_reversal,
            "negation_mismatch": negation_mismatch,
            "entity_mismatch": entity_mismatch.astype(np.float64),
            "context_cues": context_cues,
            "context_families": families.to_numpy(dtype=object),
            "divergence_score": score.astype(np.float64),
            "stance_a": stance[ia],
            "stance_b": stance[ib],
            "shared_entities": shared.astype(np.int64),
        }
    )
