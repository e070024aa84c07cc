"""Bad user files through the commands that read them: exit 2, a message naming the file and (where there is
one) the line, and no output folder. One reader (medunlearn.utils.user_files) serves every command, so the
table below covers its properties, and a property-based case feeds it arbitrary bytes."""

from __future__ import annotations

import codecs
import gzip
import json
import math
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
    from medunlearn.amnesia.sources import pmc_patients

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

    from medunlearn.amnesia.sources.pmc_patients import MAX_NOTE_CHARACTERS

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
            r"abstracts.csv, line 2: is not UTF-8 text \(byte 8 of the line\)",
        ),
        (
            "abstracts.jsonl",
            b'{"pmid": "1", "title": "T", "abstract": "A."}\n\xff\xfe\n',
            r"abstracts.jsonl, line 2: is not UTF-8 text",
        ),
        (  # the line is counted in the decompressed text
            "abstracts.csv.gz",
            gzip.compress(b"pmid,title,abstract\n1,T,Aspirin.\n2,T,caf\xe9\n"),
            r"abstracts.csv.gz, line 3: is not UTF-8 text",
        ),
        (
            "abstracts.jsonl",
            b'{"pmid": "1", "title": "T", "abstract": "A."}\n{"pmid": "2", "year": NaN}\n',
            r"abstracts.jsonl: record 2 \(line 2\), field `year`: NaN is not a JSON number",
        ),
        (
            "ori_pqal.json",
            b'{\n "1": {"YEAR": Infinity}}',
            r"ori_pqal.json, line 2, field '1.YEAR': Infinity",
        ),
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


# ----- every reader goes through the one reader: MUSE, README cards, YAML keys, strict JSON (issue 22) ------


@pytest.fixture(scope="module")
def muse_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("muse") / "muse"
    assert main(["muse", "build", "--out", str(out), "--articles", "5", "--seed", "0"]) == 0
    return out


# (how knowmem/forget_qa.jsonl is rewritten from its UTF-8 text, the message part; None: it must be read)
MUSE_FILES = [
    (lambda text: text.encode("utf-16"), None),  # a byte-order mark: decoded, every row checked
    (lambda text: codecs.BOM_UTF8 + text.encode(), None),
    (
        lambda text: text.replace('"answer": "', '"answer": "café ', 1).encode("latin-1"),
        r", line 1: is not UTF-8",
    ),
    (lambda text: text.encode("utf-16-le"), r", line 1: holds NUL characters"),
    (
        lambda text: text + '{"question": "Q?", "answer": NaN}\n',
        r", line \d+, field 'answer': NaN is not a JSON",
    ),
    (lambda text: text + '{"question": \n', r", line \d+: invalid JSON at column 14"),
]


