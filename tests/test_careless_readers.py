"""Readers that took a careless file and stored something else without a word (the issue-22 review): a CSV cut
off inside a quoted field, a JSON note or answer that is no text, a QA row given twice in a TOFU-format
folder, a count the user never gave named in the error, a size no machine holds. Each is exit 2 with a message
naming the file, the row or line and the field (or the option), no traceback, and no output folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_checks import refused_when_parsed

from medunlearn.cli import main
from medunlearn.errors import FileContentError, InputError

NOTE = (
    "A 61-year-old man had crushing chest pain. Troponin was raised. Angiography showed an occluded artery."
)
NOTES_CSV = f'patient_uid,title,patient,age,gender\n1-1,Myocardial infarction,"{NOTE}",,M\n'
NOTE_ROW = {"patient_uid": "1-1", "title": "Myocardial infarction", "patient": NOTE}
QA_ROW = {"patient_id": "1-1", "qa_type": "factual", "question": "What was raised?", "answer": "Troponin."}


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def build(tmp_path: Path, notes: Path, qa: Path, *options: str) -> int:
    argv = ["amnesia", "build", "--source", "pmc-patients", "--notes", str(notes), "--qa", str(qa)]
    return main([*argv, "--out", str(tmp_path / "out"), *options])


def error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(f"medunlearn {command}: error:")]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


# -- 1. a CSV whose last record ends inside an open quote: its note was kept cut short


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (NOTES_CSV + f'1-2,Pneumonia,"{NOTE[:40]}', 3),  # the file cut off inside the last note
        (NOTES_CSV + '1-2,Pneumonia,"A quote never closed,,F\n1-3,Sepsis,Fever.,,M\n', 3),
        (NOTES_CSV + '1-2,Pneumonia,"Fever" and cough,,F\n', 3),  # text after a closing quote
    ],
)
def test_a_csv_record_cut_off_or_broken_is_named_by_its_line(tmp_path, capsys, content, line):
    notes, qa = tmp_path / "notes.csv", tmp_path / "qa.jsonl"
    notes.write_text(content, encoding="utf-8")
    qa.write_text(jsonl([QA_ROW]), encoding="utf-8")
    assert build(tmp_path, notes, qa) == 2
    assert f"{notes}, line {line}: invalid CSV record: " in error_line(capsys, "amnesia")
    assert not (tmp_path / "out").exists()


def test_every_csv_reader_refuses_a_record_cut_off_inside_a_quote(tmp_path):
    """The abstracts reader of the BioDivergence mining reads CSV through the same reader."""
    from medunlearn.biodivergence.mining.read import read_abstracts

    path = tmp_path / "abstracts.csv"
    path.write_text(
        'pmid,title,abstract\n1,A title,Aspirin reduced pain.\n2,Another,"Cut off', encoding="utf-8"
    )
    with pytest.raises(FileContentError, match=r"abstracts.csv, line 3: .*ends inside a quoted field"):
        read_abstracts([path])


# -- 2. a note, title, id, question or answer of a JSON file that is no text: stored as "['a', 'b']" or "42"


TEXT = "expected text, got"
ID = "expected text or a whole number, got"


LISTED_NOTE = [NOTE_ROW, {**NOTE_ROW, "patient": ["a", "b"]}]
N, Q = [NOTE_ROW], [QA_ROW]


@pytest.mark.parametrize(
    ("notes_name", "notes_rows", "qa_rows", "where"),
    [
        ("notes.jsonl", LISTED_NOTE, Q, f"row 2, field 'patient': {TEXT} a list"),
        ("notes.json", [{**NOTE_ROW, "title": ["a"]}], Q, f"row 1, field 'title': {TEXT} a list"),
        ("notes.jsonl", [{**NOTE_ROW, "patient_uid": {}}], Q, f"row 1, field 'patient_uid': {ID} an object"),
        ("qa.jsonl", N, [QA_ROW, {**QA_ROW, "answer": 42}], f"row 2, field 'answer': {TEXT} a number"),
        ("qa.jsonl", N, [{**QA_ROW, "question": True}], f"row 1, field 'question': {TEXT} a boolean"),
        ("qa.jsonl", N, [{**QA_ROW, "qa_type": ["x"]}], f"row 1, field 'qa_type': {TEXT} a list"),
        ("qa.jsonl", N, [{**QA_ROW, "qa_id": [1]}], f"row 1, field 'qa_id': {ID} a list"),
    ],
)  # fmt: skip
def test_a_json_field_that_is_not_text_is_named_by_row_and_field(
    tmp_path, capsys, notes_name, notes_rows, qa_rows, where
):
    """``where``: the file at fault (the notes, ``notes.json`` or ``notes.jsonl``, or the QA file), row and
    field."""
    notes_file = "notes.json" if notes_name == "notes.json" else "notes.jsonl"
    notes, qa = tmp_path / notes_file, tmp_path / "qa.jsonl"
    notes.write_text(json.dumps(notes_rows) if notes_file == "notes.json" else jsonl(notes_rows))
    qa.write_text(jsonl(qa_rows), encoding="utf-8")
    assert build(tmp_path, notes, qa) == 2
    assert error_line(capsys, "amnesia").endswith(f"error: {tmp_path / notes_name}, {where}")
    assert not (tmp_path / "out").exists()


NUL = "holds a NUL character"


@pytest.mark.parametrize(
    ("notes_rows", "qa_rows", "where"),
    [
        (N, [QA_ROW, {**QA_ROW, "answer": "x" * 100_001}], "qa.jsonl, row 2, field 'answer': is 100,001"),
        (N, [{**QA_ROW, "question": "Which\u0000 drug?"}], f"qa.jsonl, row 1, field 'question': {NUL}"),
        ([{**NOTE_ROW, "title": "Gout\u0000"}], Q, f"notes.jsonl, row 1, field 'title': {NUL}"),
    ],
    ids=["an answer past the limit", "a NUL in a question", "a NUL in a title"],
)
def test_a_text_field_too_long_or_holding_a_nul_is_named(tmp_path, capsys, notes_rows, qa_rows, where):
    """Before: a 5 MB answer and a JSON \\u0000 inside a question or title were read and trained on."""
    notes, qa = tmp_path / "notes.jsonl", tmp_path / "qa.jsonl"
    notes.write_text(jsonl(notes_rows))
    qa.write_text(jsonl(qa_rows), encoding="utf-8")
    assert build(tmp_path, notes, qa) == 2
    assert f"error: {tmp_path / where}" in error_line(capsys, "amnesia")
    assert not (tmp_path / "out").exists()


def test_whole_number_ids_are_still_read_as_text(tmp_path):
    """PMC-Patients' JSON numbers its patients: an id 0 is the id "0" (it used to read as empty)."""
    from medunlearn.amnesia.sources.pmc_patients import read_pmc_patients, read_qa_file

    notes = tmp_path / "notes.jsonl"
    notes.write_text(jsonl([{**NOTE_ROW, "patient_uid": 0}, {**NOTE_ROW, "patient_uid": 7}]))
    qa = tmp_path / "qa.jsonl"
    qa.write_text(jsonl([{**QA_ROW, "patient_id": 7, "qa_id": 12}]))
    assert read_pmc_patients(notes)[0]["patient_id"].to_pylist() == ["0", "7"]
    assert read_qa_file(qa).select(["qa_id", "patient_id"]).to_pylist() == [
        {"qa_id": "12", "patient_id": "7"}
    ]


