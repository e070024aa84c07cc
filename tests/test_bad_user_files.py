"""Bad user files through the commands that read them: exit 2, a message naming the file and (where there is
one) the line, and no output folder. One reader (medunlearn.utils.user_files) serves every command, so the
table below covers its properties, and a property-based case feeds it arbitrary bytes."""

from __future__ import annotations

import codecs
import gzip
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from medunlearn.cli import main
from medunlearn.errors import FileContentError, MissingInputError
from medunlearn.utils import user_files

NOTE = (
    "A 61-year-old man had crushing chest pain. Troponin was raised. Angiography showed an occluded artery."
)
CSV_HEADER = "patient_uid,title,patient,age,gender\n"
CSV_ROW = f'1-1,Myocardial infarction,"{NOTE}","[[61.0, \'year\']]",M\n'
QA_LINE = json.dumps({"patient_id": "1-1", "qa_type": "factual", "question": "Q?", "answer": "A."}) + "\n"


def build(tmp_path: Path, notes: Path, qa: Path) -> int:
    return main(
        ["amnesia", "build", "--source", "pmc-patients", "--notes", str(notes), "--qa", str(qa)]
        + ["--out", str(tmp_path / "out")]
    )


# (file name, content as bytes, the message part after the file name)
BAD_NOTES = [
    ("notes.csv", (CSV_HEADER + CSV_ROW).encode("utf-16-le"), r", line 1: holds NUL characters \(UTF-16"),
    ("notes.csv", CSV_HEADER.encode() + b"1-2,T,\xff\xfe bad,,M\n", r", line 2: is not UTF-8 text \(byte 7"),
    ("notes.csv", (CSV_HEADER + CSV_ROW + "2-1,T,note,,F,extra\n").encode(), r", row 2: more fields than"),
    ("notes.json", b'{"a": 1', r", line 1: invalid JSON at column 8"),
    ("notes.json", b"[\n  {},\n  3\n]", r", row 2: expected a JSON object, got a number"),
    ("notes.json", b"42", r": a notes or QA .json file must be a list or an object, not a number"),
    ("notes.json", b'{"1-1": "bare"}', r", field '1-1': expected a JSON object, got a string"),
    ("notes.jsonl", b'{"patient_uid": "1-1"}\n"bare"\n', r", line 2: expected a JSON object, got a string"),
    ("notes.jsonl", b'{"patient_uid": "1-1"}\n\n{"x": \n', r", line 3: invalid JSON at column 7"),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_NOTES)
def test_a_bad_notes_file_exits_2_naming_the_file_and_line(tmp_path, capsys, name, content, message):
    notes = tmp_path / name
    notes.write_bytes(content)
    qa = tmp_path / "qa.jsonl"
    qa.write_text(QA_LINE)
    assert build(tmp_path, notes, qa) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(rf"{name}{message}", err), err
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            (QA_LINE + '"a bare JSON string"\n').encode(),
            r"qa.jsonl, line 2: expected a JSON object, got a string",
        ),
        ((QA_LINE + "[1, 2]\n").encode(), r"qa.jsonl, line 2: expected a JSON object, got a list"),
        (QA_LINE.encode() + b"\x80\x81\n", r"qa.jsonl, line 2: is not UTF-8 text"),
    ],
)
def test_a_bad_qa_file_exits_2_naming_the_file_and_line(tmp_path, capsys, content, message):
    notes = tmp_path / "notes.csv"
    notes.write_text(CSV_HEADER + CSV_ROW)
    qa = tmp_path / "qa.jsonl"
    qa.write_bytes(content)
    assert build(tmp_path, notes, qa) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and re.search(message, err), err
    assert not (tmp_path / "out").exists()


