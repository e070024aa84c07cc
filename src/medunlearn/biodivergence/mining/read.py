"""Stage 1 of BioDivergence construction: read abstracts from the formats biomedical corpora come in.

``read_abstracts(paths)`` returns one row per abstract, whatever the source format (docs:
biodivergence-construction.md; the paper's pipeline in docs: benchmarks/biodivergence.md):

========== ============================================================================================
column     meaning
========== ============================================================================================
pmid       the article id (a PubMed id in the public formats; any non-empty id in CSV / JSON Lines)
title      the title ("" when the format has none; PubMedQA's question, which is built from the title)
abstract   the text: the sections' texts joined with one space
sections   list of ``{"label", "text"}``; ``label`` one of :data:`SECTION_LABELS`
domain     the domain given by the input, or None (stage 4 assigns one)
year       publication year, or None
source     the file it came from
row        1-based record number within that file
========== ============================================================================================

Formats [ours] (``format=`` names one; by default it is detected from the suffix, then the content):

- ``pubmed-xml``: a PubMed ``PubmedArticleSet`` (``.xml``, ``.xml.gz``), streamed with
  :func:`xml.etree.ElementTree.iterparse` so a baseline file of 30,000 articles never sits in memory as a
  tree. Section labels come from ``AbstractText/@NlmCategory`` where PubMed gives one, else from ``@Label``.
- ``jsonl``: one JSON object a line with ``pmid``, ``title``, ``abstract`` and optional ``domain``, ``year``
  and ``sections`` (a list of ``{"label", "text"}``, which then replaces ``abstract``).
- ``csv``: a header with ``pmid, title, abstract`` and optional ``domain, year``.
- ``pubmedqa``: PubMedQA's ``ori_pqal.json`` (a dict keyed by PMID): ``CONTEXTS`` with ``LABELS`` are the
  sections, ``LONG_ANSWER`` is the conclusions section, ``QUESTION`` the title, ``YEAR`` the year.
- ``ncbi-disease``: the NCBI Disease corpus (``PMID|t|title``, ``PMID|a|abstract``, mention lines, a blank
  line between documents).

A bad record raises :class:`AbstractFormatError` naming the file, the record (and line where the format has
lines) and the field; records are never skipped silently. Section labels are normalised by
:func:`normalise_section_label` (``"MATERIALS AND METHODS"`` → ``methods``).
"""

from __future__ import annotations

import gzip
import json
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import pandas as pd

from medunlearn.errors import FileContentError, InputError, MissingInputError
from medunlearn.utils.user_files import (
    csv_dict_reader,
    encoding_of,
    not_a_file,
    open_maybe_gzip,
    parse_json,
    read_text,
    text_lines,
)

SECTION_LABELS: tuple[str, ...] = (
    "background",
    "objective",
    "methods",
    "results",
    "conclusions",
    "unlabelled",
)
FORMATS: tuple[str, ...] = ("pubmed-xml", "jsonl", "csv", "pubmedqa", "ncbi-disease")
ABSTRACT_COLUMNS: tuple[str, ...] = (
    "pmid",
    "title",
    "abstract",
    "sections",
    "domain",
    "year",
    "source",
    "row",
)
YEAR_RANGE = (1800, 2100)  # [ours] a year outside it is a bad field, not a date to guess at

# [ours] Free-text section headings to the six labels; the first rule that matches wins, so a mixed heading
# ("METHODS AND RESULTS") takes the later stage of the abstract, where its claims are.
_SECTION_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("conclusions", re.compile(r"conclu|interpretation|implication|discussion|comment|significance")),
    ("results", re.compile(r"result|finding")),
    (
        "methods",
        re.compile(
            r"method|design|setting|patient|participant|subject|intervention|measure|material|population"
            r"|data (?:source|extraction|collection)|study selection|case|sample|procedure|eligib|search"
        ),
    ),
    ("objective", re.compile(r"objective|aim|purpose|hypothes|object\b|goal|question")),
    ("background", re.compile(r"background|introduction|context|rationale")),
)
_NLM_CATEGORIES = {
    "BACKGROUND": "background",
    "OBJECTIVE": "objective",
    "METHODS": "methods",
    "RESULTS": "results",
    "CONCLUSIONS": "conclusions",
}