# -- 3. --qa-per-type 1: the error named holdout_per_type, an option the user never gave


def test_qa_per_type_below_two_names_the_option_and_why(tmp_path, capsys):
    notes, qa = tmp_path / "notes.csv", tmp_path / "qa.jsonl"
    notes.write_text(NOTES_CSV, encoding="utf-8")
    qa.write_text(jsonl([QA_ROW]), encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        build(tmp_path, notes, qa, "--qa-per-type", "1")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err and "holdout_per_type" not in err, err
    assert "error: argument --qa-per-type: must be a whole number of at least 2 (one QA of each type" in err
    assert not (tmp_path / "out").exists()


def test_the_python_api_names_qa_per_type_too(tmp_path):
    from medunlearn.amnesia import build_amnesia_folder

    with pytest.raises(InputError, match=r"--qa-per-type \(qa_per_type\) must be at least 2, got 1: 1 QA"):
        build_amnesia_folder(tmp_path / "out", patients=20, qa_per_type=1)
    assert not (tmp_path / "out").exists()


# -- 4. a size no machine holds: 10**12 tokens aborted the process inside the Rust tokenizer trainer

HUGE = "1000000000000"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["finetune", "--tiny-vocab-size", HUGE], "--tiny-vocab-size: must be at most 1,000,000, got"),
        (["amnesia", "build", "--concurrency", HUGE], "--concurrency: must be at most 1,024, got"),
        (["biodivergence", "mine", "--concurrency", HUGE], "--concurrency: must be at most 1,024, got"),
        (["study", "s.yaml", "--jobs", HUGE], "--jobs: must be at most 1,024, got"),
        (["study", "s.yaml", "--threads", HUGE], "--threads: must be at most 1,024, got"),
        (["amnesia", "build", "--qa-per-type", HUGE], "--qa-per-type: must be at most 1,000, got"),
    ],
)
def test_a_size_past_any_machine_is_refused_when_parsed(tmp_path, capsys, argv, message):
    refused_when_parsed(tmp_path, capsys, argv, message)


