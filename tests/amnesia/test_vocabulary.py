"""The rule-based disease classifier and the disease keywords (issue 11, part 4): one test per rule, the term
table, and accuracy on hand-labelled real notes."""

import csv
from pathlib import Path

import pytest

from medunlearn.amnesia.sources.pmc_patients import line_breaks, read_pmc_patients
from medunlearn.ontology.amnesia import DISEASES
from medunlearn.ontology.vocabulary import DiseaseVocabulary, default_vocabulary

HAND_LABELS = Path(__file__).parent / "data" / "hand_labels.tsv"
TOY = {
    "appendicitis": "digestive",
    "infection": "infection_immune",
    "sars-cov-2": "infection_immune",
    "sepsis": "infection_immune",
    "gout": "musculoskeletal",
    "hypertension": "cardiovascular",
    "heart failure": "cardiovascular",
    "atrial fibrillation": "cardiovascular",
    "pneumonia": "infection_immune",
    "hepatitis b": "infection_immune",
    "iga nephropathy": "kidney_urinary",
    "depression": "mental_behavioral",
    "stroke": "neurological",
    "seizure": "neurological",
}


@pytest.fixture(scope="module")
def toy():
    return DiseaseVocabulary(TOY, wrong_senses=["depression of consciousness"])


def test_the_title_outweighs_comorbidities_in_the_note(toy):
    note = "History of hypertension, heart failure and atrial fibrillation. Now a painful toe."
    result = toy.analyse_records(["Acute gout"], [note])[0]
    assert (result.category, result.rule) == ("musculoskeletal", "title: primary diagnosis")
    assert result.scores == {"musculoskeletal": 3.0, "cardiovascular": 3.0}
    assert result.confidence == 0.5  # the winning score share: the note disagrees


def test_a_title_tie_goes_to_the_category_named_first_in_the_title_never_to_category_order(toy):
    note = "Sepsis and pneumonia followed."
    # Adjacent terms of one category are one mention ("SARS-CoV-2 infection"), so the title ties 1 to 1.
    first = toy.analyse_records(["Appendicitis in a child with SARS-CoV-2 infection"], [note])[0]
    assert (first.category, first.rule) == ("digestive", "title: primary diagnosis")  # issue 23: first named
    # category order would say otherwise:
    assert DISEASES.index("infection_immune") < DISEASES.index("digestive")
    swapped = toy.analyse_records(["SARS-CoV-2 infection with appendicitis"], [note])[0]
    assert swapped.category == "infection_immune"


def test_a_note_tie_goes_to_the_category_named_first_in_the_note(toy):
    result = toy.analyse_records(["A case report"], ["Appendicitis, then pneumonia."])[0]
    assert (result.category, result.rule, result.confidence) == (
        "digestive",
        "note: presenting problem, first named",
        0.5,
    )


def test_negated_mentions_count_neither_for_the_category_nor_as_keywords(toy):
    result = toy.analyse_records(
        ["A case report"],
        ["There was no dental infection. She was negative for hepatitis B. Stroke followed."],
    )[0]
    assert (result.category, result.keywords) == ("neurological", ["stroke"])
    assert toy.find_terms("no dental infection") == ["infection"]  # find_terms stays lexical


def test_ruled_out_differentials_do_not_count(toy):
    note = "The differential diagnosis included IgA nephropathy. Hypertension was treated."
    result = toy.analyse_records(["A case report"], [note])[0]
    assert (result.category, result.keywords) == ("cardiovascular", ["hypertension"])
    ruled_out = toy.analyse_records(["A case report"], ["Pneumonia was ruled out. Gout."])[0]
    assert ruled_out.keywords == ["gout"]


def test_a_negation_ends_at_a_new_finding(toy):
    result = toy.analyse_records(["Case"], ["A man with no past medical history presented with pneumonia."])
    assert result[0].keywords == ["pneumonia"]


def test_a_wrong_sense_is_not_the_disease(toy):
    note = "Depression of consciousness after a seizure."
    result = toy.analyse_records(["A case report"], [note])[0]
    assert (result.category, result.keywords) == ("neurological", ["seizure"])
    assert toy.find_terms(note) == ["seizure"]
    default = default_vocabulary()
    assert default.find_terms("ST depression and tumor necrosis factor; stroke volume") == []


def test_no_affirmed_term_is_a_skip_with_zero_confidence(toy):
    result = toy.analyse_records(["A case report"], ["No pneumonia."])[0]
    assert (result.category, result.confidence, result.rule) == (None, 0.0, "no affirmed term")
    assert toy.classify("A case report", "No pneumonia.") is None


def test_plurals_match_the_singular_term_and_are_reported_as_written(toy):
    assert toy.find_terms("Two seizures.") == ["seizures"]


def test_the_batched_and_single_record_functions_agree():
    vocabulary = default_vocabulary()
    titles = ["Giant cell arteritis", "Rhabdomyolysis after a marathon", "Moderate ARDS"]
    notes = [
        "Headache and jaw claudication.",
        "Creatine kinase was high. No kidney injury.",
        "Prone ventilation.",
    ]
    batch = vocabulary.analyse_records(titles, notes)
    assert [r.category for r in batch] == [vocabulary.classify(t, n) for t, n in zip(titles, notes)]
    assert vocabulary.classify_records(titles, notes) == [r.category for r in batch]
    assert vocabulary.record_keywords(titles, notes) == [r.keywords for r in batch]
    assert vocabulary.category_scores(titles[0], notes[0]) == batch[0].scores


