"""Stage 1: the abstracts reader on every format, tiny files in tmp_path, and on the real shared files."""

import doctest
import gzip
import json

import pytest

from medunlearn.biodivergence.mining import read
from medunlearn.biodivergence.mining.read import (
    ABSTRACT_COLUMNS,
    AbstractFormatError,
    UnknownAbstractFormatError,
    detect_format,
    normalise_section_label,
    read_abstracts,
)
from medunlearn.errors import InputError, MissingInputError

PUBMED_XML = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE PubmedArticleSet>
<PubmedArticleSet>
  <PubmedArticle>
    <MedlineCitation Status="MEDLINE" Owner="NLM">
      <PMID Version="1">111</PMID>
      <Article>
        <Journal><JournalIssue><PubDate><Year>2019</Year></PubDate></JournalIssue></Journal>
        <ArticleTitle>Colistin resistance in <i>E. coli</i>.</ArticleTitle>
        <Abstract>
          <AbstractText Label="INTRODUCTION" NlmCategory="BACKGROUND">Colistin is last.</AbstractText>
          <AbstractText Label="PATIENTS AND METHODS" NlmCategory="METHODS">We tested 200.</AbstractText>
          <AbstractText Label="FINDINGS" NlmCategory="RESULTS">Resistance rose to <b>12%</b>.</AbstractText>
          <AbstractText Label="INTERPRETATION" NlmCategory="CONCLUSIONS">Stewardship is needed.</AbstractText>
        </Abstract>
      </Article>
    </MedlineCitation>
  </PubmedArticle>
  <PubmedArticle>
    <MedlineCitation>
      <PMID Version="1">222</PMID>
      <Article>
        <Journal><JournalIssue><PubDate><MedlineDate>1998 Dec-1999 Jan</MedlineDate></PubDate></JournalIssue>
        </Journal>
        <ArticleTitle>An unstructured abstract.</ArticleTitle>
        <Abstract><AbstractText>Statins lowered LDL cholesterol in older women.</AbstractText></Abstract>
      </Article>
    </MedlineCitation>
  </PubmedArticle>
</PubmedArticleSet>
"""

PUBMEDQA = {
    "123": {
        "QUESTION": "Does aspirin reduce pain?",
        "CONTEXTS": ["Pain is common.", "We randomised 100 adults.", "Aspirin reduced pain scores."],
        "LABELS": ["BACKGROUND", "MATERIALS AND METHODS", "RESULTS"],
        "MESHES": ["Aspirin"],
        "YEAR": "2011",
        "final_decision": "yes",
        "LONG_ANSWER": "Aspirin reduces pain in adults.",
    },
    "456": {
        "QUESTION": "Is X safe?",
        "CONTEXTS": ["X was given to 20 patients."],
        "LABELS": ["UNLABELLED"],
        "MESHES": [],
        "YEAR": "",
        "final_decision": "maybe",
        "LONG_ANSWER": "X appears safe.",
    },
}

NCBI = """
10192393|t|A common human skin tumour is caused by activating mutations in beta-catenin.
10192393|a|WNT signalling orchestrates a number of developmental programs.
10192393\t15\t26\tskin tumour\tDiseaseClass\tD012878