@pytest.mark.parametrize(("rewrite", "message"), MUSE_FILES)
def test_a_muse_data_file_is_read_by_the_shared_reader(muse_folder, tmp_path, capsys, rewrite, message):
    import shutil

    folder = tmp_path / "muse"
    shutil.copytree(muse_folder, folder)
    path = folder / "knowmem" / "forget_qa.jsonl"
    content = rewrite(path.read_text(encoding="utf-8"))
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code = main(["muse", "check", "--data", str(folder)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if message is None:
        assert code == 0, err
    else:
        assert code == 2 and re.search(rf"forget_qa.jsonl{message}", err), err


def _link_out(folder: Path) -> str:
    outside = folder.parent / "elsewhere.parquet"
    outside.write_bytes(next(folder.rglob("*.parquet")).read_bytes())
    (folder / "data" / "link.parquet").symlink_to(outside)
    return "data/link.parquet"


# A data file path of the README's configs block that leads out of the folder, however it is written.
OUTSIDE_PATHS = [
    lambda folder: "../elsewhere/train.parquet",
    lambda folder: "data/../../elsewhere/train.parquet",
    lambda folder: str(folder.parent / "train.parquet"),  # absolute
    lambda folder: "/etc/passwd",
    lambda folder: "~/train.parquet",
    lambda folder: "hf://datasets/org/name/train.parquet",
    _link_out,  # a link inside the folder to a file outside it
]
FORGET_TRAIN = "data/forget_10/train-00000-of-00001.parquet"


@pytest.mark.parametrize("outside", OUTSIDE_PATHS)
@pytest.mark.parametrize("reader", ["amnesia audit", "load_config"])
def test_a_card_path_leading_out_of_the_folder_is_refused(amnesia_folder, tmp_path, capsys, outside, reader):
    """`amnesia audit`, and `load_config`, through which evaluate, unlearn, finetune and attack read a folder,
    never read a file outside the folder its README describes."""
    import shutil

    from medunlearn.data_loading import load_config

    folder = tmp_path / "copy"
    shutil.copytree(amnesia_folder, folder)
    readme = folder / "README.md"
    readme.write_text(readme.read_text().replace(FORGET_TRAIN, outside(folder)))
    message = r"README.md, line \d+, field 'configs\[\d+\].data_files': '.*' leads outside the dataset folder"
    if reader == "load_config":
        with pytest.raises(FileContentError, match=message):
            load_config(folder, "forget_10")
    else:
        assert main(["amnesia", "audit", str(folder)]) == 2
        assert re.search(message, capsys.readouterr().err)


def test_evaluate_names_a_card_path_out_of_the_folder_and_a_data_file_of_other_columns(
    amnesia_folder, tmp_path, capsys
):
    """Before: the first passed `evaluate` (the file outside was read), the second was a `datasets`
    traceback (DatasetGenerationError). Now both are named before the model is loaded; no --out is left."""
    import shutil

    import pyarrow.parquet as pq

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    outside, columns = tmp_path / "outside", tmp_path / "columns"
    for folder in (outside, columns):
        shutil.copytree(amnesia_folder, folder)
    readme = outside / "README.md"
    readme.write_text(readme.read_text().replace(FORGET_TRAIN, f"../amnesia/{FORGET_TRAIN}"))
    table = pq.read_table(columns / FORGET_TRAIN)
    pq.write_table(table.rename_columns(["qid", *table.column_names[1:]]), columns / FORGET_TRAIN)
    expected = {
        outside: r"outside/README.md, line \d+, field 'configs\[\d+\].data_files': "
        r"'../amnesia/data/forget_10",
        columns: r"holdout-00000-of-00001.parquet, field 'qa_id': has column\(s\) qa_id where .*forget_10/"
        r"train-00000-of-00001.parquet, another data file of config 'forget_10', has qid",
    }
    for data, message in expected.items():
        out = tmp_path / f"eval-{data.name}"
        argv = ["evaluate", "--model", str(model), "--data", str(data), "--forget", "forget_10"]
        assert main([*argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and re.search(message, err), err
        assert not out.exists() and not list(tmp_path.glob(f".eval-{data.name}*"))


# (the file, its content, the message part): a YAML mapping that gives a key twice, wherever YAML is read
DUPLICATE_KEYS = [
    ("npo.yaml", "method: npo\nbeta: 0.1\nlearning_rate: 1e-5\nbeta: 0.2\n", r", line 4, field 'beta'"),
    (
        "npo.yaml",
        "method: npo\nlearning_rate: 1e-5\nlearning_rate: 1e-5\n",
        r", line 3, field 'learning_rate'",
    ),
    ("study.yaml", "name: a\nseeds: [0]\nname: b\n", r", line 3, field 'name'"),
    ("study.yaml", "methods:\n  npo: {beta: 1, beta: 2}\n", r", line 2, field 'beta'"),
    ("README.md", "---\nlicense: mit\nconfigs: []\nlicense: cc\n---\n# card\n", r", line 4, field 'license'"),
]


@pytest.mark.parametrize(("name", "content", "message"), DUPLICATE_KEYS)
def test_a_key_given_twice_is_refused_with_file_line_and_key(tmp_path, name, content, message):
    from medunlearn.study.config import load_study
    from medunlearn.unlearn.recipe_files import read_recipe

    path = tmp_path / name
    path.write_text(content)
    read = {"npo.yaml": read_recipe, "study.yaml": load_study, "README.md": user_files.read_front_matter}
    with pytest.raises(FileContentError, match=rf"{name}{message}: the key is given twice \(first at line"):
        read[name](path)


def test_a_key_given_twice_in_a_dataset_card_fails_the_audit(amnesia_folder, tmp_path, capsys):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(amnesia_folder, folder)
    readme = folder / "README.md"
    readme.write_text(
        readme.read_text().replace("license: cc-by-4.0\n", "license: cc-by-4.0\nlicense: mit\n")
    )
    assert main(["amnesia", "audit", str(folder)]) == 2
    assert re.search(r"README.md, line \d+, field 'license': the key is given twice", capsys.readouterr().err)


_KEYS = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
_SCALARS = st.one_of(st.integers(-1000, 1000), st.text(alphabet="xyz ", max_size=5), st.booleans(), st.none())


@settings(max_examples=100, deadline=None)
@given(mapping=st.dictionaries(_KEYS, _SCALARS, min_size=1, max_size=8), data=st.data())
def test_yaml_reads_as_safe_load_unless_a_key_is_repeated(mapping, data):
    import yaml

    text = yaml.safe_dump(mapping, sort_keys=False)
    assert user_files.parse_yaml(text, "x.yaml") == yaml.safe_load(text)
    key = data.draw(st.sampled_from(sorted(mapping)))
    repeated = text + yaml.safe_dump({key: "again"})
    line = len(text.splitlines()) + 1
    with pytest.raises(
        FileContentError, match=rf"x.yaml, line {line}, field '{key}': the key is given twice"
    ):
        user_files.parse_yaml(repeated, "x.yaml")


_JSON = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text()
    ),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_KEYS, children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(value=_JSON, key=_KEYS, bad=st.sampled_from([math.nan, math.inf, -math.inf]))
def test_json_is_strict_and_a_non_finite_number_is_named_by_its_field(value, key, bad):
    """Any JSON reads as json.loads does; a NaN / Infinity (which json.loads accepts) is refused naming the
    key that holds it and its line."""
    text = json.dumps(value, indent=1)
    assert user_files.parse_json(text, "x.json") == json.loads(text)
    holder = {"row": value, key: bad} if key != "row" else {"row": bad}
    text = json.dumps(holder, indent=1)  # allow_nan: writes NaN / Infinity / -Infinity
    line = next(
        n for n, content in enumerate(text.splitlines(), 1) if re.search(r": -?(NaN|Infinity)", content)
    )
    field = key if key != "row" else "row"
    with pytest.raises(
        FileContentError, match=rf"x.json, line {line}, field '{field}': -?(NaN|Infinity) is not"
    ):
        user_files.parse_json(text, "x.json")


# A QA or notes file with a number JSON does not have: NaN, Infinity, or one too large for a float.
NON_FINITE_QA = [
    (
        "qa.jsonl",
        QA_LINE + '{"patient_id": "1-1", "qa_type": "factual", "question": "Q?", "answer": NaN}\n',
        2,
        "answer",
    ),
    (
        "qa.jsonl",
        '{"patient_id": "1-1", "qa_type": "factual", "question": "Q?", "answer": "A.", "s": -Infinity}\n',
        1,
        "s",
    ),
    ("qa.jsonl", QA_LINE + QA_LINE.replace('"A."', "1e999"), 2, "answer"),
    ("notes.json", '[\n {"patient_uid": "1-1",\n  "age": NaN}\n]', 3, "age"),
]


@pytest.mark.parametrize(("name", "content", "line", "field"), NON_FINITE_QA)
def test_nan_or_infinity_in_a_qa_or_notes_file_is_refused(tmp_path, capsys, name, content, line, field):
    notes, qa = tmp_path / "notes.csv", tmp_path / "qa.jsonl"
    notes.write_text(CSV_HEADER + CSV_ROW)
    qa.write_text(QA_LINE)
    target = tmp_path / name
    target.write_text(content)
    assert (
        build(tmp_path, notes if name != "notes.json" else target, qa if name != "qa.jsonl" else target) == 2
    )
    err = capsys.readouterr().err
    assert re.search(rf"{name}, line {line}, field '{field}': \S+ is not a JSON number", err), err
    assert not (tmp_path / "out").exists()


# Found by trying careless inputs on every command (issue 22): each was a traceback or went unnoticed.
# (a file inside a folder a command reads, its content as bytes, the command given the folder, the message)
DAMAGED_RECORDS = [
    (
        "eval/summary.json",
        b'{"populations": {"x": "caf\xe9"}}',
        lambda f, d: ["report", str(f), "--out", str(f.parent / "r")],
        r"summary.json, line 1: is not UTF-8",
    ),
    (
        "eval/summary.json",
        b'{"populations": {"forget": {"afe": NaN}}}',
        lambda f, d: ["report", str(f), "--out", str(f.parent / "r")],
        r"summary.json, line 1, field 'populations.forget.afe': NaN",
    ),
    (
        "eval/summary.json",
        b"[1, 2]",
        lambda f, d: ["report", str(f), "--out", str(f.parent / "r")],
        r"summary.json: the file must be an object, not a list",
    ),
    (
        "study/study.json",
        b"x",
        lambda f, d: ["report", str(f), "--out", str(f.parent / "r")],
        r"study.json, line 1: invalid JSON at column 1",
    ),
    (
        "tofu/ours.json",
        b"[1]",
        lambda f, d: ["tofu", "compare", str(f / "ours.json"), str(f / "ours.json")],
        r"ours.json: the file must be an object, not a list",
    ),
    (
        "model/conventions.json",
        b"[1]",
        lambda f, d: (
            ["unlearn", "--method", "grad_diff", "--model", str(f), "--data", str(d)]
            + ["--forget", "forget_10", "--out", str(f.parent / "u")]
        ),
        r"conventions.json: a conventions file must be an object, not a list",
    ),
    (  # transformers' own ValueError ("Unrecognized model") was a traceback
        "model/config.json",
        b"{}",
        lambda f, d: (
            ["evaluate", "--model", str(f), "--data", str(d), "--forget", "forget_10"]
            + ["--out", str(f.parent / "e")]
        ),
        r"model: its config.json has no 'model_type'",
    ),
    (
        "model/config.json",
        b'{"model_type": "caf\xe9"}',
        lambda f, d: [
            "evaluate",
            "--model",
            str(f),
            "--data",
            str(d),
            "--forget",
            "forget_10",
            "--out",
            str(f.parent / "e"),
        ],
        r"config.json, line 1: is not UTF-8 text",
    ),
    (
        "model/README.md",
        b"---\nlibrary_name: a\nlibrary_name: b\n---\n",
        lambda f, d: ["publish", "--model", str(f), "--repo-id", "me/x", "--dry-run"],
        r"README.md, line 3, field 'library_name': the key is given twice",
    ),
]


@pytest.mark.parametrize(("name", "content", "argv_for", "message"), DAMAGED_RECORDS)
def test_a_damaged_record_in_a_folder_a_command_reads_is_named(
    tmp_path, capsys, amnesia_folder, name, content, argv_for, message
):
    path = tmp_path / name
    path.parent.mkdir()
    path.write_bytes(content)
    if path.parent.name == "model":
        (path.parent / "model.safetensors").write_bytes(b"weights")
        (path.parent / "config.json").exists() or (path.parent / "config.json").write_text(
            '{"model_type": "llama"}'
        )
    assert main(argv_for(path.parent, amnesia_folder)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and re.search(message, err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.parent.name]  # no output left


def test_a_refusal_answers_file_that_is_not_utf8_is_named_by_line(tmp_path):
    from medunlearn.unlearn.idk_dpo import load_idk_answers

    path = tmp_path / "idk.txt"
    path.write_bytes("I do not know.\nJe ne sais pas, désolé.\n".encode("latin-1"))
    with pytest.raises(FileContentError, match=r"idk.txt, line 2: is not UTF-8 text"):
        load_idk_answers(path)
    path.write_bytes("I do not know.\nJe ne sais pas, désolé.\n".encode("utf-16"))
    assert load_idk_answers(path) == ["I do not know.", "Je ne sais pas, désolé."]


# A TOFU-format folder's JSON data file, as `datasets` would have read it: a NaN silently, latin-1 as a
# UnicodeDecodeError traceback, UTF-16 as a pyarrow parse error; now named by file and line.
TOFU_DATA_FILES = [
    (lambda text: text.replace('{"', '{"score": NaN, "', 1).encode(), r", line 1, field 'score': NaN is not"),
    (
        lambda text: text.replace('"answer": "', '"answer": "café ', 1).encode("latin-1"),
        r", line 1: is not UTF-8",
    ),
    (lambda text: text.encode("utf-16"), r": is UTF-16/32 text; datasets reads data files as UTF-8"),
    (lambda text: ("[1]\n" + text).encode(), r", line 2: invalid JSON at column 1: Extra data"),
]


@pytest.mark.parametrize(("rewrite", "message"), TOFU_DATA_FILES)
def test_a_tofu_data_file_is_checked_before_datasets_reads_it(tmp_path, rewrite, message):
    from medunlearn.tofu.evaluate import tofu_examples
    from medunlearn.tofu.synthetic import build_tofu_folder

    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=2, perturbed=2, options=3)
    path = folder / "forget10_perturbed.json"
    path.write_bytes(rewrite(path.read_text(encoding="utf-8")))
    with pytest.raises(FileContentError, match=rf"forget10_perturbed.json{message}"):
        tofu_examples(folder, "forget10")


def _with_forget_question_in(folder, config: str, forget: str) -> str:
    """Append to ``config``'s file a row asking the first question of ``forget``'s; returns the question."""
    row = json.loads((folder / f"{forget}.json").read_text(encoding="utf-8").splitlines()[0])
    with (folder / f"{config}.json").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
    return row["question"]


def test_a_question_in_both_the_forget_and_the_retain_split_is_named_by_both_files_and_rows(tmp_path):
    """Before: TOFU's evaluation scored it as forgotten and retained, unlearning trained it both ways."""
    from medunlearn.tofu.evaluate import tofu_examples
    from medunlearn.tofu.synthetic import build_tofu_folder
    from medunlearn.unlearn.run import UnlearningDataArguments
    from medunlearn.unlearn.sources import load_corpus

    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=2, perturbed=2, options=3)
    _with_forget_question_in(folder, "retain_perturbed", "forget10_perturbed")
    rows = len((folder / "retain_perturbed.json").read_text(encoding="utf-8").splitlines())
    with pytest.raises(
        FileContentError,
        match=rf"retain_perturbed.json, row {rows}, field 'question': this question is also row 1 of "
        rf"{re.escape(str(folder))}/forget10_perturbed.json: a question in both splits",
    ):
        tofu_examples(folder, "forget10")
    _with_forget_question_in(folder, "retain90", "forget10")
    rows = len((folder / "retain90.json").read_text(encoding="utf-8").splitlines())
    with pytest.raises(FileContentError, match=rf"retain90.json, row {rows}, field 'question': .* row 1 of "):
        load_corpus(UnlearningDataArguments(str(folder), "forget10", benchmark="tofu"), need_retain=True)


def test_json_nested_thousands_deep_is_a_named_error_not_a_recursion_traceback():
    from medunlearn.errors import FileContentError
    from medunlearn.utils.user_files import parse_json

    with pytest.raises(FileContentError, match=r"qa.jsonl, line 2.*nested too deeply"):
        parse_json("[" * 100_000 + "]" * 100_000, "qa.jsonl", line=2)
    assert parse_json("[" * 50 + "]" * 50, "qa.jsonl", line=2) is not None


def test_an_empty_json_data_file_of_a_config_is_named_before_datasets_reads_it(tmp_path):
    from medunlearn.data_loading import load_split
    from medunlearn.errors import FileContentError

    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: forget01\n  data_files:\n  - split: train\n"
        "    path: forget01.json\n---\n"
    )
    (folder / "forget01.json").write_text("")
    with pytest.raises(FileContentError, match=r"forget01.json.*holds no records"):
        load_split(folder, "forget01")
    (folder / "forget01.json").write_text('{"question": "Q?", "answer": "A."}\n')
    assert load_split(folder, "forget01").num_rows == 1


@pytest.mark.parametrize("value", ["null", "3.5"])
def test_a_tofu_answer_that_is_not_text_is_named_by_config_row_and_field(tmp_path, value):
    from medunlearn.tofu.data import TofuInputError
    from medunlearn.tofu.evaluate import tofu_examples
    from medunlearn.tofu.synthetic import build_tofu_folder

    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=2, perturbed=2, options=3)
    path = folder / "forget10_perturbed.json"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = re.sub(r'"answer": "[^"]*"', f'"answer": {value}', lines[1], count=1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TofuInputError, match=r"'forget10_perturbed' row 2, field 'answer': expected text"):
        tofu_examples(folder, "forget10")
