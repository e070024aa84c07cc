"""The rule-based disease classifier of issue 23: one test per principle (medunlearn.ontology.principles), the
keyword error classes, the hand labels and their frozen split, and the figures on the frozen half, the tuning
half and the 30 keyword-checked notes (printed; docs/benchmarks/amnesia.md, "Disease classifier")."""

from __future__ import annotations

import doctest
import importlib
import random

import pytest
from amnesia.hand_labels import (
    V1,
    V2,
    V3,
    Label,
    all_labels,
    classify,
    figures,
    line_breaks,
    read_label_file,
    read_sample,
    reader_agreement,
    second_reading,
)

from medunlearn.ontology.amnesia import DISEASES
from medunlearn.ontology.vocabulary import DiseaseVocabulary, default_vocabulary

TOY = {
    "pneumonia": "infection_immune",
    "sepsis": "infection_immune",
    "lymphoma": "cancer",
    "intussusception": "digestive",
    "hypertension": "cardiovascular",
    "atrial fibrillation": "cardiovascular",
    "cardiomyopathy": "cardiovascular",
    "diabetes": "endocrine_metabolic",
    "stroke": "neurological",
    "hernia": "digestive",
    "renal artery stenosis": "kidney_urinary",
    "portal hypertension": "digestive",
    "hypothyroidism": "endocrine_metabolic",
    "rhabdomyolysis": "musculoskeletal",
}
CUES = {
    "pregnancy": "pregnancy",
    "chemotherapy": "neoplasm",
    "dental": "digestive",
    "gastrectomy": "digestive",
}


@pytest.fixture(scope="module")
def toy():
    cues = DiseaseVocabulary(CUES, negation=False, roots={"nephr": "kidney_urinary"})
    return DiseaseVocabulary(TOY, cues=cues, neoplasm_morphology=True)


def decide(vocabulary, title, note="The patient recovered."):
    result = vocabulary.analyse_records([title], [note])[0]
    return result.category, result.rule


def test_the_title_primary_diagnosis_is_the_first_it_names_not_the_most_named(toy):
    # Two cardiovascular comorbidities named after the head diagnosis do not outvote it.
    title = "Pneumonia in a patient with hypertension, atrial fibrillation and cardiomyopathy"
    assert decide(toy, title) == ("infection_immune", "title: primary diagnosis")


def test_an_underlying_neoplasm_wins_over_its_complications(toy):
    assert decide(toy, "Intussusception secondary to Burkitt lymphoma") == (
        "cancer",
        "title: underlying neoplasm",
    )
    assert decide(toy, "Sepsis in a patient with lymphoma") == ("cancer", "title: underlying neoplasm")


def test_a_neoplasm_named_only_by_its_morphology_is_a_neoplasm(toy):
    # "pseudomyxoma" is in no term list: its "-oma" names a neoplasm; "hematoma" does not.
    assert decide(toy, "Pseudomyxoma peritonei with sepsis") == ("cancer", "title: underlying neoplasm")
    assert decide(toy, "Subdural hematoma after a stroke") == ("neurological", "title: primary diagnosis")


def test_the_cause_named_after_secondary_to_wins(toy):
    title = "Hypertension secondary to renal artery stenosis"
    assert decide(toy, title) == ("kidney_urinary", "title: underlying cause")


def test_a_trigger_is_not_the_diagnosis_the_condition_it_induced_is(toy):
    # ICD-10-CM codes an adverse effect by its nature first; both hand readers read "X-induced Y" as Y.
    for title in ("Severe hypothyroidism-induced rhabdomyolysis", "Rhabdomyolysis induced by hypothyroidism"):
        assert decide(toy, title) == ("musculoskeletal", "title: primary diagnosis"), title
    # An infection as the trigger stays first: ICD-10-CM sequences it first ("code first" COVID-19, sepsis).
    assert decide(toy, "Sepsis-induced rhabdomyolysis") == ("infection_immune", "title: primary diagnosis")
    # A trigger alone is still the diagnosis, and "induced" elsewhere changes nothing.
    assert decide(toy, "Hypothyroidism-induced changes") == (
        "endocrine_metabolic",
        "title: primary diagnosis",
    )
    assert decide(toy, "Hypothyroidism in a patient with rhabdomyolysis") == (
        "endocrine_metabolic",
        "title: primary diagnosis",
    )


def test_a_pregnancy_title_is_maternal_child_first(toy):
    title = "Hernia in pregnancy"
    assert decide(toy, title) == ("maternal_child", "title: pregnancy (ICD-10-CM chapter 15)")


