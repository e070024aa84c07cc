"""Stage 3 of BioDivergence construction: rule-based claim extraction (docs: biodivergence-construction.md).

The paper [paper] extracts 527,907 claims from 139,792 of its 202,180 abstracts with a rule-based extractor
(69.1% of abstracts yield a claim; 2.61 claims per abstract over all abstracts) but does not publish the
rules. Ours [ours]:

1. **Sentences.** Each section of an abstract is split by ``pysbd`` (English, ``clean=False``), which keeps
   biomedical abbreviations (``vs.``, ``e.g.``, ``E. coli``, ``i.v.``) inside their sentence. Sentences
   are numbered 0, 1, ... across the whole abstract, in section order. Each section is split on its own
   (pysbd's list detection reads the whole text it is given, so joining sections would change sentences);
   large inputs are split by a pool of worker processes (``workers=``), in input order. [ours] Two of
   pysbd's steps are replaced by faster ones with the same output (:func:`_literal_char_spans`,
   :func:`_search_for_abbreviations_in_string`; held to pysbd's own by the tests and
   ``bench/bench_claims.py``): about half the CPU time of the first version on the shared abstracts.
2. **Cues.** One case-insensitive regular expression per cue family, run over all sentences at once
   (:data:`CUE_PATTERNS`; one scan of the sentences joined, :func:`_search_each`):

   - ``results_section`` / ``conclusions_section``: the sentence is in that section;
   - ``finding_verb``: showed, demonstrated, revealed, found, observed, indicated, suggested, confirmed,
     associated with, correlated, increased, decreased, reduced, improved, lowered, elevated, inhibited,
     enhanced, prevented, protected, predicted, led to, resulted in, contributed to, induced, caused,
     mediated, implicated, played a role, risk factor, effective / efficacy, outperformed, superior to,
     inferior to, did not differ, no difference / association / effect, failed to, related / linked to,
     consistent with;
   - ``comparison``: compared with / to, higher / lower / greater / less / more / better / worse than,
     more / less likely (frequent, common, effective, severe) than, versus / vs., in contrast to,
     relative to;
   - ``effect_size``: odds ratio, hazard ratio, relative risk, risk ratio, OR / HR / RR / aOR / aHR / IRR,
     95% CI, confidence interval, p < 0.05 (any p-value), significant(ly), n-fold;
   - ``hedge``: may, might, could, appears to, seems to, likely, possibly, potentially, suggestive;
   - ``conclusion_phrase``: in conclusion, we conclude, these / our results (findings, data) suggest /
     indicate / show, this study shows / demonstrates / suggests, taken together.

3. **The rule.** A sentence is a claim when all of these hold:

   - it has a *finding cue*: ``finding_verb``, ``comparison``, ``effect_size``, ``conclusion_phrase`` or
     ``conclusions_section`` (a conclusions section states findings; ``results_section`` and ``hedge``
     alone are not enough: "Of the 120 patients, 45% were women." is a result but no claim);
   - it is not in a ``methods`` or ``objective`` section (designs and aims, whatever their verbs);
   - it is not a design sentence (``design``: we aimed / investigated / enrolled ..., to determine /
     evaluate / assess ..., were randomised / enrolled / measured ..., the aim / purpose / objective) unless
     it also reports (``effect_size``, ``conclusion_phrase``, or a reporting verb: showed, demonstrated,
     revealed, found that, indicated, suggested, confirmed);
   - it is not a call for more work (``future_work``: further / future studies, ... are needed / warranted,
     ... is required to confirm, remains to be) unless it carries an ``effect_size``;
   - it is not a question (ends with "?");
   - it has :data:`MIN_WORDS` to :data:`MAX_WORDS` words (6 to 80).

``cues`` lists the families that fired on each kept sentence, so a later stage (pair ranking) can read
hedges and effect sizes without re-matching.
"""

from __future__ import annotations

import os
import re
from functools import cache, lru_cache

import numpy as np
import pandas as pd

from medunlearn.errors import InputError