class AbstractFormatError(InputError):
    """A record that does not follow its format; the message names the file, the record/line and the field."""


class UnknownAbstractFormatError(InputError):
    """A file whose format is neither given nor recognisable; the message lists the formats accepted."""


def normalise_section_label(label: str | None, nlm_category: str | None = None) -> str:
    """One of :data:`SECTION_LABELS` for a section heading (PubMed's ``NlmCategory`` wins where given).

    >>> normalise_section_label("MATERIALS AND METHODS")
    'methods'
    >>> normalise_section_label("Methods and results")
    'results'
    >>> normalise_section_label("Whatever", nlm_category="CONCLUSIONS")
    'conclusions'
    >>> normalise_section_label(None)
    'unlabelled'
    """
    if nlm_category and nlm_category.upper() in _NLM_CATEGORIES:
        return _NLM_CATEGORIES[nlm_category.upper()]
    text = (label or "").strip().lower()
    if not text:
        return "unlabelled"
    for name, pattern in _SECTION_RULES:
        if pattern.search(text):
            return name
    return "unlabelled"


class _Location:
    """Where a record is, for error messages: the file, the record number and optionally a line."""

    def __init__(self, path: Path, row: int, line: int | None = None):
        self.path, self.row, self.line = path, row, line

    def fail(self, field: str, why: str) -> AbstractFormatError:
        where = f"record {self.row}" + (f" (line {self.line})" if self.line is not None else "")
        return AbstractFormatError(f"{self.path}: {where}, field `{field}`: {why}"[:600])


def _text(value, where: _Location, field: str, *, required: bool) -> str:
    if value is None or (isinstance(value, float) and value != value):  # None or NaN
        value = ""
    if not isinstance(value, str):
        raise where.fail(field, f"must be a string (got {type(value).__name__} {value!r:.80})")
    value = " ".join(value.split())
    if required and not value:
        raise where.fail(field, "missing or empty")
    return value


def _year(value, where: _Location) -> int | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
        if not re.fullmatch(r"\d{4}", value):
            raise where.fail("year", f"must be a four-digit year (got {value!r:.80})")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
        raise where.fail("year", f"must be an integer year (got {value!r:.80})")
    value = int(value)
    if not YEAR_RANGE[0] <= value <= YEAR_RANGE[1]:
        raise where.fail("year", f"must be within {YEAR_RANGE[0]}-{YEAR_RANGE[1]} (got {value})")
    return value


def _record(
    where: _Location,
    pmid,
    title,
    sections: list[tuple[str | None, str | None, object]] | None,
    abstract=None,
    domain=None,
    year=None,
    skip_missing: bool = False,
) -> dict | None:
    """Validate one record; ``sections`` holds ``(label, nlm_category, text)``, None for a plain abstract.

    A record without abstract text raises, or is None when ``skip_missing``."""
    if isinstance(pmid, int) and not isinstance(pmid, bool):
        pmid = str(pmid)  # an integer id is its digits, as in a pool file (docs/biodivergence.md)
    elif isinstance(pmid, (bool, float)) and pmid == pmid:  # NaN is a missing pmid, said so by _text
        raise where.fail(
            "pmid", f"must be a string or an integer: a float or a boolean is no id (got {pmid!r})"
        )
    pmid = _text(pmid, where, "pmid", required=True)
    title = _text(title, where, "title", required=False)
    if sections is None:
        text = _text(abstract, where, "abstract", required=not skip_missing)
        if not text:
            return None
        parts = [{"label": "unlabelled", "text": text}]
    else:
        parts = []
        for index, (label, category, text) in enumerate(sections):
            text = _text(text, where, f"sections[{index}].text", required=False)
            if text:
                parts.append({"label": normalise_section_label(label, category), "text": text})
        if not parts:
            if skip_missing:
                return None
            raise where.fail(
                "abstract",
                "missing or empty (no section has text); missing_abstract='skip' skips such records",
            )
    domain = _text(domain, where, "domain", required=False) or None
    return {
        "pmid": pmid,
        "title": title,
        "abstract": " ".join(part["text"] for part in parts),
        "sections": parts,
        "domain": domain,
        "year": _year(year, where),
        "source": str(where.path),
        "row": where.row,
    }