def test_a_title_naming_an_organ_or_procedure_but_no_disease_goes_to_its_system(toy):
    note = "She had a history of stroke and diabetes. Her hypertension was treated."
    assert decide(toy, "Fistula after sleeve gastrectomy", note) == ("digestive", "title: organ system")
    assert decide(toy, "Dental implant surgery", note) == ("digestive", "title: organ system")
    # an organ root after an anatomical prefix
    assert decide(toy, "Perinephric collection", note) == ("kidney_urinary", "title: organ system")
    assert decide(toy, "Outcomes after chemotherapy", note) == ("cancer", "title: neoplasm treatment")


def test_the_presenting_problem_outweighs_a_comorbidity_list(toy):
    note = (
        "A man with a history of hypertension, atrial fibrillation, cardiomyopathy and diabetes "
        "presented with pneumonia."
    )
    assert decide(toy, "A case report", note) == ("infection_immune", "note: presenting problem")
    only_history = "A man with a history of hypertension and atrial fibrillation."
    assert decide(toy, "A case report", only_history) == ("cardiovascular", "note: history only")


def test_a_neoplasm_in_the_opening_lines_decides_a_title_without_a_term(toy):
    note = "A woman with lymphoma. She had a rash.\nLater: pneumonia, sepsis, stroke and hypertension."
    assert decide(toy, "A sweet diagnosis for a non-resolving rash", note) == (
        "cancer",
        "note: underlying neoplasm",
    )


def test_an_infection_named_as_such_is_infection_immune():
    """An organism, sepsis, an abscess or pus names an infection whatever organ chapter ICD-10-CM files the
    term under (the hand labels' convention, medunlearn.ontology.conventions)."""
    vocabulary = default_vocabulary()
    note = "The patient recovered."
    # a genus named before the organ disease: the infection is the primary diagnosis
    assert decide(vocabulary, "Candida glabrata: a unique cause of necrotizing urethritis", note) == (
        "infection_immune",
        "title: primary diagnosis",
    )
    # an organism's ending, and a disease named after a genus, both unlisted as terms
    assert decide(vocabulary, "Empyema caused by Streptococcus constellatus", note)[0] == "infection_immune"
    assert decide(vocabulary, "Human fasciolosis in Iran", note)[0] == "infection_immune"
    # an organ chapter's infection term ("abscess of liver", K75.0; "pyogenic arthritis", M00)
    assert decide(vocabulary, "Hepatic abscess after cholecystectomy", note)[0] == "infection_immune"
    assert decide(vocabulary, "Septic arthritis of the knee", note)[0] == "infection_immune"
    # not infections: "-osis" of no genus, a stone, a negated infection word
    from medunlearn.ontology.conventions import is_organism_name, names_infection

    assert not any(map(is_organism_name, ("fibrosis", "nephrolithiasis", "psoriasis", "sclerosis")))
    assert not names_infection("non infectious uveitis") and names_infection("infected lung bulla")
    assert decide(vocabulary, "Idiopathic pulmonary fibrosis", note)[0] == "respiratory"


def test_an_eye_ear_or_skin_title_gets_no_category_and_the_note_is_skipped():
    """Eye, ear and skin conditions (ICD-10-CM chapters 7, 8, 12) are no category of ours: a title whose
    primary diagnosis or only organ is one of them is skipped, not given the category of another word; in a
    note they decide nothing and are no keyword."""
    vocabulary = default_vocabulary()
    no_category = "title: no category (eye, ear or skin: ICD-10-CM chapters 7, 8, 12)"
    note = "She had hypertension. Visual acuity fell."
    # "keratopathy" by its form; the nerve block and neuralgia after it are not the diagnosis
    title = "Neurotrophic keratopathy after trigeminal nerve block for postherpetic neuralgia"
    assert decide(vocabulary, title, note) == (None, no_category)
    assert decide(vocabulary, "Exacerbation of branch retinal vein occlusion after vaccination", note) == (
        None,
        no_category,
    )
    assert decide(vocabulary, "Erythema nodosum associated with a vaccine", note) == (None, no_category)
    # an organ of the eye and no disease: no category, not the note's hypertension
    assert decide(vocabulary, "Four-year follow-up of a macular cavitation", note) == (None, no_category)
    # an infection or a neoplasm of the eye is still one
    assert decide(vocabulary, "Propionibacterium acnes endophthalmitis", note)[0] == "infection_immune"
    assert decide(vocabulary, "Choroidal melanoma", note)[0] == "cancer"
    # in the note: not a category, not a keyword
    result = vocabulary.analyse_records(["A case report"], ["Uveitis and glaucoma. Later, hypertension."])[0]
    assert (result.category, result.keywords) == ("cardiovascular", ["hypertension"])