MIN_WORDS = 6  # [ours] shorter fragments are headings, labels or split debris
MAX_WORDS = 80  # [ours] longer "sentences" are run-on lists or splitter failures
PAPER_FUNNEL = {  # [paper] arXiv 2606.11208: the claim extractor's figures
    "abstracts": 202_180,
    "abstracts_with_claims": 139_792,
    "claims": 527_907,
    "yield": 0.691,
    "claims_per_abstract": 2.61,
}
CLAIM_COLUMNS: tuple[str, ...] = (
    "claim_id",
    "pmid",
    "sentence_index",
    "section",
    "text",
    "cues",
    "domain",
    "year",
)


def _words(*alternatives: str) -> str:
    return r"\b(?:" + "|".join(alternatives) + r")\b"


# [ours] One pattern per cue family; matched case-insensitively except the upper-case ratio abbreviations.
CUE_PATTERNS: dict[str, str] = {
    "finding_verb": _words(
        r"show(?:s|ed|n|ing)?",
        r"demonstrat(?:e|es|ed|ing)",
        r"reveal(?:s|ed|ing)?",
        r"found",
        r"(?:was|were|is|are|been) observed",
        r"we observed",
        r"indicat(?:e|es|ed|ing)",
        r"suggest(?:s|ed|ing)?",
        r"confirm(?:s|ed|ing)?",
        r"associat(?:ed|ion|ions) (?:with|between)",
        r"(?:is|are|was|were) (?:not )?(?:significantly |strongly |closely )?(?:related|linked) to",
        r"(?:is|are|was|were) (?:not )?consistent with",
        r"correlat(?:e|es|ed|ing|ion|ions)",
        r"increas(?:e|es|ed|ing)",
        r"decreas(?:e|es|ed|ing)",
        r"reduc(?:e|es|ed|ing|tion|tions)",
        r"improv(?:e|es|ed|ing|ement|ements)",
        r"lower(?:s|ed|ing)",
        r"elevat(?:e|es|ed|ing)",
        r"inhibit(?:s|ed|ing)?",
        r"enhanc(?:e|es|ed|ing)",
        r"prevent(?:s|ed|ing)?",
        r"protect(?:s|ed|ing|ive)",
        r"predict(?:s|ed|ing|ive|or|ors)",
        r"(?:led|leads?) to",
        r"result(?:s|ed)? in",
        r"contribut(?:e|es|ed|ing) to",
        r"induc(?:e|es|ed|ing)",
        r"caus(?:e|es|ed|ing)",
        r"mediat(?:e|es|ed|ing)",
        r"implicat(?:e|es|ed|ing)",
        r"play(?:s|ed)? (?:a|an) (?:\w+ )?role",
        r"risk factors?",
        r"effective(?:ness)?",
        r"efficacy",
        r"outperform(?:s|ed)?",
        r"(?:superior|inferior) to",
        r"did not (?:differ|improve|reduce|increase|change|affect|predict)",
        r"no (?:significant |statistically significant )?"
        r"(?:difference|differences|association|effect|change)",
        r"failed to",
    ),
    "comparison": _words(
        r"compared (?:with|to)",
        r"in comparison (?:with|to)",
        r"(?:higher|lower|greater|less|more|better|worse|shorter|longer|faster|slower) than",
        r"(?:more|less) (?:likely|frequent|frequently|common|commonly|effective|severe|often) than",
        r"versus",
        r"vs\.?",
        r"in contrast (?:with|to)",
        r"relative to",
    ),
    "effect_size": _words(
        r"odds ratios?",
        r"hazard ratios?",
        r"relative risks?",
        r"risk ratios?",
        r"(?-i:a?OR|a?HR|RR|IRR)",
        r"(?:95|99) ?% ?CI",
        r"confidence intervals?",
        r"significant(?:ly)?",
        r"\d+(?:\.\d+)?-fold",
    )
    + r"|\bp\s*(?:<|>|=|≤|≥|<=)\s*0?\.\d+",
    "hedge": _words(
        r"may",
        r"might",
        r"could",
        r"appears? to",
        r"seems? to",
        r"likely",
        r"possibly",
        r"potentially",
        r"suggestive",
    ),
    "conclusion_phrase": _words(
        r"in conclusion",
        r"we conclude",
        r"(?:these|our|the present|the) (?:results|findings|data|observations) (?:suggest|indicate|show|"
        r"demonstrate|support|confirm|provide)",
        r"this (?:study|trial|analysis|work) (?:shows|demonstrates|suggests|indicates|provides)",
        r"taken together",
    ),
}
VETO_PATTERNS: dict[str, str] = {
    "design": _words(
        r"(?:the )?(?:aim|aims|purpose|objective|goal)s? of (?:this|the|our) (?:study|trial|work|analysis)",
        r"we (?:aimed|sought|investigated|examined|evaluated|assessed|analy[sz]ed|conducted|performed"
        r"|enrolled|recruited|included|measured|reviewed|studied|collected|explored|selected|randomi[sz]ed"
        r"|used|tested"
        r"|compared|hypothesi[sz]ed|wondered|explore|investigate|examine|evaluate|assess|describe|report on)",
        r"to (?:determine|investigate|evaluate|assess|examine|explore|identify|analy[sz]e|test|establish"
        r"|describe|characteri[sz]e|clarify|elucidate|compare|quantify|estimate|measure)",
        r"(?:was|were) (?:randomi[sz]ed|enrolled|recruited|included|excluded|collected|measured|assessed"
        r"|evaluated|examined|analy[sz]ed|reviewed|interviewed|followed|selected|divided|allocated|assigned"
        r"|stained|obtained|performed|conducted|recorded|calculated|administered|used|studied|surveyed)",
    ),
    "future_work": _words(
        r"further (?:studies|study|research|investigations?|trials|work|evaluation)",
        r"future (?:studies|research|trials|work)",
        r"more (?:research|studies)",
        r"(?:is|are) (?:needed|warranted)",
        r"(?:is|are) required to (?:confirm|determine|establish|clarify|assess|evaluate|investigate)",
        r"remains? to be",
    ),
}
REPORTING_PATTERN = _words(
    r"show(?:s|ed|n)",
    r"demonstrat(?:es|ed)",
    r"reveal(?:s|ed)",
    r"found that",
    r"we found",
    r"indicat(?:es|ed)",
    r"suggest(?:s|ed|ing)",
    r"confirm(?:s|ed)",
)
FINDING_FAMILIES = ("finding_verb", "comparison", "effect_size", "conclusion_phrase", "conclusions_section")
CUE_NAMES: tuple[str, ...] = ("results_section", "conclusions_section", *CUE_PATTERNS)
EXCLUDED_SECTIONS = ("methods", "objective")
PARALLEL_MIN_TEXTS = 10_000  # [ours] fewer section texts: split in-process (a spawned worker takes ~1-3 s)
TEXTS_PER_TASK = 500  # [ours] section texts per pool task: enough to amortise pickling, few to balance