def _lines(path: Path) -> Iterator[str]:
    """The file's lines, decoded by the shared reader (gzip looked through, a byte-order mark honoured, bytes
    that are not UTF-8 named with their line)."""
    return text_lines(path)


def _open_binary(path: Path):
    """Decompressed when the file is gzip; a ``.gz`` name that is not gzip is a named error."""
    return open_maybe_gzip(path)


def _read_file(path: Path, format: str | None, skip_missing: bool) -> Iterator[dict | None]:
    """One file's records, with a damaged gzip stream of an XML file turned into a named error (the text
    formats are read by the shared reader, which names a bad line itself)."""
    try:
        yield from _READERS[format or detect_format(path)](path, skip_missing)
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise AbstractFormatError(f"{path}: the gzip stream is damaged or truncated ({error})") from error


# --- one reader per format -------------------------------------------------------------------------------


def _element_text(element: ET.Element | None) -> str:
    return "".join(element.itertext()) if element is not None else ""


def _pubmed_year(article: ET.Element) -> str | None:
    for path in (
        "MedlineCitation/Article/Journal/JournalIssue/PubDate/Year",
        "MedlineCitation/Article/ArticleDate/Year",
    ):
        found = article.find(path)
        if found is not None and (found.text or "").strip():
            return found.text.strip()
    medline_date = article.findtext("MedlineCitation/Article/Journal/JournalIssue/PubDate/MedlineDate")
    if medline_date:  # e.g. "1998 Dec-1999 Jan": the first year
        match = re.search(r"\d{4}", medline_date)
        return match.group(0) if match else medline_date
    return None


def _read_pubmed_xml(path: Path, skip_missing: bool = False) -> Iterator[dict | None]:
    row = 0
    with _open_binary(path) as handle:
        context = ET.iterparse(handle, events=("start", "end"))
        try:
            _, root = next(context)
            if root.tag != "PubmedArticleSet":
                raise AbstractFormatError(f"{path}: root element is <{root.tag}>, not <PubmedArticleSet>")
            for event, element in context:
                if event != "end" or element.tag not in ("PubmedArticle", "PubmedBookArticle"):
                    continue
                row += 1
                where = _Location(path, row)
                if element.tag == "PubmedBookArticle":
                    pmid = element.findtext("BookDocument/PMID")
                    title = _element_text(element.find("BookDocument/ArticleTitle"))
                    texts = element.findall("BookDocument/Abstract/AbstractText")
                    year = element.findtext("BookDocument/Book/PubDate/Year")
                else:
                    pmid = element.findtext("MedlineCitation/PMID")
                    title = _element_text(element.find("MedlineCitation/Article/ArticleTitle"))
                    texts = element.findall("MedlineCitation/Article/Abstract/AbstractText")
                    year = _pubmed_year(element)
                sections = [(t.get("Label"), t.get("NlmCategory"), _element_text(t)) for t in texts]
                yield _record(where, pmid, title, sections, year=year, skip_missing=skip_missing)
                # Streaming: drop what was read, so memory stays flat on a 30,000-article file.
                root.clear()
        except ET.ParseError as error:
            line, column = error.position
            raise AbstractFormatError(
                f"{path}: line {line}, column {column} (after record {row}), field `xml`: "
                f"malformed XML ({error})"
            ) from error


def _read_jsonl(path: Path, skip_missing: bool = False) -> Iterator[dict | None]:
    row = 0
    for line_number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        row += 1
        where = _Location(path, row, line_number)
        try:
            item = parse_json(line.rstrip("\r\n"), str(path), line_number)  # strict: a NaN is named too
        except FileContentError as error:
            raise where.fail(error.field_name or "json", error.problem) from error
        if not isinstance(item, dict):
            raise where.fail("json", f"must be an object (got {type(item).__name__})")
        sections = item.get("sections")
        if sections is not None:
            if not isinstance(sections, list) or not all(isinstance(s, dict) for s in sections):
                raise where.fail("sections", 'must be a list of {"label", "text"} objects')
            sections = [(s.get("label"), None, s.get("text")) for s in sections]
        yield _flat_record(where, item, sections, skip_missing)


