"""The ``holdout_notes`` config (notes fine-tuning never reads): drawn from a stream of its own, so every
other file of a build is byte-identical with or without it; listed in the card's configs block and checked
by the audit."""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from medunlearn.amnesia import build_amnesia
from medunlearn.amnesia.audit import AuditFailure, audit_folder
from medunlearn.amnesia.note_sets import holdout_note_rows, notes_for_memorization
from medunlearn.amnesia.pipeline import build_contents
from medunlearn.amnesia.sources.synthetic import generate_cohort, generate_holdout_notes
from medunlearn.config_names import folder_configs
from medunlearn.data_loading import load_config
from medunlearn.errors import InputError

HOLDOUT_FILE = "data/holdout_notes/train-00000-of-00001.parquet"


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("holdout-notes")
    with_notes = build_amnesia(root / "with", patients=30, seed=3)
    without = build_amnesia(root / "without", patients=30, seed=3, holdout_notes=0)
    return with_notes, without


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*.parquet"))


def test_every_existing_config_is_byte_identical_with_and_without_held_out_notes(builds):
    with_notes, without = builds
    assert _files(with_notes) == sorted([*_files(without), HOLDOUT_FILE])
    differing = [
        name for name in _files(without) if not filecmp.cmp(with_notes / name, without / name, False)
    ]
    assert differing == []
    # The cohort itself is what the seed gave before held-out notes existed: the notes of generate_cohort.
    cohort, _ = generate_cohort(patients=30, seed=3)
    notes = load_config(with_notes, "notes", "train")
    assert sorted(notes["note"]) == sorted(cohort["note"].to_pylist())


def test_held_out_notes_are_other_patients_listed_in_the_card_and_recorded(builds):
    with_notes, without = builds
    assert "holdout_notes" in folder_configs(with_notes) and "holdout_notes" not in folder_configs(without)
    rows = load_config(with_notes, "holdout_notes", "train")
    assert rows.column_names == load_config(with_notes, "notes", "train").column_names
    assert rows.num_rows == 8  # default: as many as forget_25 has patients (round(25% · 30), halves up)
    notes = load_config(with_notes, "notes", "train")
    assert not set(rows["patient_id"]) & set(notes["patient_id"])
    assert not set(rows["note"]) & set(notes["note"])
    assert all(pid.startswith("H") for pid in rows["patient_id"])
    build = json.loads((with_notes / "amnesia_build.json").read_text())
    assert (
        build["parameters"]["holdout_notes"] == 8
        and "holdout_notes" not in json.loads((without / "amnesia_build.json").read_text())["parameters"]
    )
    assert "`holdout_notes`: the notes of 8 more patients" in (with_notes / "README.md").read_text()
    assert [r["patient_id"] for r in holdout_note_rows(with_notes)] == sorted(rows["patient_id"])
    assert holdout_note_rows(without) == []
    sets = notes_for_memorization(with_notes, "forget_10")
    assert [r["patient_id"] for r in sets["holdout"]] == sorted(rows["patient_id"])


def test_held_out_notes_are_reproducible_from_the_seed_and_not_the_cohort():
    three = generate_holdout_notes(3, seed=3)
    assert generate_holdout_notes(3, seed=3).equals(three)
    assert generate_holdout_notes(3, seed=4)["note"].to_pylist() != three["note"].to_pylist()
    cohort, _ = generate_cohort(patients=3, seed=3)  # the cohort's stream gives other notes
    assert not set(cohort["note"].to_pylist()) & set(three["note"].to_pylist())


def test_audit_checks_the_held_out_notes(builds, tmp_path):
    with_notes, _ = builds
    checks = dict(audit_folder(with_notes).checks)
    assert checks["held-out notes"] == "8 notes of patients outside `notes` and `full`"

    clash = tmp_path / "clash"
    shutil.copytree(with_notes, clash)
    table = pq.read_table(clash / HOLDOUT_FILE)
    patient = load_config(with_notes, "notes", "train")["patient_id"][0]
    ids = table["patient_id"].to_pylist()
    ids[0] = patient
    table = table.set_column(0, "patient_id", [ids])
    pq.write_table(table, clash / HOLDOUT_FILE)
    with pytest.raises(AuditFailure, match=f"holdout_notes: patient '{patient}' has a note in `notes` too"):
        audit_folder(clash)

    missing = tmp_path / "missing"
    shutil.copytree(with_notes, missing)
    readme = (missing / "README.md").read_text()
    block = "- config_name: holdout_notes\n  data_files:\n  - split: train\n    path: " + HOLDOUT_FILE + "\n"
    assert block in readme
    (missing / "README.md").write_text(readme.replace(block, ""))
    with pytest.raises(AuditFailure, match="`holdout_notes` is missing although the build asked for 8 notes"):
        audit_folder(missing)


def test_only_the_synthetic_source_draws_held_out_notes(tmp_path):
    with pytest.raises(InputError, match="holdout_notes 2: only --source synthetic"):
        build_contents(source="pmc-patients", notes_path="x.csv", qa_path="y.jsonl", holdout_notes=2)
    with pytest.raises(InputError, match="holdout_notes must be at least 0, got -1"):
        build_contents(patients=20, holdout_notes=-1)