class ClaimInputError(InputError):
    """Abstracts that claim extraction cannot read: a missing column or a bad ``sections`` value."""


_TRAILING_SPACE = re.compile(r"\s*")


def _literal_char_spans(segmenter, sentences: list[str]) -> list:
    r"""pysbd's ``Segmenter.sentences_with_char_spans`` with ``str.find`` for its regular expressions [ours].

    pysbd locates each sentence in the original text with ``re.finditer(re.escape(sentence) + r"\s*")``:
    one new pattern per sentence, compiled once and never reused, and so many that they push pysbd's few
    hundred reusable abbreviation patterns out of ``re``'s 512-entry cache, to be compiled again and again
    (on the shared abstracts this finder drops the compilations by 90% and the CPU time of extraction by
    about 40%). An escaped sentence is a literal, so its matches are ``str.find`` hits, each extended by
    the same ``\s*``; the search resumes where ``finditer`` resumes (at the match's end, one past an empty
    match). Same spans, same order; everything else, and so every boundary, is pysbd's own.
    """
    from pysbd.utils import TextSpan  # imported once by then: _segmenter() imported pysbd

    text = segmenter.original_text
    spans, prior_end = [], 0
    for sentence in sentences:
        position = 0
        while (start := text.find(sentence, position)) >= 0:
            end = _TRAILING_SPACE.match(text, start + len(sentence)).end()
            if end > prior_end:  # pysbd's rule: the first match that reaches past the previous sentence
                spans.append(TextSpan(text[start:end], start, end))
                prior_end = end
                break
            position = end if end > start else start + 1
    return spans


