"""Real notes: the PMC-Patients reader, the QA join, and bad input."""

import csv
import json
import re
from pathlib import Path

import datasets
import pytest

from medunlearn.amnesia import RecordError, build_amnesia_folder
from medunlearn.amnesia.audit import audit_folder
from medunlearn.amnesia.sources.pmc_patients import read_pmc_patients
from medunlearn.errors import FileContentError

PMC_COLUMNS = ["patient_id", "patient_uid", "PMID", "file_path", "title", "patient", "age", "gender"]


def sentence_qa(patient_id: str, note: str, per_type: int = 4) -> list[dict]:
    """Test QA built from a note's sentences (real QA would come from an annotator or an LLM)."""
    sentences = [s for s in re.split(r"(?<=\.)\s+", note) if len(s) > 20] or [note]
    rows = []
    for qa_type in ("factual", "reasoning"):
        for k in range(per_type):
            sentence = sentences[(k + (per_type if qa_type == "reasoning" else 0)) % len(sentences)]
            rows.append(
                {
                    "patient_id": patient_id,
                    "qa_type": qa_type,
                    "question": f"What does the case report say in its part {k + 1} ({qa_type})?",
                    "answer": sentence,
                }
            )
    return rows


def write_csv(path: Path, rows: list[dict], columns=PMC_COLUMNS) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def toy_rows(n: int = 6) -> list[dict]:
    notes = [
        (
            "A 61-year-old man had crushing chest pain. Troponin was raised. "
            "Angiography showed an occluded artery."
        ),
        (
            "A 30-year-old woman had fever and cough. Chest radiograph showed pneumonia. "
            "She received antibiotics."
        ),
        (
            "A 55-year-old woman had a breast lump. Biopsy showed invasive ductal carcinoma. "
            "She had a lumpectomy."
        ),
    ]
    return [
        {
            "patient_id": str(i),
            "patient_uid": f"100{i}-1",
            "PMID": str(900 + i),
            "file_path": "comm/x.xml",
            "title": ["Myocardial infarction", "Pneumonia in an adult", "Breast cancer"][i % 3],
            "patient": notes[i % 3],
            "age": "[[61.0, 'year']]",
            "gender": "M",
        }
        for i in range(n)
    ]


@pytest.mark.integration
def test_real_pmc_patients_sample_builds_and_audits(shared_data, tmp_path):
    notes_file = shared_data / "pmc-patients-sample" / "PMC-Patients-sample-600.csv"
    notes, unclassified = read_pmc_patients(notes_file)
    assert notes.num_rows + len(unclassified) == 600
    assert notes.num_rows > 450  # most real notes get a category from the vocabulary
    assert notes["patient_id"][0].as_py() == "7665777-1"  # patient_uid is the id
    assert all(notes["disease_keywords"].to_pylist()[i] for i in range(20) if i < notes.num_rows)
    qa_rows = [
        row
        for pid, note in zip(notes["patient_id"].to_pylist(), notes["note"].to_pylist())
        for row in sentence_qa(pid, note)
    ]
    qa_file = write_jsonl(tmp_path / "qa.jsonl", qa_rows)
    folder = build_amnesia_folder(
        tmp_path / "amnesia-pmc", source="pmc-patients", notes_path=notes_file, qa_path=qa_file, seed=0
    )
    audit_folder(folder)
    card = (folder / "README.md").read_text()
    assert "license: cc-by-nc-sa-4.0" in card
    manifest = json.loads((folder / "amnesia_build.json").read_text())
    assert len(manifest["skipped"]["no disease category could be assigned from title and note"]) == len(
        unclassified
    )
    full = datasets.load_dataset(str(folder), "full")
    assert full["train"].num_rows == notes.num_rows * 6 and full["holdout"].num_rows == notes.num_rows * 2


def test_disease_column_is_used_when_present(tmp_path):
    rows = toy_rows(3)
    for row, disease in zip(rows, ["digestive", "respiratory", "cancer"]):
        row["disease"] = disease
    notes, _ = read_pmc_patients(write_csv(tmp_path / "n.csv", rows, PMC_COLUMNS + ["disease"]))
    assert notes["disease"].to_pylist() == ["digestive", "respiratory", "cancer"]


