"""The note sets of verbatim memorization on AMNESIA (medunlearn.amnesia.note_sets): the forget patients'
notes exactly, the retained patients split by the forget patients' diseases, and held-out notes only
where named."""

from __future__ import annotations

import pytest

from medunlearn.amnesia import build_amnesia_folder
from medunlearn.amnesia.note_sets import NoteSetError, config_patient_ids, notes_for_memorization
from medunlearn.data_loading import load_config


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_amnesia_folder(tmp_path_factory.mktemp("amnesia") / "data", patients=20, seed=0)


def qa_patients(folder, config) -> set[str]:
    """Patients of a QA config, read independently: both of its splits."""
    return {row["patient_id"] for split in ("train", "holdout") for row in load_config(folder, config, split)}


def test_the_four_sets_partition_the_notes_by_forget_patient_and_disease(folder):
    notes = {row["patient_id"]: row for row in load_config(folder, "notes", "train")}
    forget_ids = qa_patients(folder, "forget_10")
    assert 0 < len(forget_ids) < len(notes)
    sets = notes_for_memorization(folder, "forget_10")
    assert set(sets) == {"forget", "retain_same_disease", "retain_other_disease", "holdout"}
    assert {row["patient_id"] for row in sets["forget"]} == forget_ids
    for row in sets["forget"]:
        source = notes[row["patient_id"]]
        assert row["text"] == f"{source['title']}\n{source['note']}"  # what fine-tuning's stage 1 read
        assert row["note"] == source["note"] and row["disease"] == source["disease"]
    forget_diseases = {notes[pid]["disease"] for pid in forget_ids}
    same = {row["patient_id"] for row in sets["retain_same_disease"]}
    other = {row["patient_id"] for row in sets["retain_other_disease"]}
    assert same | other == set(notes) - forget_ids and not same & other
    assert all(notes[pid]["disease"] in forget_diseases for pid in same)
    assert all(notes[pid]["disease"] not in forget_diseases for pid in other)
    assert same and other  # the small folder has both kinds
    # The folder's holdout_notes config: notes of patients outside it, never read by `medunlearn finetune`.
    assert [row["patient_id"] for row in sets["holdout"]] == sorted(
        load_config(folder, "holdout_notes", "train")["patient_id"]
    )
    assert not {row["patient_id"] for row in sets["holdout"]} & set(notes)


def test_disease_level_forget_set_has_one_disease_on_the_same_side(folder):
    configs = [c for c in ("disease_cancer_forget_10", "disease_cardiovascular_forget_10")]
    config = next(c for c in configs if qa_patients(folder, c))
    sets = notes_for_memorization(folder, config)
    diseases = {row["disease"] for row in sets["forget"]}
    assert len(diseases) == 1
    assert {row["disease"] for row in sets["retain_same_disease"]} <= diseases


def test_named_holdout_patients_leave_the_retain_sets_and_bad_ones_are_refused(folder):
    sets = notes_for_memorization(folder, "forget_10")
    chosen = [sets["retain_other_disease"][0]["patient_id"], sets["retain_same_disease"][0]["patient_id"]]
    with_holdout = notes_for_memorization(folder, "forget_10", holdout_patients=chosen)
    unseen = [row["patient_id"] for row in sets["holdout"]]  # the holdout_notes config's, always there
    assert sorted(row["patient_id"] for row in with_holdout["holdout"]) == sorted(chosen + unseen)
    retained = [
        row["patient_id"]
        for key in ("retain_same_disease", "retain_other_disease")
        for row in with_holdout[key]
    ]
    assert not set(chosen) & set(retained)
    assert len(retained) + len(chosen) == len(sets["retain_same_disease"]) + len(sets["retain_other_disease"])
    forget_id = sets["forget"][0]["patient_id"]
    with pytest.raises(NoteSetError, match=f"holdout patient {forget_id!r} is a forget patient of forget_10"):
        notes_for_memorization(folder, "forget_10", holdout_patients=[forget_id])
    with pytest.raises(NoteSetError, match="holdout patient 'nobody' has no note"):
        notes_for_memorization(folder, "forget_10", holdout_patients=["nobody"])


def test_config_patient_ids_reads_both_splits_and_names_an_unknown_config(folder):
    assert set(config_patient_ids(folder, "retain_90")) == qa_patients(folder, "retain_90")
    with pytest.raises(Exception, match="forget_99"):
        config_patient_ids(folder, "forget_99")


@pytest.mark.parametrize("field", ["note", "title"])
def test_a_null_note_or_title_is_named_not_read_as_the_text_none(folder, tmp_path, field):
    """Before: ``note_document(title, None)`` made the document ``"<title>\\nNone"``, trained and scored."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from medunlearn.amnesia.note_sets import note_rows
    from medunlearn.errors import FileContentError

    copy = tmp_path / "data"
    shutil.copytree(folder, copy)
    path = copy / "data" / "notes" / "train-00000-of-00001.parquet"
    table = pq.read_table(path)
    values = table[field].to_pylist()
    values[2] = None
    pq.write_table(table.set_column(table.schema.get_field_index(field), field, pa.array(values)), path)
    with pytest.raises(
        FileContentError, match=rf"notes/train-00000-of-00001.parquet, row 3, field '{field}': "
    ):
        note_rows(copy)