def test_a_note_longer_than_the_limit_is_refused_before_it_is_parsed(tmp_path, capsys, monkeypatch):
    from medunlearn.amnesia import pmc_patients

    monkeypatch.setattr(pmc_patients, "MAX_NOTE_CHARACTERS", 500)
    long_note = "Fever and cough. " * 40  # 680 characters, over the lowered limit
    notes = tmp_path / "notes.csv"
    notes.write_text(CSV_HEADER + CSV_ROW + f"2-1,Pneumonia,{long_note},,F\n")
    qa = tmp_path / "qa.jsonl"
    qa.write_text(QA_LINE)
    assert build(tmp_path, notes, qa) == 2
    assert (
        "notes.csv, row 2, field 'patient': is 680 characters long; the limit is 500"
        in capsys.readouterr().err
    )


def test_the_note_limit_is_spacys_own_default():
    import spacy

    from medunlearn.amnesia.pmc_patients import MAX_NOTE_CHARACTERS

    assert MAX_NOTE_CHARACTERS == spacy.blank("en").max_length


@pytest.mark.parametrize(
    ("encoding", "bom"),
    [
        ("utf-8", b""),
        ("utf-8", codecs.BOM_UTF8),
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-32-be", codecs.BOM_UTF32_BE),
    ],
)
def test_text_with_a_byte_order_mark_is_decoded_and_the_mark_dropped(tmp_path, encoding, bom):
    path = tmp_path / "notes.csv"
    text = CSV_HEADER + CSV_ROW.replace("man", "man (naïve, 37 °C)")
    path.write_bytes(bom + text.encode(encoding))
    assert "".join(user_files.text_lines(path)) == text
    assert user_files.read_text(path) == text


def test_a_decoding_error_names_the_line_counted_from_1(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"one\ntwo\nthr\xe9e\n")
    with pytest.raises(FileContentError, match=r"x.txt, line 3: is not UTF-8 text \(byte 4"):
        list(user_files.text_lines(path))
    with pytest.raises(FileContentError, match=r"x.txt, line 3: is not UTF-8 text \(byte 12"):
        user_files.read_text(path)


def test_yaml_syntax_errors_give_line_and_column(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text("method: npo\nlearning_rate: [1e-5\nmax_steps: 3\n")
    with pytest.raises(FileContentError, match=r"recipe.yaml, line \d: invalid YAML at column \d+"):
        user_files.read_yaml(path)
    path.write_text("- a list\n- not a mapping\n")
    with pytest.raises(FileContentError, match=r"recipe.yaml: must hold a YAML mapping, not a list"):
        user_files.read_yaml(path)


def test_a_gz_name_must_hold_gzip_and_gzip_is_read_whatever_its_name(tmp_path):
    fake = tmp_path / "pubmed.xml.gz"
    fake.write_bytes(b"<xml>not compressed</xml>")
    with pytest.raises(FileContentError, match=r"pubmed.xml.gz: is named .gz but is not gzip-compressed"):
        user_files.open_maybe_gzip(fake)
    real = tmp_path / "pubmed.xml.gz"
    real.write_bytes(gzip.compress(b"<xml/>"))
    with user_files.open_maybe_gzip(real) as handle:
        assert handle.read() == b"<xml/>"


def test_a_truncated_parquet_file_is_a_named_error(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"x": list(range(1000))}), path)
    assert user_files.read_parquet(path).num_rows == 1000
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(FileContentError, match=r"train.parquet: is not a readable parquet file"):
        user_files.read_parquet(path)


def test_missing_files_and_folders_are_named(tmp_path):
    with pytest.raises(MissingInputError, match=r"nowhere.json: no such file"):
        user_files.read_json(tmp_path / "nowhere.json")
    with pytest.raises(FileContentError, match=r"is a folder, not a file"):
        user_files.read_json(tmp_path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=300), suffix=st.sampled_from([".json", ".jsonl", ".csv", ".yaml"]))