def _flat_record(where: _Location, item: dict, sections, skip_missing: bool) -> dict | None:
    """A JSONL or CSV row (``pmid, title, abstract``, optional ``domain, year``) as a record."""
    return _record(
        where,
        item.get("pmid"),
        item.get("title"),
        sections,
        abstract=item.get("abstract"),
        domain=item.get("domain"),
        year=item.get("year"),
        skip_missing=skip_missing,
    )


def _read_csv(path: Path, skip_missing: bool = False) -> Iterator[dict | None]:
    reader = csv_dict_reader(path)
    missing = [name for name in ("pmid", "title", "abstract") if name not in (reader.fieldnames or [])]
    if missing:
        raise AbstractFormatError(
            f"{path}: line 1 (header), field(s) {missing}: missing; a CSV needs columns pmid, title, "
            f"abstract (optional: domain, year); got {reader.fieldnames}"
        )
    for row, item in enumerate(reader, start=1):
        where = _Location(path, row, reader.line_num)
        if None in item:
            raise where.fail("csv", f"more fields than the header's {len(reader.fieldnames)}")
        yield _flat_record(where, item, None, skip_missing)


def _read_pubmedqa(path: Path, skip_missing: bool = False) -> Iterator[dict | None]:
    data = parse_json(read_text(path), str(path))
    if not isinstance(data, dict):
        raise AbstractFormatError(f"{path}: record 1, field `json`: PubMedQA JSON is an object keyed by PMID")
    for row, (pmid, item) in enumerate(data.items(), start=1):
        where = _Location(path, row)
        if not isinstance(item, dict):
            raise where.fail("json", f"must be an object (got {type(item).__name__})")
        contexts, labels = item.get("CONTEXTS"), item.get("LABELS")
        if not isinstance(contexts, list) or not contexts:
            raise where.fail("CONTEXTS", "missing or not a non-empty list")
        if labels is None:
            labels = [None] * len(contexts)
        if not isinstance(labels, list) or len(labels) != len(contexts):
            raise where.fail("LABELS", f"must be a list as long as CONTEXTS ({len(contexts)})")
        sections = [(label, None, text) for label, text in zip(labels, contexts)]
        long_answer = item.get("LONG_ANSWER")
        if long_answer is not None:
            sections.append(("CONCLUSIONS", "CONCLUSIONS", long_answer))
        yield _record(
            where, pmid, item.get("QUESTION"), sections, year=item.get("YEAR"), skip_missing=skip_missing
        )


_NCBI_LINE = re.compile(r"^([^|\t]+)\|([ta])\|(.*)$")


def _read_ncbi_disease(path: Path, skip_missing: bool = False) -> Iterator[dict | None]:
    row = 0
    document: dict | None = None

    def finish(document: dict) -> dict | None:
        where = _Location(path, document["row"], document["line"])
        if document.get("a") is None and not skip_missing:
            raise where.fail("abstract", f"no `{document['pmid']}|a|` line after the title line")
        return _record(
            where,
            document["pmid"],
            document.get("t"),
            None,
            abstract=document.get("a"),
            skip_missing=skip_missing,
        )

    for line_number, line in enumerate(_lines(path), start=1):
        line = line.rstrip("\r\n")
        if not line.strip():
            if document is not None:
                yield finish(document)
                document = None
            continue
        match = _NCBI_LINE.match(line)
        if match:
            pmid, kind, text = match.groups()
            if kind == "t":
                if document is not None:
                    yield finish(document)
                row += 1
                document = {"pmid": pmid, "t": text, "row": row, "line": line_number}
            elif document is None or document["pmid"] != pmid:
                raise _Location(path, max(row, 1), line_number).fail(
                    "pmid", f"abstract line for {pmid!r} does not follow its `{pmid}|t|` title line"
                )
            else:
                document["a"] = text
        elif document is None or not line.startswith(document["pmid"] + "\t"):
            raise _Location(path, max(row, 1), line_number).fail(
                "line",
                f"neither `PMID|t|`, `PMID|a|` nor a mention line of the current document: {line!r:.80}",
            )
    if document is not None:
        yield finish(document)


_READERS = {
    "pubmed-xml": _read_pubmed_xml,
    "jsonl": _read_jsonl,
    "csv": _read_csv,
    "pubmedqa": _read_pubmedqa,
    "ncbi-disease": _read_ncbi_disease,
}


