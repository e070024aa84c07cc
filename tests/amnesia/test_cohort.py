import re

import numpy as np
import pytest

from medunlearn.amnesia.schema import validate_notes, validate_qa
from medunlearn.amnesia.sources.synthetic import disease_counts, generate_cohort
from medunlearn.ontology.amnesia import DISEASE_SHARES, QA_TYPES


@pytest.fixture(scope="module")
def cohort():
    return generate_cohort(patients=400, seed=7)


def test_same_seed_same_cohort_other_seed_other_cohort(cohort):
    notes, qa = cohort
    again_notes, again_qa = generate_cohort(patients=400, seed=7)
    assert notes.equals(again_notes) and qa.equals(again_qa)
    other_notes, _ = generate_cohort(patients=400, seed=8)
    assert other_notes["note"].to_pylist() != notes["note"].to_pylist()


def test_records_validate_and_each_patient_has_four_qa_of_each_type(cohort):
    notes, qa = cohort
    validate_notes(notes)
    validate_qa(qa)
    patient = np.asarray(qa["patient_id"].to_pylist())
    qa_type = np.asarray(qa["qa_type"].to_pylist())
    for kind in QA_TYPES:
        _, counts = np.unique(patient[qa_type == kind], return_counts=True)
        assert len(counts) == notes.num_rows and (counts == 4).all()


def test_disease_mix_follows_the_paper_shares():
    counts = disease_counts(8820, DISEASE_SHARES)
    assert sum(counts.values()) == 8820
    # docs/benchmarks/amnesia.md: cancer 30.3%, infection/immune 22.3%, cardiovascular 16.2% of 8,820
    # patients.
    assert (counts["cancer"], counts["infection_immune"], counts["cardiovascular"]) == (2672, 1967, 1429)
    assert len(counts) == 11


def test_no_two_notes_share_their_facts_and_questions_identify_one_patient(cohort):
    notes, qa = cohort
    assert len(set(notes["note"].to_pylist())) == notes.num_rows
    # Each patient's descriptor ("the 54-year-old male ... for three days") occurs in exactly one patient's
    # QA.
    owners: dict[str, set] = {}
    for question, patient in zip(qa["question"].to_pylist(), qa["patient_id"].to_pylist()):
        match = re.search(
            r"(\d+-year-old (?:male|female) [a-z ]+? who presented with .+? for [a-z ]+?)"
            r"(?:\?| treated| show| have| change|,)",
            question,
        )
        assert match, question
        owners.setdefault(match.group(1), set()).add(patient)
    assert all(len(patients) == 1 for patients in owners.values())
    assert len(owners) == notes.num_rows


def test_notes_carry_no_names_or_dates(cohort):
    notes, _ = cohort
    months = r"\b(January|February|March|April|June|July|August|September|October|November|December)\b"
    for note in notes["note"].to_pylist():
        assert not re.search(months, note)
        assert not re.search(r"\b(in|on|since|during|until) (19|20)\d\d\b", note)  # a year, not a lab value
        assert not re.search(r"\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b", note)
        assert not re.search(r"\b(Mr|Mrs|Ms|Dr)\.? [A-Z]", note)


def test_factual_answers_are_stated_in_the_note(cohort):
    notes, qa = cohort
    note_of = dict(zip(notes["patient_id"].to_pylist(), notes["note"].to_pylist()))
    for row in qa.to_pylist():
        if row["qa_type"] != "factual":
            continue
        note = note_of[row["patient_id"]].lower()
        answer = row["answer"].lower()
        assert answer in note or answer.replace(" beats per minute", "") in note, (answer, note)


def test_reasoning_answers_combine_several_facts_of_the_note(cohort):
    notes, qa = cohort
    note_of = dict(zip(notes["patient_id"].to_pylist(), notes["note"].to_pylist()))
    number = re.compile(r"\d+(?:\.\d+)?")
    for row in qa.to_pylist():
        if row["qa_type"] != "reasoning":
            continue
        note = note_of[row["patient_id"]].lower()
        answer = row["answer"].lower().rstrip(".")
        # Split the answer into its clauses; at least two must be facts taken from this note.
        clauses = [
            re.sub(r"^(on a background of|a|it rose|it fell)\b", "", c.strip()).strip()
            for c in re.split(r",| together with | supported by | and | after | from | to | showing ", answer)
        ]
        facts_in_note = [
            c
            for c in clauses
            if len(c) > 3 and (c in note or (number.fullmatch(c.split()[0] or "") and c.split()[0] in note))
        ]
        assert len(facts_in_note) >= 2, (answer, note)


def test_disease_keywords_come_from_the_note(cohort):
    notes, _ = cohort
    for title, note, keywords in zip(
        notes["title"].to_pylist(), notes["note"].to_pylist(), notes["disease_keywords"].to_pylist()
    ):
        assert keywords, note
        lowered = re.sub(r"[^a-z0-9]+", " ", f"{title} | {note}".lower())
        for keyword in keywords:
            assert f" {keyword} " in f" {lowered} "


def test_generator_rejects_an_empty_cohort():
    with pytest.raises(ValueError, match="patients"):
        generate_cohort(patients=0)


def test_shipped_icd_terms_are_what_icd10cm_gives():
    from importlib import resources

    from medunlearn.ontology.vocabulary import ICD_TERMS_FILE, derive_icd10cm_terms, render_icd_terms_file

    shipped = resources.files("medunlearn.ontology").joinpath("data").joinpath(ICD_TERMS_FILE).read_text()
    assert shipped == render_icd_terms_file(derive_icd10cm_terms())


def test_vocabulary_matches_on_word_boundaries_case_insensitively():
    from medunlearn.ontology.vocabulary import DiseaseVocabulary

    vocabulary = DiseaseVocabulary(
        {
            "gout": "musculoskeletal",
            "heart failure": "cardiovascular",
            "st-elevation myocardial infarction": "cardiovascular",
        }
    )
    assert vocabulary.find_terms(
        "Gouty tophi; no HEART   FAILURE. An ST elevation myocardial infarction."
    ) == ["heart failure", "st elevation myocardial infarction"]
    assert vocabulary.find_terms("gout, then gout again") == ["gout"]
    assert vocabulary.classify("Heart failure", "gout") == "cardiovascular"  # title weighs 3, note 1
    assert vocabulary.classify("A case", "nothing medical here") is None