def test_arbitrary_bytes_are_read_or_refused_with_a_named_error(tmp_path, content, suffix):
    """Whatever the bytes, a reader returns a value or raises FileContentError naming the file: never another
    exception (UnicodeDecodeError, JSONDecodeError, yaml's ScannerError...)."""
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(content)
    readers = {
        ".json": lambda: user_files.read_json(path),
        ".jsonl": lambda: list(user_files.read_jsonl(path)),
        ".csv": lambda: list(user_files.text_lines(path)),
        ".yaml": lambda: user_files.read_yaml(path, expect=None),
    }
    try:
        readers[suffix]()
    except FileContentError as error:
        assert str(path) in str(error)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda folder: (folder / "notes.txt").write_text("not a model"), "not a model folder"),
        (lambda folder: None, "not a model folder"),
    ],
)
def test_a_folder_that_is_not_a_model_is_refused_by_name(tmp_path, make, message):
    from medunlearn.errors import InputError
    from medunlearn.models import load_model

    folder = tmp_path / "not-a-model"
    folder.mkdir()
    make(folder)
    with pytest.raises(InputError, match=rf"--model {folder}: {message}"):
        load_model(str(folder))
    with pytest.raises(InputError, match=rf"--model {folder / 'notes.txt'}: a file, not a model folder"):
        (folder / "notes.txt").write_text("x")
        load_model(str(folder / "notes.txt"))


@pytest.fixture(scope="module")
def amnesia_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("audit") / "amnesia"
    assert main(["amnesia", "build", "--out", str(out), "--patients", "20", "--seed", "0"]) == 0
    return out


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda folder: (folder / "amnesia_build.json").write_text('{"sizes": '),
            r"amnesia_build.json, line 1",
        ),
        (
            lambda folder: (folder / "amnesia_build.json").write_text("[]"),
            r"amnesia_build.json: the file must",
        ),
        (
            lambda folder: (parquet := next(folder.rglob("*.parquet"))).write_bytes(
                parquet.read_bytes()[:100]
            ),
            r"\.parquet: is not a readable parquet file",
        ),
    ],
)
def test_audit_of_a_damaged_folder_exits_2_naming_the_file(tmp_path, capsys, amnesia_folder, damage, message):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(amnesia_folder, folder)
    damage(folder)
    assert main(["amnesia", "audit", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and re.search(message, err), err


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "pubmed.xml.gz",
            b"<PubmedArticleSet></PubmedArticleSet>",
            r"pubmed.xml.gz: is named .gz but is not gzip",
        ),
        (
            "pubmed.xml.gz",
            gzip.compress(b"<PubmedArticleSet>" * 50)[:30],
            r"pubmed.xml.gz: the gzip stream is damaged",
        ),
        (
            "abstracts.csv",
            b"pmid,title,abstract,year\n1,T,caf\xe9 au lait,2020\n",
            r"abstracts.csv: is not UTF-8 text",
        ),
        ("abstracts.jsonl", b'{"pmid": "1"}\n\xff\xfe\n', r"abstracts.jsonl: is not UTF-8 text"),
    ],
)
def test_a_bad_abstracts_file_is_a_named_error(tmp_path, name, content, message):
    from medunlearn.biodivergence.mining.read import read_abstracts
    from medunlearn.errors import MedunlearnError

    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(MedunlearnError, match=message):
        read_abstracts([path])


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("pool.jsonl", b'{"pair_id": "1"}\n{"pair_id": \n', r"pool.jsonl, line 2: invalid JSON at column 13"),
        (
            "pool.jsonl",
            b'{"pair_id": "1"}\n["a list"]\n',
            r"pool.jsonl, line 2: expected a JSON object, got a list",
        ),
        ("pool.json", b'{"rows": []}', r"pool.json: a .json pool must be a list, not an object"),
        ("pool.json", b'[{"pair_id": "1"}, 7]', r"pool.json: row 2: expected a JSON object, got a number"),
        ("pool.jsonl", "caf\u00e9".encode("latin-1"), r"pool.jsonl, line 1: is not UTF-8 text"),
    ],
)
def test_a_bad_pool_file_is_named_by_line_counted_from_1(tmp_path, name, content, message):
    from medunlearn.biodivergence.pools import read_pool
    from medunlearn.errors import MedunlearnError

    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(MedunlearnError, match=message):
        read_pool(path)