def test_a_name_written_in_another_word_order_is_the_same_disease():
    """ICD-10-CM writes a name one way ("Malignant neuroleptic syndrome", "Adenosine deaminase 2
    deficiency"); titles write its modifiers in another order or its head first with "of"."""
    vocabulary = DiseaseVocabulary({"malignant neuroleptic syndrome": "neurological", "femur fracture": "x"})
    found = vocabulary.mentions("Neuroleptic malignant syndrome after a fracture of the femur")
    assert [(m.term, m.category) for m in found] == [
        ("neuroleptic malignant syndrome", "neurological"),
        ("fracture of the femur", "x"),
    ]
    # the head stays last: the modifiers alone, or the head before them without "of", are not the name
    assert vocabulary.mentions("syndrome malignant neuroleptic; fracture femur") == []
    # a wrong-sense phrase written in the variant's words keeps its sense
    senses = DiseaseVocabulary({"st depression": "mental_behavioral"}, wrong_senses=["depression of st"])
    assert senses.mentions("depression of ST") == []
    full = default_vocabulary()
    title = "Deficiency of Adenosine Deaminase 2 in Adult Siblings"
    assert decide(full, title) == ("infection_immune", "title: primary diagnosis")


def test_a_named_two_word_syndrome_is_a_disease_a_vague_one_is_not():
    from medunlearn.ontology.icd10cm import icd_description_term

    assert icd_description_term("Takotsubo syndrome") == "takotsubo syndrome"
    assert icd_description_term("Kidney disease") == "kidney disease"
    assert [icd_description_term(n) for n in ("Pain syndrome", "Autoimmune disease", "Syndrome")] == [
        None
    ] * 3
    vocabulary = default_vocabulary()
    title = "Recurrent Takotsubo syndrome complicated with ischemic enteritis"
    assert decide(vocabulary, title) == ("cardiovascular", "title: primary diagnosis")


def test_keyword_error_classes(toy):
    vocabulary = default_vocabulary()
    # hypothetical, weighed, mistaken or someone else's: not affirmed, so not keywords
    note = (
        "Coverage for possible pneumonia was started. The risk of trisomy 21 was low. "
        "Her family history was remarkable for lymphoma. Liver failure in mother and aunt."
    )
    assert vocabulary.analyse_records(["A case"], [note])[0].keywords == []
    # "-like" names a resemblance; a nested term of another category names another disease
    result = vocabulary.analyse_records(["A case"], ["A tumor-like firmness. Portal hypertension."])[0]
    assert result.keywords == ["portal hypertension"]
    assert toy.find_terms("portal hypertension") == ["portal hypertension"]
    # wrong senses: a board, a nerve block, an anatomical ganglion, tissue stroma
    wrong = "The tumor board met. Gasserian ganglion block. Fibrous stroma. Anti-infection drugs."
    assert vocabulary.find_terms(wrong) == []


@pytest.mark.parametrize(
    "name",
    [
        "medunlearn.ontology.principles",
        "medunlearn.ontology.icd10cm",
        "medunlearn.ontology.vocabulary",
        "medunlearn.ontology.conventions",
    ],
)
def test_module_doctests(name):
    failures, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0


def test_hand_labels_v2_are_new_notes_known_labels_and_the_seeded_split():
    v1, v2 = read_label_file(V1), read_label_file(V2)
    assert len(v2) == 160 and len({label.patient_uid for label in v2}) == 160
    assert not {label.patient_uid for label in v2} & {label.patient_uid for label in v1}
    assert {label.label for label in v2} <= {*DISEASES, "none"}
    assert all(label.basis and label.principle for label in v2)
    frozen = set(random.Random(2023).sample(range(160), 80))
    assert [label.half for label in v2] == ["frozen" if k in frozen else "tune" for k in range(160)]


def test_hand_labels_v3_are_further_new_notes_drawn_with_their_seed(shared_data):
    v1, v2, v3 = read_label_file(V1), read_label_file(V2), read_label_file(V3)
    uids = list(read_sample(shared_data))
    earlier = {label.patient_uid for label in v1 + v2}
    rest = [index for index, uid in enumerate(uids) if uid not in earlier]
    assert [label.patient_uid for label in v3] == [uids[k] for k in random.Random(2024).sample(rest, 120)]
    assert {label.half for label in v3} == {"tune3"}
    assert {label.label for label in v3} <= {*DISEASES, "none"}


def test_the_second_reading_covers_exactly_the_frozen_half_in_its_shuffled_order():
    frozen = [label.patient_uid for label in read_label_file(V2) if label.half == "frozen"]
    random.Random(7).shuffle(frozen)
    second = second_reading()
    assert list(second) == frozen
    assert {label.label for label in second.values()} <= {*DISEASES, "none"}
    assert {label.principle for label in second.values()} == {"sure", "unsure"}