def test_a_vocabulary_below_the_byte_alphabet_is_refused_when_parsed(tmp_path, capsys):
    """Before: --tiny-vocab-size 1 built a 261-token tokenizer with exit 0 (the trainer raised it)."""
    refused_when_parsed(
        tmp_path,
        capsys,
        ["finetune", "--tiny-vocab-size", "1"],
        "--tiny-vocab-size: must be a whole number of at least 261",
    )


def test_the_tokenizer_trainer_refuses_a_vocabulary_it_would_not_honour_from_python():
    from medunlearn.models import train_bpe_tokenizer

    with pytest.raises(InputError, match=r"tiny_vocab_size: must be a whole number of at least 261, got 100"):
        train_bpe_tokenizer(["a note"], vocab_size=100)
    assert len(train_bpe_tokenizer(["a note"], vocab_size=261)) == 261


def test_the_tokenizer_trainer_refuses_a_huge_vocabulary_from_python():
    from medunlearn.models import train_bpe_tokenizer

    with pytest.raises(InputError, match=r"tiny_vocab_size: must be at most 1,000,000, got 1000000000000"):
        train_bpe_tokenizer(["a note"], vocab_size=10**12)


def test_a_study_file_bounds_the_vocabulary_and_the_qa_per_type():
    from medunlearn.study.config import BUILD_NUMBERS, MODEL_NUMBERS
    from medunlearn.utils.numbers import checked_numbers

    with pytest.raises(InputError, match=r"model.tiny_vocab_size': must be at most 1,000,000"):
        checked_numbers({"tiny_vocab_size": 10**12}, MODEL_NUMBERS, lambda f: f"s.yaml: key 'model.{f}'")
    with pytest.raises(InputError, match=r"data.build.qa_per_type': must be a whole number of at least 2"):
        checked_numbers({"qa_per_type": 1}, BUILD_NUMBERS, lambda f: f"s.yaml: key 'data.build.{f}'")


# -- 5. a QA row given twice in a TOFU-format folder: trained on twice, scored twice


def duplicate_a_question(folder: Path, config: str, row: int, first: int) -> Path:
    path = folder / f"{config}.json"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rows[row - 1]["question"] = "  " + rows[first - 1]["question"].upper()  # spaced and cased: still the same
    path.write_text(jsonl(rows), encoding="utf-8")
    return path


def test_a_tofu_question_given_twice_is_named_by_file_row_and_field(tmp_path):
    from medunlearn.tofu.data import load_tofu
    from medunlearn.tofu.synthetic import build_tofu_folder

    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=2)
    path = duplicate_a_question(folder, "forget10", row=2, first=1)
    with pytest.raises(FileContentError) as error:
        load_tofu(folder, "forget10")
    assert str(error.value) == (
        f"{path}, row 2, field 'question': this question is asked already at row 1: a QA row given twice "
        "(remove one of the two rows)"
    )


def test_unlearning_on_a_tofu_folder_with_a_question_given_twice_writes_nothing(tmp_path, capsys):
    from medunlearn.tofu.synthetic import build_tofu_folder

    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=2)
    path = duplicate_a_question(folder, "forget10", row=2, first=1)
    out = tmp_path / "out"
    argv = ["unlearn", "--benchmark", "tofu", "--method", "GradDiff", "--model", "tiny-llama"]
    assert main([*argv, "--data", str(folder), "--forget", "forget10", "--out", str(out)]) == 2
    assert error_line(capsys, "unlearn").endswith(
        f"{path}, row 2, field 'question': this question is asked "
        "already at row 1: a QA row given twice (remove one of the two rows)"
    )
    assert not out.exists()


# -- 6. a JSON object giving a key twice: json keeps the last value without a word, the first is lost


def _twice(text: str, key: str, first) -> str:
    """`text` (a JSON object) with `key` given once more, first, holding `first`."""
    return text.replace("{", "{" + json.dumps(key) + ": " + json.dumps(first) + ", ", 1)