def detect_format(path: str | Path) -> str:
    """The format of ``path``: from its suffix (``.gz`` looked through), else from its first bytes."""
    path = Path(path)
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    suffix = suffixes[-1] if suffixes else ""
    by_suffix = {".xml": "pubmed-xml", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
    if suffix in by_suffix:
        return by_suffix[suffix]
    with _open_binary(path) as handle:
        raw = handle.read(4096)
    # Only to guess the format: the reader then decodes strictly and names a bad line.
    head = raw.decode(encoding_of(raw[:4]), errors="ignore").lstrip("\ufeff")
    stripped = head.lstrip()
    first_line = next((line for line in head.splitlines() if line.strip()), "")
    if stripped.startswith("<") and "PubmedArticleSet" in head:
        return "pubmed-xml"
    if _NCBI_LINE.match(first_line):
        return "ncbi-disease"
    if stripped.startswith("{"):
        try:
            first = json.loads(first_line)
        except json.JSONDecodeError:
            return "pubmedqa"  # a JSON document spread over lines: PubMedQA's dict keyed by PMID
        # One object on the first line: a JSON Lines record has record fields; PubMedQA's keys are PMIDs.
        return (
            "jsonl"
            if isinstance(first, dict) and {"pmid", "abstract", "sections"} & set(first)
            else "pubmedqa"
        )
    if re.match(r"^\ufeff?\"?pmid\"?\s*,", first_line, re.IGNORECASE):
        return "csv"
    raise UnknownAbstractFormatError(
        f"{path}: cannot tell its format from the suffix {suffix or '(none)'!r} or its first line; "
        f"pass format= one of {', '.join(FORMATS)}"
    )


def read_abstracts(
    paths: Sequence[str | Path] | str | Path,
    format: str | None = None,
    *,
    missing_abstract: Literal["error", "skip"] = "error",
) -> pd.DataFrame:
    r"""Read every record of ``paths`` into one frame with the columns of :data:`ABSTRACT_COLUMNS`.

    ``format`` (one of :data:`FORMATS`) applies to every file; None detects each file's own. Records keep
    the order of the files and, within a file, their order there. Raises :class:`MissingInputError` for a
    file that does not exist, :class:`UnknownAbstractFormatError` for one whose format cannot be told and
    :class:`AbstractFormatError` (file, record, field) for a bad record. A record without abstract text is
    a bad record too, unless ``missing_abstract="skip"`` (a PubMed baseline file has many articles without
    an abstract): then it is left out, ``row`` still counts it, and ``frame.attrs["skipped_no_abstract"]``
    says how many were left out.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "abstracts.csv"
    >>> _ = path.write_text("pmid,title,abstract,year\n1,A title,Aspirin reduced pain.,2020\n")
    >>> frame = read_abstracts([path])
    >>> frame.loc[0, ["pmid", "abstract", "year", "source"]].tolist()[:3], int(frame.loc[0, "row"])
    (['1', 'Aspirin reduced pain.', 2020], 1)
    >>> list(frame.loc[0, "sections"])
    [{'label': 'unlabelled', 'text': 'Aspirin reduced pain.'}]
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if format is not None and format not in _READERS:
        raise UnknownAbstractFormatError(f"unknown format {format!r}; accepted: {', '.join(FORMATS)}")
    if missing_abstract not in ("error", "skip"):
        raise InputError(f"missing_abstract must be 'error' or 'skip', got {missing_abstract!r}")
    records: list[dict] = []
    skipped = 0
    for path in map(Path, paths):
        if not path.is_file():
            raise MissingInputError(f"abstracts file {path} {not_a_file(path)}")
        for record in _read_file(path, format, missing_abstract == "skip"):
            if record is None:
                skipped += 1
            else:
                records.append(record)
    # Built column by column so ``year`` keeps Python ints beside None (a float column would turn 2011
    # into 2011.0) and ``sections`` keeps its lists.
    columns = {name: [record[name] for record in records] for name in ABSTRACT_COLUMNS}
    frame = pd.DataFrame(
        {
            name: pd.Series(values, dtype="int64" if name == "row" else object)
            for name, values in columns.items()
        }
    )
    frame.attrs["skipped_no_abstract"] = skipped
    return frame