def test_reader_agreement_counts_agreements_and_scores_the_classifier_on_them_only():
    first = [
        Label(uid, label, "frozen", "", "")
        for uid, label in [("a", "cancer"), ("b", "digestive"), ("c", "none")]
    ]
    second = {
        "a": Label("a", "cancer", "frozen", "sure", ""),
        "b": Label("b", "respiratory", "frozen", "unsure", ""),
        "c": Label("c", "none", "frozen", "unsure", ""),
    }
    # The classifier is wrong on a, right on b (where the readers disagree: not counted) and skips c.
    result = reader_agreement(["digestive", "digestive", None], first, second)
    assert (result.notes, result.agreed, result.agreed_sure, result.sure) == (3, 2, 1, 1)
    assert (result.classifier.notes, result.classifier.right, result.classifier.skipped) == (2, 0, 1)


def test_the_helper_reads_line_breaks_as_the_reader_does():
    from medunlearn.amnesia.sources.pmc_patients import line_breaks as reader_line_breaks

    text = r"Fever.\nCough."
    assert line_breaks(text) == reader_line_breaks(text)


def by_half(labels: list[Label], analyses, half: str):
    chosen = [(a.category, label) for a, label in zip(analyses, labels) if label.half == half]
    return figures([p for p, _ in chosen], [label for _, label in chosen])


@pytest.mark.integration
def test_accuracy_on_the_frozen_half(shared_data):
    """Accuracy of the classified notes and skip rate, per half, from the labels in the repo (issue 23).

    Measured [ours] (docs/benchmarks/amnesia.md, "Disease classifier"):

    | right / classified, skips | frozen half (80, the test set) | tuning half (80) | issue-11 50 |
    |---|---|---|---|
    | before (git ``813dd38``) | 51/78 = 65.4%, 2.5% | 53/71 = 74.6%, 11.2% | 38/45 = 84.4%, 10% |
    | after the principles (git ``e9dc1d3``) | 56/80 = 70.0%, 0.0% | 66/77 = 85.7%, 3.8% | 42/50 = 84.0%, 0% |
    | after the two conventions | 54/76 = 71.1%, 5.0% | 70/77 = 90.9%, 3.8% | 42/49 = 85.7%, 2% |
    | + word order, syndromes, dental | 54/76 = 71.1%, 5.0% | 71/77 = 92.2%, 3.8% | 42/49 = 85.7%, 2% |
    | + "X-induced Y" names Y | 54/76 = 71.1%, 5.0% | 71/77 = 92.2%, 3.8% | 42/49 = 85.7%, 2% |

    The second reader's 120 (``tune3``): 86/111 = 77.5% before those changes (unseen then), 89/111 = 80.2%
    after, 90/111 = 81.1% with "X-induced Y". A second blind reading of the frozen half agrees with the first
    on 71/80 notes; the classifier is right on 49/68 of the agreed notes it classifies.

    The issue's target (85% on the frozen half) is not met; the floor below guards the measured figure.
    """
    labels = all_labels()
    analyses = classify(labels, read_sample(shared_data))
    frozen, tune = by_half(labels, analyses, "frozen"), by_half(labels, analyses, "tune")
    print(frozen.line("frozen half"))
    print(tune.line("tuning half"))
    print(by_half(labels, analyses, "v1").line("issue-11 50"))
    print(by_half(labels, analyses, "tune3").line("second reader's 120"))
    frozen_labels = [label for label in labels if label.half == "frozen"]
    frozen_predicted = [a.category for a, label in zip(analyses, labels) if label.half == "frozen"]
    print(reader_agreement(frozen_predicted, frozen_labels, second_reading()).line("second reading"))
    assert frozen.skip_rate <= 0.05
    assert frozen.accuracy >= 0.711 - 0.02
    assert all(0.0 < a.confidence <= 1.0 for a in analyses if a.category is not None)


@pytest.mark.integration
def test_keyword_acceptance_on_30_checked_notes(shared_data):
    """Share of extracted disease keywords a reader accepts (affirmed, this patient's, the right sense) on 30
    notes of the tuning half (``data/keyword_checks.tsv``). Every keyword extracted must have been read."""
    checks = [
        line.split("\t")
        for line in (V2.parent / "keyword_checks.tsv").read_text().splitlines()
        if line and not line.startswith("#")
    ][1:]
    accepted = {(uid, keyword): accept == "1" for uid, keyword, accept, *_ in checks}
    uids = list(dict.fromkeys(uid for uid, *_ in checks))
    rows = read_sample(shared_data)
    results = default_vocabulary().analyse_records(
        [line_breaks(rows[uid]["title"]) for uid in uids], [line_breaks(rows[uid]["patient"]) for uid in uids]
    )
    extracted = [(uid, keyword) for uid, result in zip(uids, results) for keyword in result.keywords]
    assert [pair for pair in extracted if pair not in accepted] == []  # nothing unread
    share = sum(accepted[pair] for pair in extracted) / len(extracted)
    print(f"keywords accepted: {sum(accepted[p] for p in extracted)}/{len(extracted)} ({share:.1%})")
    assert share >= 0.87