# [ours] The characters that Python's `re` matches with ``\s``, and those it matches with an ASCII letter
# under IGNORECASE besides the letter's two cases (checked against the engine in the tests): a line
# translated by this table holds " " + abbreviation exactly where pysbd's ``(?:^|\s)abbreviation`` matches.
_WHITESPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
_WHITESPACE += "\u2028\u2029\u202f\u205f\u3000"
_LETTER_FOLDS = {"\u0130": "i", "\u0131": "i", "\u212a": "k", "\u017f": "s"}
_FOLD = str.maketrans(
    {**{c: " " for c in _WHITESPACE}, **{chr(c): chr(c + 32) for c in range(65, 91)}, **_LETTER_FOLDS}
)
_PYSBD_VERSION = "0.3.4"  # the version whose AbbreviationReplacer method the fast one repeats


def _search_for_abbreviations_in_string(self, text):
    r"""pysbd 0.3.4's ``AbbreviationReplacer.search_for_abbreviations_in_string`` [ours: two shortcuts].

    For each of its 188 abbreviations found in a line, pysbd scans the line with
    ``findall(r"(?:^|\s|\r|\n)" + abbreviation, re.IGNORECASE)`` (most find nothing: "is" sits inside
    "this") and then with ``findall(r"(?<={" + abbreviation + "} ).{1}")``, whose lookbehind is the
    literal "{abbreviation} " (braces that are not a quantifier are literals). A plain-letter abbreviation
    absent after " " from the :data:`_FOLD`-translated line has no first match, and a line without the
    literal has no second one: both scans are skipped where they must find nothing, and run as pysbd's
    otherwise. The line changes inside the loop only from "." to "∯", which moves no letter or space, so
    one translation serves the whole line.

    Then pysbd rewrites the line once per match, with a substitution fixed by the matched text and whether
    the next word is capitalised; a repeat of one already applied is skipped. Each substitution turns
    every "." that its lookarounds allow into "∯", and a "." turning into "∯" can only make such a
    lookaround false (they test letters, spaces, digits and "."), except a lookbehind that holds "∯"
    itself, so a matched text with "∯" is never counted as applied. A skipped repeat would change nothing.
    """
    lowered = text.lower()
    folded, applied = None, set()
    for abbr in self.lang.Abbreviation.ABBREVIATIONS:
        stripped = abbr.strip()
        if stripped not in lowered:
            continue
        if stripped.isascii() and stripped.isalpha() and stripped.islower():
            if folded is None:
                folded = " " + text.translate(_FOLD)
            if " " + stripped not in folded:
                continue
        abbrev_match = re.findall(rf"(?:^|\s|\r|\n){stripped}", text, flags=re.IGNORECASE)
        if not abbrev_match:
            continue
        if "{" + stripped + "} " in text:
            char_array = re.findall(r"(?<={" + str(re.escape(stripped)) + "} ).{1}", text)
        else:
            char_array = []
        for ind, match in enumerate(abbrev_match):
            key = (match.strip(), ind < len(char_array) and char_array[ind].isupper())
            if key in applied:
                continue
            if "∯" not in match:
                applied.add(key)
            text = self.scan_for_replacements(text, match, ind, char_array)
    return text


