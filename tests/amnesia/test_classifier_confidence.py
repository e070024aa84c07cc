"""The rule-based classifier's confidence and deciding rule [ours]: stored in ``amnesia_build.json``
(``classifier``) and summarised in the card for a PMC-Patients build without a ``disease`` column, and carried
into the LLM construction report (disagreements and ``rule_classifier``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from amnesia_llm_fakes import NOTES, ScriptedBackend, ScriptedModel, write_notes_csv

from medunlearn.amnesia import build_amnesia_folder
from medunlearn.amnesia.hub import BUILD_FILE
from medunlearn.amnesia.sources.llm_built import ConstructionConfig, construct_records
from medunlearn.amnesia.sources.pmc_patients import (
    CONFIDENCE_DEFINITION,
    read_pmc_patients,
    read_pmc_patients_with_analyses,
)
from medunlearn.ontology.vocabulary import default_vocabulary

# (patient_uid, title, note) and, by hand, (category, confidence, rule). A score is 3 × the category's
# distinct affirmed mentions in the title + its distinct affirmed mentions in the note; the confidence is the
# winner's share of all the scores. The rule is the principle that decided (medunlearn.ontology.principles).
CASES = [
    # title: cancer (3); note: "invasive ductal carcinoma" (1) → 4 / 4; a neoplasm in the title decides.
    (
        "c1",
        "Breast cancer",
        "A woman had a breast lump. Biopsy showed invasive ductal carcinoma. She had a lumpectomy.",
        ("cancer", 1.0, "title: underlying neoplasm"),
    ),
    # no term in the title; note: pneumonia (infection), asthma (respiratory), gout (musculoskeletal), one
    # each: a three-way tie, pneumonia named first → 1 / 3.
    (
        "c2",
        "A case report",
        "A man had pneumonia and asthma. Later he developed gout.",
        ("infection_immune", 0.3333, "note: presenting problem, first named"),
    ),
    # title: pneumonia (3), gout (3); pneumonia, named first, is the primary diagnosis; note: none → 3 / 6.
    (
        "c3",
        "Pneumonia and gout",
        "A man had fever and a painful toe.",
        ("infection_immune", 0.5, "title: primary diagnosis"),
    ),
    # title: gout (3 + 1 in the note); note: pneumonia, tuberculosis (infection 2), asthma, bronchiectasis
    # (respiratory 2) → 4 / 8.
    (
        "c4",
        "Acute gout",
        "A man with gout had pneumonia, asthma, bronchiectasis and tuberculosis.",
        ("musculoskeletal", 0.5, "title: primary diagnosis"),
    ),
    # no term in the title; note: one cancer term in the opening lines → 1 / 1.
    (
        "c5",
        "A case report",
        "Biopsy showed invasive ductal carcinoma.",
        ("cancer", 1.0, "note: underlying neoplasm"),
    ),
    # no affirmed term anywhere: skipped.
    (
        "c6",
        "An unusual presentation",
        "A child had an unusual finding on examination. Imaging was normal.",
        None,
    ),
]
# Kept confidences 1.0, 0.3333, 0.5, 0.5, 1.0: mean 3.3333 / 5, median 0.5, min 0.3333; one below 0.5.
SUMMARY = {
    "notes": 5,
    "by_rule": {
        "note: presenting problem, first named": 1,
        "note: underlying neoplasm": 1,
        "title: primary diagnosis": 2,
        "title: underlying neoplasm": 1,
    },
    "confidence": {"mean": 0.6667, "median": 0.5, "min": 0.3333},
    "low_confidence": {"threshold": 0.5, "count": 1, "share": 0.2},
    "skipped_no_affirmed_term": 1,
}


def write_fixture(tmp_path: Path) -> tuple[Path, Path]:
    notes = tmp_path / "notes.csv"
    with notes.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["patient_uid", "title", "patient", "age", "gender"])
        writer.writeheader()
        for uid, title, note, _ in CASES:
            writer.writerow(
                {
                    "patient_uid": uid,
                    "title": title,
                    "patient": note,
                    "age": "[[50.0, 'year']]",
                    "gender": "M",
                }
            )
    qa = tmp_path / "qa.jsonl"
    rows = [
        {
            "patient_id": uid,
            "qa_type": qa_type,
            "question": f"{qa_type} question {k} about {uid}?",
            "answer": note,
        }
        for uid, _, note, _ in CASES
        for qa_type in ("factual", "reasoning")
        for k in range(4)
    ]
    qa.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return notes, qa


def test_confidence_and_rule_are_stored_summarised_and_deterministic(tmp_path):
    notes_path, qa_path = write_fixture(tmp_path)
    folder = build_amnesia_folder(
        tmp_path / "out", source="pmc-patients", notes_path=notes_path, qa_path=qa_path
    )
    manifest = json.loads((folder / BUILD_FILE).read_text())
    classifier = manifest["classifier"]
    assert classifier["confidence_definition"] == CONFIDENCE_DEFINITION
    assert classifier["patients"] == {
        uid: {"category": c, "confidence": p, "rule": r} for uid, _, _, (c, p, r) in CASES[:5]
    }
    assert classifier["summary"] == SUMMARY
    assert manifest["skipped"] == {"no disease category could be assigned from title and note": ["c6"]}

    card = (folder / "README.md").read_text()
    for text in (
        "## Disease labels (rule-based classifier)",
        "the winning category's share of the classifier's scores [ours]",
        "mean 0.6667, median 0.5000, min 0.3333",
        "**Confidence < 0.5:** 1 notes (20.0%)",
        "**skipped (no affirmed term):** 1",
        "| title: underlying neoplasm | 1 |",
        # the embedding second opinion: c2 (confidence 1/3) and the skipped c6 were asked
        "Asked on 1 notes placed with confidence < 0.5 and 1 skipped notes",
    ):
        assert text in card
    opinion = classifier["second_opinion"]
    assert opinion["available"] and sorted(opinion["notes"]) == ["c2", "c6"]
    assert opinion["notes"]["c2"]["rule"] == "infection_immune" and opinion["notes"]["c6"]["rule"] is None
    assert opinion["agreements"] + opinion["disagreements"] == 1
    assert "c2" not in card.split("## Disease labels")[1].split("## Usage")[0]  # no per-patient list

    again = build_amnesia_folder(
        tmp_path / "again", source="pmc-patients", notes_path=notes_path, qa_path=qa_path
    )
    for name in (BUILD_FILE, "README.md"):
        assert (again / name).read_bytes() == (folder / name).read_bytes()


def test_reader_contract_and_dropped_patients(tmp_path):
    notes_path, qa_path = write_fixture(tmp_path)
    table, skipped = read_pmc_patients(notes_path)  # the old two-value contract still holds
    assert skipped == ["c6"] and table.num_rows == 5
    _, _, analyses = read_pmc_patients_with_analyses(notes_path)
    assert sorted(analyses) == [uid for uid, *_ in CASES] and analyses["c6"].rule == "no affirmed term"

    # A patient dropped after classification (incomplete QA) is not listed; a file with a `disease` column
    # ran no classifier and writes no `classifier` section.
    rows = [json.loads(line) for line in qa_path.read_text().splitlines()]
    short = tmp_path / "short.jsonl"
    short.write_text(
        "".join(json.dumps(r) + "\n" for r in rows if r["patient_id"] != "c2" or r["qa_type"] != "factual")
    )
    folder = build_amnesia_folder(
        tmp_path / "out", source="pmc-patients", notes_path=notes_path, qa_path=short
    )
    classifier = json.loads((folder / BUILD_FILE).read_text())["classifier"]
    assert sorted(classifier["patients"]) == ["c1", "c3", "c4", "c5"]
    assert classifier["summary"]["low_confidence"] == {"threshold": 0.5, "count": 0, "share": 0.0}
    assert classifier["summary"]["skipped_no_affirmed_term"] == 1

    labelled = tmp_path / "labelled.csv"
    with labelled.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["patient_uid", "title", "patient", "disease"])
        writer.writeheader()
        for uid, title, note, _ in CASES:
            writer.writerow({"patient_uid": uid, "title": title, "patient": note, "disease": "cancer"})
    assert read_pmc_patients_with_analyses(labelled)[2] is None
    folder = build_amnesia_folder(
        tmp_path / "lab", source="pmc-patients", notes_path=labelled, qa_path=qa_path
    )
    assert "classifier" not in json.loads((folder / BUILD_FILE).read_text())
    assert "Disease labels (rule-based classifier)" not in (folder / "README.md").read_text()


def test_llm_built_disagreements_carry_the_rule_confidence(tmp_path):
    # The scripted labeller calls a "breast" title cancer; the rule-based classifier finds pneumonia.
    extra = {
        "patient_uid": "p6",
        "title": "Breast tenderness in a woman with pneumonia",
        "patient": "She had pneumonia and asthma. Her breast was tender on examination. She recovered.",
        "age": "[[40.0, 'year']]",
        "gender": "F",
    }
    notes_csv = tmp_path / "notes.csv"
    write_notes_csv(notes_csv, [*NOTES, extra])
    spec = "transformers:scripted"
    config = ConstructionConfig(generator=spec, cache=tmp_path / "llm.sqlite", max_regenerations=1)
    construction = construct_records(
        notes_csv, config, backends={spec: ScriptedBackend(ScriptedModel())}, progress=False
    )
    report = construction.report
    analyses = default_vocabulary().analyse_records(
        [n["title"] for n in [*NOTES, extra]], [n["patient"].replace("\\n", "\n") for n in [*NOTES, extra]]
    )
    by_id = dict(zip([n["patient_uid"] for n in [*NOTES, extra]], analyses))
    disagreements = report["labels"]["disagreement_list"]
    assert [d["patient_id"] for d in disagreements] == ["p6"]
    entry = disagreements[0]
    assert entry["llm"] == "cancer" and entry["rule"] == by_id["p6"].category != "cancer"
    assert entry["rule_confidence"] == by_id["p6"].confidence
    assert entry["rule_decided_by"] == by_id["p6"].rule
    confidences = sorted(a.confidence for a in analyses if a.category is not None)
    summary = report["rule_classifier"]
    assert summary["notes"] == len(confidences)
    assert summary["skipped_no_affirmed_term"] == sum(a.category is None for a in analyses)
    assert summary["confidence"]["min"] == confidences[0]
    assert summary["low_confidence"]["count"] == sum(c < 0.5 for c in confidences)
    assert sum(summary["by_rule"].values()) == len(confidences)