def _qa_file(tmp_path: Path) -> tuple[list[str], Path]:
    notes, qa = tmp_path / "notes.csv", tmp_path / "qa.jsonl"
    notes.write_text(NOTES_CSV, encoding="utf-8")
    rows = [QA_ROW, {**QA_ROW, "question": "What did angiography show?", "answer": "An occluded artery."}]
    lines = jsonl(rows).splitlines()
    qa.write_text("\n".join([lines[0], _twice(lines[1], "answer", "FIRST ANSWER")]) + "\n", encoding="utf-8")
    return ["amnesia", "build", "--source", "pmc-patients", "--notes", str(notes), "--qa", str(qa)], qa


def _notes_json(tmp_path: Path) -> tuple[list[str], Path]:
    notes, qa = tmp_path / "notes.json", tmp_path / "qa.jsonl"
    notes.write_text("[\n" + _twice(json.dumps(NOTE_ROW), "patient", "An older note.") + "\n]\n")
    qa.write_text(jsonl([QA_ROW]), encoding="utf-8")
    return ["amnesia", "build", "--source", "pmc-patients", "--notes", str(notes), "--qa", str(qa)], notes


def _tofu_summary(tmp_path: Path) -> tuple[list[str], Path]:
    ours, reference = tmp_path / "ours.json", tmp_path / "reference.json"
    ours.write_text('{\n  "model_utility": 0.4,\n  "forget_quality": 0.5,\n  "forget_quality": 0.9\n}\n')
    reference.write_text('{"forget_quality": 0.5, "model_utility": 0.4}\n')
    return ["tofu", "compare", str(ours), str(reference)], ours


def _muse_row(tmp_path: Path) -> tuple[list[str], Path]:
    from medunlearn.muse.build import build_muse_folder

    folder = build_muse_folder(tmp_path / "muse", articles=5, seed=0)
    path = folder / "knowmem" / "forget_qa.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = _twice(lines[1], "answer", 5)  # the first value not even text: checked as the last one
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ["muse", "check", "--data", str(folder)], path


DUPLICATE_KEY_CASES = [
    ("qa_jsonl", _qa_file, "amnesia", "line 2, field 'answer': the key is given twice (first at line 2)"),
    ("notes_json", _notes_json, "amnesia", "line 2, field 'patient': the key is given twice"),
    ("tofu_summary", _tofu_summary, "tofu", "line 4, field 'forget_quality': the key is given twice (first"),
    ("muse_row", _muse_row, "muse", "line 2, field 'answer': the key is given twice"),
]


@pytest.mark.parametrize(
    ("name", "make", "command", "message"), DUPLICATE_KEY_CASES, ids=[c[0] for c in DUPLICATE_KEY_CASES]
)
def test_a_json_key_given_twice_is_named_by_file_line_and_key(tmp_path, capsys, name, make, command, message):
    argv, path = make(tmp_path)
    out = tmp_path / "out"
    assert main([*argv, *(["--out", str(out)] if command == "amnesia" else [])]) == 2
    assert f"{path}, {message}" in error_line(capsys, command)
    assert not out.exists()