@lru_cache(maxsize=1)
def _segmenter():
    """One pysbd ``Segmenter`` (English, ``clean=False``) with :func:`_literal_char_spans` as span finder
    and, on pysbd 0.3.4, :func:`_search_for_abbreviations_in_string` in its abbreviation replacer."""
    import pysbd
    from pysbd.lang.english import English

    segmenter_class = type(
        "LiteralSpanSegmenter", (pysbd.Segmenter,), {"sentences_with_char_spans": _literal_char_spans}
    )
    segmenter = segmenter_class(language="en", clean=False)
    if pysbd.__version__ == _PYSBD_VERSION and segmenter.language_module is English:
        replacer = type(
            "AbbreviationReplacer",
            (English.AbbreviationReplacer,),
            {"search_for_abbreviations_in_string": _search_for_abbreviations_in_string},
        )
        segmenter.language_module = type("English", (English,), {"AbbreviationReplacer": replacer})
    return segmenter


@lru_cache(maxsize=1)
def _reference_segmenter():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


@cache
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.IGNORECASE)


def _sentences(segmenter, text: str) -> list[str]:
    if not text or not text.strip():
        return []
    return [sentence.strip() for sentence in segmenter.segment(text) if sentence.strip()]


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` by ``pysbd`` (English, ``clean=False``), stripped, empty ones dropped.

    >>> split_sentences("Mortality was lower vs. controls (p < 0.01). E. coli strains were resistant.")
    ['Mortality was lower vs. controls (p < 0.01).', 'E. coli strains were resistant.']
    """
    return _sentences(_segmenter(), text)


def reference_split_sentences(text: str) -> list[str]:
    """:func:`split_sentences` through pysbd's unmodified ``Segmenter``: the slow baseline that tests and
    ``bench/bench_claims.py`` hold the fast path to, sentence for sentence."""
    return _sentences(_reference_segmenter(), text)


def _split_task(texts: list[str]) -> list[list[str]]:
    return [split_sentences(text) for text in texts]


def _pool_workers(workers: int | None, n_texts: int) -> int:
    if workers is None:
        if n_texts < PARALLEL_MIN_TEXTS:
            return 1
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        workers = cores
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"claim extraction: `workers` must be a positive int or None (got {workers!r})")
    return max(1, min(workers, -(-n_texts // TEXTS_PER_TASK)))


def split_texts(texts: list[str], workers: int | None = None) -> list[list[str]]:
    """:func:`split_sentences` of each text, in order. ``workers``: processes; ``None`` is one below
    :data:`PARALLEL_MIN_TEXTS` texts and one per available core above. Each text is split on its own
    whatever the workers, so the result never depends on them. Workers are spawned, so a script that
    uses them runs its work under ``if __name__ == "__main__":``.

    >>> split_texts(["Rates rose. They fell.", "", "Fig. 2 shows it."], workers=1)
    [['Rates rose.', 'They fell.'], [], ['Fig. 2 shows it.']]
    """
    texts = list(texts)
    workers = _pool_workers(workers, len(texts))
    if workers == 1:
        return _split_task(texts)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    tasks = [texts[start : start + TEXTS_PER_TASK] for start in range(0, len(texts), TEXTS_PER_TASK)]
    # spawn, as the study runner does: forking a process that holds torch or tokenizer threads is unsafe
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return [sentences for task in pool.map(_split_task, tasks) for sentences in task]


def sentence_table(abstracts: pd.DataFrame, workers: int | None = None) -> pd.DataFrame:
    """All sentences of all abstracts: ``pmid, sentence_index, section, text, domain, year``; ``workers`` as
    in :func:`split_texts`."""
    missing = [name for name in ("pmid",) if name not in abstracts.columns]
    if missing or not {"sections", "abstract"} & set(abstracts.columns):
        raise ClaimInputError(
            f"abstracts need `pmid` and `sections` (or `abstract`); got {list(abstracts.columns)}"
        )
    has_sections = "sections" in abstracts.columns
    n = len(abstracts)
    domains = abstracts["domain"].tolist() if "domain" in abstracts.columns else [None] * n
    years = abstracts["year"].tolist() if "year" in abstracts.columns else [None] * n
    owners, labels, texts = [], [], []  # one entry per section, in abstract then section order
    for position, pmid in enumerate(abstracts["pmid"].tolist()):
        if has_sections:
            sections = abstracts["sections"].iat[position]
            if not isinstance(sections, (list, tuple, np.ndarray)):
                raise ClaimInputError(f"abstract {pmid!r} (row {position}), field `sections`: must be a list")
        else:
            sections = [{"label": "unlabelled", "text": abstracts["abstract"].iat[position]}]
        for number, section in enumerate(sections):
            if not isinstance(section, dict) or not isinstance(section.get("text"), str):
                raise ClaimInputError(
                    f"abstract {pmid!r} (row {position}), field `sections[{number}]`: must be "
                    f'{{"label": str, "text": str}} (got {section!r:.80})'
                )
            owners.append(position)
            labels.append(section.get("label") or "unlabelled")
            texts.append(section["text"])
    rows: dict[str, list] = {
        name: [] for name in ("pmid", "sentence_index", "section", "text", "domain", "year")
    }
    pmids = abstracts["pmid"].tolist()
    previous, index = None, 0
    for position, label, sentences in zip(owners, labels, split_texts(texts, workers=workers)):
        if position != previous:
            previous, index = position, 0
        for sentence in sentences:
            rows["pmid"].append(pmids[position])
            rows["sentence_index"].append(index)
            rows["section"].append(label)
            rows["text"].append(sentence)
            rows["domain"].append(domains[position])
            rows["year"].append(years[position])
            index += 1
    table = pd.DataFrame({name: pd.Series(values, dtype=object) for name, values in rows.items()})
    table["sentence_index"] = table["sentence_index"].astype("int64")
    return table


def cue_matrix(sentences: pd.DataFrame) -> pd.DataFrame:
    """Boolean frame, one column per cue family and veto (``design``, ``future_work``, ``reporting``)."""
    text = sentences["text"].astype(str)
    section = sentences["section"].astype(str)
    columns = {
        "results_section": section.eq("results"),
        "conclusions_section": section.eq("conclusions"),
    }
    texts = text.tolist()
    for name, pattern in {**CUE_PATTERNS, **VETO_PATTERNS, "reporting": REPORTING_PATTERN}.items():
        columns[name] = pd.Series(_search_each(_compiled(pattern), texts), index=sentences.index)
    return pd.DataFrame(columns, index=sentences.index)


# [ours] No cue pattern can match it or look past it: they hold no ".", negated class, \W, \S, \D, anchor
# or lookaround (a test checks).
_SEPARATOR = "\x00"


def _search_each(pattern: re.Pattern, texts: list[str]) -> np.ndarray:
    r"""``pattern.search(text) is not None`` for each text, from one scan of the texts joined by
    :data:`_SEPARATOR`: a match cannot run across it, and ``\b`` sees it as it sees a text's end. Texts
    holding the separator, or a match that does run across it, fall back to one search per text.

    >>> _search_each(re.compile(r"\bp\s*<\s*0?\.\d+"), ["p < 0.05", "up < 0.1", "p", "< 0.1", "", "P<.01"])
    array([ True, False, False, False, False, False])
    """
    found = np.zeros(len(texts), dtype=bool)
    if not texts:
        return found
    joined = _SEPARATOR.join(texts)
    if joined.count(_SEPARATOR) != len(texts) - 1:
        return np.array([pattern.search(text) is not None for text in texts], dtype=bool)
    starts = np.cumsum([0] + [len(text) + 1 for text in texts[:-1]])
    spans = [match.span() for match in pattern.finditer(joined)]
    if any(_SEPARATOR in joined[start:end] for start, end in spans):
        return np.array([pattern.search(text) is not None for text in texts], dtype=bool)
    if spans:
        found[np.searchsorted(starts, [start for start, _ in spans], side="right") - 1] = True
    return found


def claim_mask(sentences: pd.DataFrame, cues: pd.DataFrame | None = None) -> np.ndarray:
    """True for the sentences the rule of the module docstring keeps as claims."""
    cues = cue_matrix(sentences) if cues is None else cues
    text = sentences["text"].astype(str)
    n_words = text.str.split().str.len().to_numpy()
    finding = cues[list(FINDING_FAMILIES)].any(axis=1).to_numpy()
    reports = (cues["effect_size"] | cues["conclusion_phrase"] | cues["reporting"]).to_numpy()
    design = cues["design"].to_numpy() & ~reports
    future = cues["future_work"].to_numpy() & ~cues["effect_size"].to_numpy()
    excluded = sentences["section"].isin(EXCLUDED_SECTIONS).to_numpy()
    question = text.str.rstrip().str.endswith("?").to_numpy()
    in_window = (n_words >= MIN_WORDS) & (n_words <= MAX_WORDS)
    return finding & ~design & ~future & ~excluded & ~question & in_window


def extract_claims(abstracts: pd.DataFrame, workers: int | None = None) -> pd.DataFrame:
    """The claims of ``abstracts`` (stage 1's frame), one row each, in :data:`CLAIM_COLUMNS`; ``workers``
    as in :func:`split_texts` (the output never depends on it).

    >>> abstracts = pd.DataFrame({"pmid": ["7"], "sections": [[
    ...     {"label": "methods", "text": "We enrolled 200 adults with migraine in a randomised trial."},
    ...     {"label": "results",
    ...      "text": "Aspirin reduced pain compared with placebo (p < 0.01). The mean age was 41."},
    ... ]], "domain": ["neurology"], "year": [2020]})
    >>> claims = extract_claims(abstracts)
    >>> claims[["claim_id", "section", "text"]].values.tolist()
    [['7:1', 'results', 'Aspirin reduced pain compared with placebo (p < 0.01).']]
    >>> list(claims.loc[0, "cues"])
    ['results_section', 'finding_verb', 'comparison', 'effect_size']
    """
    return claims_from_sentences(sentence_table(abstracts, workers=workers))


def claims_from_sentences(sentences: pd.DataFrame) -> pd.DataFrame:
    """The claims among the rows of a :func:`sentence_table`, in :data:`CLAIM_COLUMNS`."""
    cues = cue_matrix(sentences)
    keep = claim_mask(sentences, cues)
    claims = sentences.loc[keep].reset_index(drop=True)
    fired = cues.loc[keep, list(CUE_NAMES)].to_numpy()
    names = np.array(CUE_NAMES, dtype=object)
    claims["cues"] = pd.Series([names[row].tolist() for row in fired], dtype=object)
    claims["claim_id"] = claims["pmid"].astype(str) + ":" + claims["sentence_index"].astype(str)
    return claims[list(CLAIM_COLUMNS)]


def claim_yield(abstracts: pd.DataFrame, claims: pd.DataFrame) -> dict:
    """The extractor's funnel beside the paper's: yield = abstracts with a claim / abstracts; claims per
    abstract = claims / abstracts, over *all* abstracts as the paper counts (527,907 / 202,180 = 2.61).

    >>> abstracts = pd.DataFrame({"pmid": ["1", "2", "3", "4"]})
    >>> claims = pd.DataFrame({"pmid": ["1", "1", "3"]})
    >>> figures = claim_yield(abstracts, claims)
    >>> names = ("abstracts", "abstracts_with_claims", "claims", "yield", "claims_per_abstract")
    >>> {name: figures[name] for name in names}
    {'abstracts': 4, 'abstracts_with_claims': 2, 'claims': 3, 'yield': 0.5, 'claims_per_abstract': 0.75}
    >>> paper = figures["paper"]
    >>> paper["yield"]
    0.691
    """
    n_abstracts = len(abstracts)
    pmids = abstracts["pmid"].astype(str)
    with_claims = int(pmids[pmids.isin(set(claims["pmid"].astype(str)))].nunique())
    return {
        "abstracts": int(n_abstracts),
        "abstracts_with_claims": with_claims,
        "claims": int(len(claims)),
        "yield": with_claims / n_abstracts if n_abstracts else 0.0,
        "claims_per_abstract": len(claims) / n_abstracts if n_abstracts else 0.0,
        "paper": dict(PAPER_FUNNEL),
    }