@pytest.mark.parametrize(
    "term, category",
    [
        ("ards", "respiratory"),
        ("acute respiratory distress syndrome", "respiratory"),
        ("rhabdomyolysis", "musculoskeletal"),
        ("lupus nephritis", "kidney_urinary"),
        ("giant cell arteritis", "infection_immune"),
        ("pheochromocytoma", "endocrine_metabolic"),
        ("myelofibrosis", "cancer"),
        ("narcolepsy", "neurological"),
        ("cholangitis", "digestive"),
        ("supraventricular tachycardia", "cardiovascular"),
    ],
)
def test_the_term_table(term, category):
    assert default_vocabulary().term_categories[term] == category


def test_removed_terms_are_gone():
    vocabulary = default_vocabulary()
    for term in ("lymphadenopathy", "oncology", "aids", "fat pad"):
        assert term not in vocabulary.term_categories
    assert vocabulary.find_terms("He wore hearing aids.") == []


def write_notes(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["patient_uid", "title", "patient"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_literal_backslash_n_paragraph_breaks_are_line_breaks(tmp_path):
    # As in the PMC-Patients CSV release: the two characters "\" "n" between paragraphs.
    note = r"No fever\nPneumonia was seen on CT.\nShe recovered."
    notes, skipped = read_pmc_patients(
        write_notes(tmp_path / "n.csv", [{"patient_uid": "1-1", "title": "A case", "patient": note}])
    )
    assert notes["note"][0].as_py() == "No fever\nPneumonia was seen on CT.\nShe recovered."
    # The paragraph ends the sentence, so "No" does not negate the next paragraph; and the word after the
    # break is "pneumonia" (read raw, it was "npneumonia" and matched nothing).
    assert notes["disease"].to_pylist() == ["infection_immune"] and skipped == []
    assert notes["disease_keywords"][0].as_py() == ["pneumonia"]
    assert line_breaks(note).count("\n") == 2


def read_hand_labels() -> list[tuple[str, str]]:
    lines = [line.rstrip("\n").split("\t") for line in HAND_LABELS.read_text().splitlines(keepends=True)]
    rows = [line for line in lines if line[0] and not line[0].startswith("#")][1:]
    return [(row[0], row[1]) for row in rows]


def test_hand_labels_are_ids_and_known_labels_only():
    labels = read_hand_labels()
    assert len(labels) == 50 and len({uid for uid, _ in labels}) == 50
    assert {label for _, label in labels} <= {*DISEASES, "none"}


@pytest.mark.integration
def test_accuracy_on_hand_labelled_real_notes(shared_data):
    """The classifier on 50 hand-labelled notes of the shared 600-note sample (ids and labels in
    ``data/hand_labels.tsv``; drawn with ``random.Random(11).sample(range(600), 50)``).

    Measured [ours] (issue 11), "none" = a note a reader gives no category; a skip of such a note is right:

    | | skipped | right / classified | right / 50 (a skip of a "none" note is right) | skip rate, all 600 |
    |---|---|---|---|---|
    | before (git HEAD ``e2bc24e``, measured once by hand) | 13 (26%) | 25 / 37 (67.6%) | 28 (56%) | 13.2% |
    | after | 5 (10%) | 38 / 45 (84.4%) | 40 (80%) | 7.7% |
    """
    notes_file = shared_data / "pmc-patients-sample" / "PMC-Patients-sample-600.csv"
    csv.field_size_limit(2**31 - 1)
    with notes_file.open(newline="", encoding="utf-8") as handle:
        rows = {row["patient_uid"]: row for row in csv.DictReader(handle)}
    labels = read_hand_labels()
    vocabulary = default_vocabulary()
    results = vocabulary.analyse_records(
        [line_breaks(rows[uid]["title"]) for uid, _ in labels],
        [line_breaks(rows[uid]["patient"]) for uid, _ in labels],
    )
    predicted = [result.category for result in results]
    classified = [(p, label) for p, (_, label) in zip(predicted, labels) if p is not None]
    right = sum(p == label for p, label in classified)
    right_all = sum((p or "none") == label for p, (_, label) in zip(predicted, labels))
    skipped = len(labels) - len(classified)
    print(
        f"hand-labelled sample: n={len(labels)}, skipped {skipped}, right {right}/{len(classified)} "
        f"({right / len(classified):.1%}) of the classified, {right_all}/{len(labels)} in all"
    )
    assert right / len(classified) >= 0.84 - 0.05
    assert right_all >= 40 - 3
    assert skipped <= 5 + 2
    assert all(0.0 < r.confidence <= 1.0 for r in results if r.category is not None)
    everything = vocabulary.analyse_records(
        [line_breaks(r["title"]) for r in rows.values()], [line_breaks(r["patient"]) for r in rows.values()]
    )
    skip_rate = sum(r.category is None for r in everything) / len(everything)
    print(f"skip rate on all {len(everything)} notes: {skip_rate:.1%}")
    assert skip_rate <= 0.077 + 0.02