def test_every_json_reader_names_a_nested_key_given_twice_by_its_path(tmp_path):
    """One reader (`parse_json`) serves JSON, JSON Lines and a JSON list of records alike."""
    from medunlearn.utils.user_files import read_json, read_json_records, read_jsonl

    path = tmp_path / "summary.json"
    path.write_text('{"scores": {"rouge": 0.5},\n "runs": [{"seed": 0}, {"seed": 1,\n  "seed": 2}]}\n')
    with pytest.raises(FileContentError, match=r"line 3, field 'runs.seed': the key is given twice \(first"):
        read_json(path)
    records = tmp_path / "records.json"
    records.write_text('[{"a": 1, "b": 2},\n {"a": 1, "b": 2, "b": 3}]')
    with pytest.raises(FileContentError, match=r"records.json, line 2, field 'b'"):
        read_json_records(records)
    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"a": {"a": 1}}\n\n{"a": "\\" : x", "a": 2}\n')  # a key inside a string is no key
    with pytest.raises(FileContentError, match=r"rows.jsonl, line 3, field 'a'"):
        list(read_jsonl(lines))
    nested = tmp_path / "nested.jsonl"
    nested.write_text('{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}\n')  # one key in several objects: no repeat
    assert read_json_records(nested) == [{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}]


# -- 7. a MUSE split without a row, or with a QA row given twice: scored as if it were a result


def _empty_split(folder: Path) -> tuple[Path, str]:
    path = folder / "knowmem" / "forget_qa.jsonl"
    path.write_text("", encoding="utf-8")
    return path, "(knowmem/forget_qa): the split holds no row"


def _repeated_row(folder: Path) -> tuple[Path, str]:
    path = folder / "knowmem" / "retain_qa.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    lines.append(json.dumps({**first, "question": " " + first["question"].upper()}))  # the same, cased
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    row = len(lines)
    return path, f"(knowmem/retain_qa) row {row}, field 'question': this question is asked already at row 1"


@pytest.mark.parametrize("damage", [_empty_split, _repeated_row], ids=["empty_split", "repeated_row"])
def test_a_muse_split_empty_or_with_a_qa_row_given_twice_is_named(tmp_path, capsys, damage):
    from medunlearn.muse.build import build_muse_folder

    folder = build_muse_folder(tmp_path / "muse", articles=5, seed=0)
    path, message = damage(folder)
    assert main(["muse", "check", "--data", str(folder)]) == 2
    assert f"{path} {message}" in error_line(capsys, "muse")


def test_a_tofu_row_giving_a_key_twice_is_named_before_datasets_reads_it(tmp_path):
    """`datasets` reads a JSON data file with the last value of a key given twice: checked first."""
    from medunlearn.tofu.data import load_tofu
    from medunlearn.tofu.synthetic import build_tofu_folder

    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=2)
    path = folder / "forget10.json"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = _twice(lines[1], "answer", "An earlier answer.")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(FileContentError, match=re.escape(f"{path}, line 2, field 'answer': the key is")):
        load_tofu(folder, "forget10")


# -- 8. a lone surrogate escape (\ud800) in a JSON text: pyarrow could not encode it (a traceback)

LONE = "\ud800"  # json.dumps writes it as the escape \ud800


@pytest.mark.parametrize(
    ("notes_name", "notes_rows", "qa_rows", "where"),
    [
        ("qa.jsonl", N, [QA_ROW, {**QA_ROW, "answer": f"{LONE} Troponin."}], "line 2, field 'answer'"),
        ("qa.jsonl", N, [{**QA_ROW, "question": f"What{chr(0xDFFF)}?"}], "line 1, field 'question'"),
        ("notes.jsonl", [NOTE_ROW, {**NOTE_ROW, "title": LONE}], Q, "line 2, field 'title'"),
        ("notes.json", [{**NOTE_ROW, "patient": NOTE + LONE}], Q, "line 1, field 'patient'"),
    ],
)  # fmt: skip
def test_a_lone_surrogate_in_a_json_text_is_named_by_file_line_and_field(
    tmp_path, capsys, notes_name, notes_rows, qa_rows, where
):
    notes_file = "notes.json" if notes_name == "notes.json" else "notes.jsonl"
    notes, qa = tmp_path / notes_file, tmp_path / "qa.jsonl"
    notes.write_text(json.dumps(notes_rows) if notes_file == "notes.json" else jsonl(notes_rows))
    qa.write_text(jsonl(qa_rows), encoding="utf-8")
    assert build(tmp_path, notes, qa) == 2
    assert f"error: {tmp_path / notes_name}, {where}: holds a lone surrogate" in error_line(capsys, "amnesia")
    assert not (tmp_path / "out").exists()


def test_a_surrogate_pair_is_one_character_and_read():
    from medunlearn.utils.user_files import parse_json

    assert parse_json('{"answer": "\\ud83d\\ude00"}', "qa.jsonl") == {"answer": "\U0001f600"}
    with pytest.raises(FileContentError, match=r"qa.jsonl, line 4, field 'k\\ud800': holds a lone surrogate"):
        parse_json('{"k\\ud800": 1}', "qa.jsonl", line=4)


# -- 9. a qa_type of the wrong case: the error named qa_id, derived from it, as given twice


@pytest.mark.parametrize(
    ("qa_type", "hint"),
    [
        ("Reasoning", " (values are case-sensitive: 'reasoning'?)"),
        ("causal", ""),
        (" factual", " (values are"),
    ],
)
def test_an_unknown_qa_type_is_named_before_the_qa_ids_derived_from_it(tmp_path, capsys, qa_type, hint):
    notes, qa = tmp_path / "notes.csv", tmp_path / "qa.jsonl"
    notes.write_text(NOTES_CSV, encoding="utf-8")
    reasoning = {**QA_ROW, "qa_type": "reasoning"}
    qa.write_text(jsonl([QA_ROW, reasoning, {**reasoning, "qa_type": qa_type}]), encoding="utf-8")
    assert build(tmp_path, notes, qa) == 2
    line = error_line(capsys, "amnesia")
    assert (
        f"error: {qa}, row 3, field 'qa_type': unknown value {qa_type!r}; allowed: factual, reasoning" in line
    )
    assert hint in line and "qa_id" not in line
    assert not (tmp_path / "out").exists()