9949209|t|Genetic mapping of the copper toxicosis locus.
9949209|a|Abnormal hepatic copper accumulation is an inherited disorder.
9949209\t23\t39\tcopper toxicosis\tModifier\tOMIM:215600
"""


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_pubmed_xml_sections_years_and_markup(tmp_path):
    frame = read_abstracts([_write(tmp_path / "set.xml", PUBMED_XML)])
    assert list(frame.columns) == list(ABSTRACT_COLUMNS)
    assert frame["pmid"].tolist() == ["111", "222"] and frame["row"].tolist() == [1, 2]
    first = frame.iloc[0]
    assert first["title"] == "Colistin resistance in E. coli."  # inline markup kept as text
    assert [s["label"] for s in first["sections"]] == ["background", "methods", "results", "conclusions"]
    assert first["abstract"] == (
        "Colistin is last. We tested 200. Resistance rose to 12%. Stewardship is needed."
    )
    assert first["year"] == 2019 and isinstance(first["year"], int)
    assert frame.iloc[1]["year"] == 1998  # MedlineDate: the first year
    assert frame.iloc[1]["sections"] == [
        {"label": "unlabelled", "text": "Statins lowered LDL cholesterol in older women."}
    ]
    assert frame["domain"].tolist() == [None, None]
    # gzip files stream the same way
    gz = tmp_path / "set.xml.gz"
    gz.write_bytes(gzip.compress(PUBMED_XML.encode()))
    assert read_abstracts([gz])["abstract"].tolist() == frame["abstract"].tolist()


def test_jsonl_csv_keep_user_domains_and_years(tmp_path):
    lines = [
        {"pmid": 5, "title": "T", "abstract": "Beta blockers cut mortality.", "domain": "cardiovascular"},
        {
            "pmid": "6",
            "title": "S",
            "year": 2020,
            "sections": [{"label": "RESULTS", "text": "A fell."}, {"label": "Conclusion", "text": "B."}],
        },
    ]
    jsonl = _write(tmp_path / "a.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n\n")
    csv_text = (
        'pmid,title,abstract,domain,year\n7,"A, title","Line one.\nLine two.",cardiovascular,2001\n8,U,V,,\n'
    )
    csv_path = _write(tmp_path / "b.csv", csv_text)
    frame = read_abstracts([jsonl, csv_path])
    assert frame["pmid"].tolist() == ["5", "6", "7", "8"]
    assert frame["domain"].tolist() == ["cardiovascular", None, "cardiovascular", None]
    assert frame["year"].tolist() == [None, 2020, 2001, None]
    assert frame.iloc[1]["abstract"] == "A fell. B."
    assert [s["label"] for s in frame.iloc[1]["sections"]] == ["results", "conclusions"]
    assert frame.iloc[2]["title"] == "A, title" and frame.iloc[2]["abstract"] == "Line one. Line two."
    assert frame["source"].tolist() == [str(jsonl)] * 2 + [str(csv_path)] * 2
    assert frame["row"].tolist() == [1, 2, 1, 2]


def test_pubmedqa_contexts_labels_and_long_answer(tmp_path):
    frame = read_abstracts([_write(tmp_path / "ori_pqal.json", json.dumps(PUBMEDQA, indent=4))])
    first = frame.iloc[0]
    assert first["pmid"] == "123" and first["title"] == "Does aspirin reduce pain?" and first["year"] == 2011
    assert [s["label"] for s in first["sections"]] == ["background", "methods", "results", "conclusions"]
    assert first["sections"][-1]["text"] == "Aspirin reduces pain in adults."
    assert first["abstract"].endswith("Aspirin reduced pain scores. Aspirin reduces pain in adults.")
    assert frame.iloc[1]["year"] is None
    assert [s["label"] for s in frame.iloc[1]["sections"]] == ["unlabelled", "conclusions"]


def test_ncbi_disease_documents_and_mentions(tmp_path):
    frame = read_abstracts([_write(tmp_path / "NCBIdevelopset_corpus.txt", NCBI)])
    assert frame["pmid"].tolist() == ["10192393", "9949209"]
    assert frame.iloc[1]["title"] == "Genetic mapping of the copper toxicosis locus."
    assert frame.iloc[1]["abstract"] == "Abnormal hepatic copper accumulation is an inherited disorder."


def test_format_detection_from_suffix_and_content(tmp_path):
    assert detect_format(_write(tmp_path / "x.xml", PUBMED_XML)) == "pubmed-xml"
    assert detect_format(_write(tmp_path / "noext1", PUBMED_XML)) == "pubmed-xml"
    assert detect_format(_write(tmp_path / "noext2", NCBI)) == "ncbi-disease"
    assert detect_format(_write(tmp_path / "noext3", json.dumps(PUBMEDQA, indent=2))) == "pubmedqa"
    assert detect_format(_write(tmp_path / "noext4", '{"pmid": "1", "abstract": "x"}\n')) == "jsonl"
    assert detect_format(_write(tmp_path / "noext5", "pmid,title,abstract\n1,t,a\n")) == "csv"
    # an explicit format wins over the suffix
    frame = read_abstracts([_write(tmp_path / "weird.dat", "pmid,title,abstract\n1,t,a b\n")], format="csv")
    assert frame["abstract"].tolist() == ["a b"]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "missing_pmid.csv",
            "pmid,title,abstract\n1,t,a\n,t,b\n",
            r"missing_pmid.csv: record 2 \(line 3\), field `pmid`",
        ),
        (
            "bad_year.csv",
            "pmid,title,abstract,year\n1,t,a,20x1\n",
            r"bad_year.csv: record 1 \(line 2\), field `year`",
        ),
        (
            "old_year.csv",
            "pmid,title,abstract,year\n1,t,a,1066\n",
            r"record 1 \(line 2\), field `year`: must be within",
        ),
        (
            "no_header.csv",
            "id,text\n1,a\n",
            r"no_header.csv: line 1 \(header\), field\(s\) \['pmid', 'title', 'abstract'\]",
        ),
        (
            "empty.jsonl",
            '{"pmid": "1", "abstract": "a"}\n\n{"pmid": "2", "abstract": "   "}\n',
            r"empty.jsonl: record 2 \(line 3\), field `abstract`: missing or empty",
        ),
        (
            "broken.jsonl",
            '{"pmid": "1", "abstract": "a"}\n{"pmid": \n',
            r"broken.jsonl: record 2 \(line 2\), field `json`",
        ),
        (
            "year_type.jsonl",
            '{"pmid": "1", "abstract": "a", "year": 2020.5}\n',
            r"record 1 \(line 1\), field `year`",
        ),
        (
            "bad.xml",
            PUBMED_XML.replace(
                "</ArticleTitle>\n        <Abstract><AbstractText>Statins",
                "\n<Abstract><AbstractText>Statins",
            ),
            r"bad.xml: line \d+, column \d+ \(after record 1\), field `xml`: malformed XML",
        ),
        (
            "nopmid.xml",
            PUBMED_XML.replace('<PMID Version="1">222</PMID>', ""),
            r"nopmid.xml: record 2, field `pmid`: missing or empty",
        ),
        (
            "noabstract.xml",
            PUBMED_XML.replace(
                "<Abstract><AbstractText>Statins lowered LDL cholesterol in older women."
                "</AbstractText></Abstract>",
                "",
            ),
            r"noabstract.xml: record 2, field `abstract`: missing",
        ),
        (
            "ncbi.txt",
            NCBI.replace("9949209|a|Abnormal hepatic copper accumulation is an inherited disorder.\n", ""),
            r"ncbi.txt: record 2 \(line 6\), field `abstract`: no `9949209\|a\|` line",
        ),
        (
            "qa.json",
            json.dumps({"1": {"QUESTION": "q", "CONTEXTS": ["a", "b"], "LABELS": ["X"], "YEAR": "2001"}}),
            r"qa.json: record 1, field `LABELS`: must be a list as long as CONTEXTS",
        ),
        (
            "qa_year.json",
            json.dumps({"1": {"QUESTION": "q", "CONTEXTS": ["a"], "LABELS": ["X"], "YEAR": "two thousand"}}),
            r"qa_year.json: record 1, field `year`: must be a four-digit year",
        ),
    ],
)
def test_bad_records_name_file_row_and_field(tmp_path, name, text, message):
    path = _write(tmp_path / name, text)
    with pytest.raises(AbstractFormatError, match=message) as error:
        read_abstracts([path])
    assert isinstance(error.value, InputError) and isinstance(error.value, ValueError)


def test_records_without_abstract_can_be_skipped_and_are_counted(tmp_path):
    no_abstract = PUBMED_XML.replace(
        "<Abstract><AbstractText>Statins lowered LDL cholesterol in older women.</AbstractText></Abstract>",
        "",
    )
    xml = _write(tmp_path / "some_without.xml", no_abstract)
    csv_path = _write(tmp_path / "c.csv", "pmid,title,abstract\n1,t,\n2,t,Aspirin reduced pain.\n")
    ncbi = _write(
        tmp_path / "n.txt",
        NCBI.replace("9949209|a|Abnormal hepatic copper accumulation is an inherited disorder.\n", ""),
    )
    frame = read_abstracts([xml, csv_path, ncbi], missing_abstract="skip")
    assert frame["pmid"].tolist() == ["111", "2", "10192393"]
    assert frame["row"].tolist() == [1, 2, 1]  # the record number in its file, skipped records counted
    assert frame.attrs["skipped_no_abstract"] == 3
    with pytest.raises(AbstractFormatError, match=r"c.csv: record 1 \(line 2\), field `abstract`"):
        read_abstracts([csv_path])
    with pytest.raises(AbstractFormatError, match=r"record 2 \(line 3\), field `pmid`"):  # still checked
        read_abstracts(
            [_write(tmp_path / "d.csv", "pmid,title,abstract\n1,t,a\n,t,\n")], missing_abstract="skip"
        )


def test_unknown_format_and_missing_file(tmp_path):
    path = _write(tmp_path / "notes.txt", "just some words\n")
    with pytest.raises(
        UnknownAbstractFormatError, match=r"notes.txt: .*pubmed-xml, jsonl, csv, pubmedqa, ncbi-disease"
    ):
        read_abstracts([path])
    with pytest.raises(UnknownAbstractFormatError, match="unknown format 'tsv'; accepted: pubmed-xml"):
        read_abstracts([path], format="tsv")
    with pytest.raises(MissingInputError, match="absent.xml does not exist"):
        read_abstracts([tmp_path / "absent.xml"])


def test_section_labels():
    cases = {
        "BACKGROUND AND AIMS": "objective",
        "MAIN OUTCOME MEASURES": "methods",
        "MEASUREMENTS AND MAIN RESULTS": "results",
        "CONCLUSIONS AND RELEVANCE": "conclusions",
        "INTRODUCTION": "background",
        "": "unlabelled",
        "LIMITATIONS": "unlabelled",
    }
    assert {label: normalise_section_label(label) for label in cases} == cases
    assert normalise_section_label("FINDINGS", "UNASSIGNED") == "results"  # the label when no category


def test_doctests():
    assert doctest.testmod(read).failed == 0


@pytest.mark.integration
def test_real_shared_files(shared_data):
    qa = read_abstracts([shared_data / "pubmedqa" / "ori_pqal.json"])
    assert len(qa) == 1000 and qa["pmid"].is_unique
    assert qa["sections"].map(lambda s: s[-1]["label"]).eq("conclusions").all()  # LONG_ANSWER last
    assert qa["year"].dropna().between(1900, 2030).all()
    files = sorted((shared_data / "ncbi-disease").glob("NCBI*_corpus.txt"))
    counts = {path.name: len(read_abstracts([path])) for path in files}
    assert counts == {
        "NCBIdevelopset_corpus.txt": 100,
        "NCBItestset_corpus.txt": 100,
        "NCBItrainset_corpus.txt": 593,
    }
    both = read_abstracts([shared_data / "pubmedqa" / "ori_pqal.json", *files])
    assert len(both) == 1793 and (both["abstract"].str.len() > 0).all()