def test_classifier_assigns_categories_from_title_and_note(tmp_path):
    notes, skipped = read_pmc_patients(write_csv(tmp_path / "n.csv", toy_rows(3)))
    assert notes["disease"].to_pylist() == ["cardiovascular", "infection_immune", "cancer"]
    assert skipped == []
    assert "invasive ductal carcinoma" in notes["disease_keywords"][2].as_py()


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_json_and_jsonl_notes(tmp_path, suffix):
    rows = toy_rows(3)
    path = tmp_path / f"notes{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        write_jsonl(path, rows)
    notes, _ = read_pmc_patients(path)
    assert notes.num_rows == 3 and notes["age"].to_pylist() == [61, 61, 61]


@pytest.mark.parametrize(
    "mutate, columns, match",
    [
        (lambda rows: rows, [c for c in PMC_COLUMNS if c != "title"], r"field 'title': missing column"),
        (
            lambda rows: rows[1].update(patient="  "),
            PMC_COLUMNS,
            r"n.csv, row 2, field 'patient': empty value",
        ),
        (
            lambda rows: rows[2].update(patient_uid="1000-1"),
            PMC_COLUMNS,
            r"row 3, field 'patient_id': duplicate",
        ),
        (
            lambda rows: [r.update(disease="martian flu") for r in rows],
            PMC_COLUMNS + ["disease"],
            r"field 'disease': unknown value 'martian flu'; allowed: cancer",
        ),
    ],
)
def test_bad_notes_are_named_by_file_row_and_field(tmp_path, mutate, columns, match):
    rows = toy_rows(3)
    mutate(rows)
    path = write_csv(tmp_path / "n.csv", [{k: r.get(k, "") for k in columns} for r in rows], columns)
    with pytest.raises(RecordError, match=match):
        read_pmc_patients(path)


def test_patients_with_the_wrong_number_of_qa_are_skipped_and_counted(tmp_path):
    rows = toy_rows(6)
    notes_file = write_csv(tmp_path / "n.csv", rows)
    qa_rows = [q for r in rows for q in sentence_qa(r["patient_uid"], r["patient"])]
    qa_rows = [q for q in qa_rows if not (q["patient_id"] == "1002-1" and q["qa_type"] == "factual")][:-1]
    folder = build_amnesia_folder(
        tmp_path / "out",
        source="pmc-patients",
        notes_path=notes_file,
        qa_path=write_jsonl(tmp_path / "qa.jsonl", qa_rows),
    )
    manifest = json.loads((folder / "amnesia_build.json").read_text())
    assert manifest["skipped"] == {"not exactly 4 factual and 4 reasoning QA": ["1002-1", "1005-1"]}
    assert "not exactly 4 factual and 4 reasoning QA: 2 patients" in (folder / "README.md").read_text()
    assert manifest["sizes"]["full"]["train"]["patients"] == 4


def test_qa_about_an_unknown_patient_or_bad_json_is_an_error_and_writes_nothing(tmp_path):
    rows = toy_rows(3)
    notes_file = write_csv(tmp_path / "n.csv", rows)
    qa_rows = [q for r in rows for q in sentence_qa(r["patient_uid"], r["patient"])]
    qa_rows[5]["patient_id"] = "nobody"
    with pytest.raises(RecordError, match=r"qa.jsonl, row 6, field 'patient_id': unknown patient 'nobody'"):
        build_amnesia_folder(
            tmp_path / "out",
            source="pmc-patients",
            notes_path=notes_file,
            qa_path=write_jsonl(tmp_path / "qa.jsonl", qa_rows),
        )
    (tmp_path / "bad.jsonl").write_text('{"patient_id": "1000-1"}\n{not json\n')
    with pytest.raises(FileContentError, match=r"bad.jsonl, line 2: invalid JSON at column 2"):
        build_amnesia_folder(
            tmp_path / "out", source="pmc-patients", notes_path=notes_file, qa_path=tmp_path / "bad.jsonl"
        )
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