# -- 10. a metric of a TOFU summary that is no number: `tofu compare` subtracted a string (a TypeError)

REFERENCE = {"forget_quality": 0.5, "model_utility": {"agg_value": 0.4}}
NOT_A_NUMBER = "expected a number or null, got"


@pytest.mark.parametrize(
    ("ours", "reference", "where"),
    [
        ({"forget_quality": "0.5"}, REFERENCE, f"ours.json, field 'forget_quality': {NOT_A_NUMBER} a string"),
        ({"model_utility": [0.4]}, REFERENCE, f"ours.json, field 'model_utility': {NOT_A_NUMBER} a list"),
        (
            {"open_unlearning": {"forget_quality": True}},
            REFERENCE,
            f"ours.json, field 'open_unlearning.forget_quality': {NOT_A_NUMBER} a boolean",
        ),
        (
            {"forget_quality": 10**400},
            REFERENCE,
            "ours.json, field 'forget_quality': expected a number, got one past any float",
        ),
        (
            REFERENCE,
            {"model_utility": {"agg_value": {}}},
            f"ref.json, field 'model_utility.agg_value': {NOT_A_NUMBER} an object",
        ),
    ],
)
def test_a_tofu_metric_that_is_no_number_is_named_by_file_and_key(tmp_path, capsys, ours, reference, where):
    (tmp_path / "ours.json").write_text(json.dumps(ours))
    (tmp_path / "ref.json").write_text(json.dumps(reference))
    assert main(["tofu", "compare", str(tmp_path / "ours.json"), str(tmp_path / "ref.json")]) == 2
    assert error_line(capsys, "tofu").endswith(f"error: {tmp_path / where}")


# -- 11. a column named as a known one but for case or spaces: another column (patient_id) was read instead

PADDED_UID = NOTES_CSV.replace("patient_uid", " patient_uid ")
# PMC-Patients' own CSV has patient_id (a row number) beside patient_uid: the id was read from it silently.
CAPITAL_UID = "patient_id," + NOTES_CSV.replace("patient_uid", "Patient_UID").replace("\n1-1", "\n7,1-1")
CAPITAL_TITLE = jsonl([{"patient_uid": "1-1", "Title": "MI", "patient": NOTE}])


@pytest.mark.parametrize(
    ("notes_name", "content", "where"),
    [
        ("notes.csv", PADDED_UID, "line 1, field ' patient_uid '"),
        ("notes.csv", CAPITAL_UID, "line 1, field 'Patient_UID'"),
        ("notes.jsonl", CAPITAL_TITLE, "line 1, field 'Title'"),
        (
            "notes.json",
            json.dumps([{"patient_uid": "1-1", "title ": "MI", "patient": NOTE}]),
            "field 'title '",
        ),
    ],
)
def test_a_column_named_but_for_case_or_spaces_is_named_not_replaced(
    tmp_path, capsys, notes_name, content, where
):
    notes, qa = tmp_path / notes_name, tmp_path / "qa.jsonl"
    notes.write_text(content, encoding="utf-8")
    qa.write_text(jsonl([QA_ROW]), encoding="utf-8")
    assert build(tmp_path, notes, qa) == 2
    line = error_line(capsys, "amnesia")
    assert f"error: {notes}, {where}: this column is not " in line and "qa.jsonl" not in line
    assert not (tmp_path / "out").exists()


def test_a_qa_field_named_but_for_case_is_named(tmp_path, capsys):
    notes, qa = tmp_path / "notes.csv", tmp_path / "qa.jsonl"
    notes.write_text(NOTES_CSV, encoding="utf-8")
    qa.write_text(jsonl([{key.replace("patient_id", "Patient_ID"): value for key, value in QA_ROW.items()}]))
    assert build(tmp_path, notes, qa) == 2
    line = error_line(capsys, "amnesia")
    assert f"error: {qa}, line 1, field 'Patient_ID': this column is not 'patient_id'" in line
    assert not (tmp_path / "out").exists()
