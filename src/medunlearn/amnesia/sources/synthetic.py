"""The embedded default: a fictitious patient cohort [ours].

Like TOFU's fictitious authors, these patients exist nowhere else, so what a model knows about them it learnt
from us, and forgetting can be measured cleanly. Everything is drawn from one seed: the same seed gives the
same cohort, byte for byte.

Each patient gets a condition of their disease category (``data/cohort_conditions.yaml``) and a note that
reads like a de-identified case summary: presentation, history, examination, one laboratory value, one
diagnostic test, diagnosis, treatment, follow-up and outcome. No names, no dates. Every patient is identified
in questions by a descriptor (age, sex, occupation, first symptom, duration) that is unique in the cohort, so
each question is answerable only from that patient's note.

QA per patient: 4 factual (the answer is stated in the note) and 4 reasoning (the answer combines two or more
findings of the note), each with a gold answer.

Held-out notes [ours] (:func:`generate_holdout_notes`): notes of extra patients, drawn the same way from a
random stream of their own, ``default_rng([seed, HOLDOUT_NOTES_STREAM])``, so that adding them changes no draw
of the cohort: every cohort file of a build stays byte-identical. Fine-tuning never reads them; they are the
non-members of the notes membership test (docs/benchmarks/amnesia.md, "Notes memorization").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import pyarrow as pa
import yaml

from medunlearn.amnesia.schema import NOTES_SCHEMA, QA_SCHEMA
from medunlearn.errors import InputError
from medunlearn.ontology.amnesia import DISEASE_SHARES
from medunlearn.ontology.vocabulary import DiseaseVocabulary, default_vocabulary

N_PAPER_PATIENTS = 8820
HOLDOUT_NOTES_STREAM = (
    1  # the held-out notes' stream: default_rng([seed, 1]); the cohort's is default_rng(seed)
)
HOLDOUT_ID_PREFIX = "H"  # held-out patients are H000000, H000001, ...; cohort patients P000000, ...


@dataclass(frozen=True)
class CohortConfig:
    """How to draw a fictitious cohort. ``disease_shares`` defaults to the paper's mix
    (docs/benchmarks/amnesia.md)."""

    patients: int = 200
    seed: int = 0
    disease_shares: tuple[tuple[str, float], ...] = tuple(DISEASE_SHARES.items())


@lru_cache(maxsize=1)
def _cohort_data() -> tuple[dict, dict]:
    # The conditions live beside the disease vocabulary, which indexes their diagnoses as terms.
    terms_folder = resources.files("medunlearn.ontology").joinpath("data")
    conditions = yaml.safe_load(terms_folder.joinpath("cohort_conditions.yaml").read_text())
    context = yaml.safe_load(
        resources.files("medunlearn.amnesia").joinpath("data", "cohort_context.yaml").read_text()
    )
    return conditions, context


def disease_counts(patients: int, shares: dict[str, float]) -> dict[str, int]:
    """Patients per disease: ``shares · patients`` rounded by largest remainder, so counts sum to
    ``patients``.

    >>> disease_counts(10, {"a": 0.55, "b": 0.45})
    {'a': 6, 'b': 4}
    """
    names = list(shares)
    weights = np.asarray([shares[n] for n in names], dtype=np.float64)
    exact = weights / weights.sum() * patients
    counts = np.floor(exact).astype(np.int64)
    # Stable order on ties keeps this deterministic.
    remainder_order = np.argsort(-(exact - counts), kind="stable")
    counts[remainder_order[: patients - counts.sum()]] += 1
    return {name: int(count) for name, count in zip(names, counts)}


def _format_number(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


def _article(age: int) -> str:
    """The article "an" before ages read with a vowel sound (8, 11, 18, 80-89), else "a"."""
    return "an" if age in (8, 11, 18) or 80 <= age <= 89 else "a"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _draw_unique_descriptors(rng, conditions_of_patient, context) -> dict[str, np.ndarray]:
    """Age, sex, occupation, first/second symptom and duration per patient, with no descriptor repeated."""
    n = len(conditions_of_patient)
    occupations = context["occupations"]
    durations = context["durations"]
    age = np.empty(n, dtype=np.int64)
    sex = np.empty(n, dtype=object)
    occupation = np.empty(n, dtype=object)
    symptom1 = np.empty(n, dtype=object)
    symptom2 = np.empty(n, dtype=object)
    duration = np.empty(n, dtype=object)
    seen: set[tuple] = set()
    pending = np.arange(n)
    rounds = 0
    while len(pending):
        rounds += 1
        if rounds > 1000:
            raise ValueError(
                "cannot draw unique patient descriptors: the cohort is too large for the vocabulary"
            )
        m = len(pending)
        draws_age, draws_sex, draws_occ = rng.random(m), rng.random(m), rng.integers(0, len(occupations), m)
        draws_sym = rng.random((m, 2))
        draws_dur = rng.integers(0, len(durations), m)
        retry = []
        for j, i in enumerate(pending):
            condition = conditions_of_patient[i]
            low, high = condition.get("age", (18, 89))
            a = int(low + draws_age[j] * (high - low + 1))
            s = condition.get("sex") or ("female" if draws_sex[j] < 0.5 else "male")
            o = condition.get("occupation") or occupations[draws_occ[j]]
            symptoms = condition["symptoms"]
            k1 = int(draws_sym[j, 0] * len(symptoms))
            k2 = (k1 + 1 + int(draws_sym[j, 1] * (len(symptoms) - 1))) % len(symptoms)
            d = durations[draws_dur[j]]
            key = (a, s, o, symptoms[k1], d)
            if key in seen:
                retry.append(i)
                continue
            seen.add(key)
            age[i], sex[i], occupation[i], symptom1[i], symptom2[i], duration[i] = (
                a,
                s,
                o,
                symptoms[k1],
                symptoms[k2],
                d,
            )
        pending = np.asarray(retry, dtype=np.int64)
    return {
        "age": age,
        "sex": sex,
        "occupation": occupation,
        "symptom1": symptom1,
        "symptom2": symptom2,
        "duration": duration,
    }


_NOTE_SECTIONS = ("presentation", "history", "exam", "lab", "test", "diagnosis", "treatment", "followup")


def _choose(options: list, choice_row: np.ndarray, k: int):
    """The ``k``-th template draw of a patient picks one of ``options``."""
    return options[choice_row[k] % len(options)]


def _note_fields(
    condition: dict, context: dict, descriptor: dict, u: np.ndarray, choice_row: np.ndarray
) -> dict:
    """Every value a patient's note and questions mention, drawn from the patient's row of uniforms ``u``.

    ``followup_rose`` is not a template field; ``str.format`` ignores it."""
    lab = condition["lab"]
    decimals = int(lab.get("decimals", 1))
    value = lab["low"] + u[0] * (lab["high"] - lab["low"])
    f_low, f_high = lab["followup"]
    followup = value * (f_low + u[1] * (f_high - f_low))
    findings, treatments = condition["test"]["findings"], condition["treatments"]
    days, months = 3 + int(u[9] * 18), 2 + int(u[10] * 22)
    age = int(descriptor["age"])
    return {
        "age": age,
        "Article": _cap(_article(age)),
        "sex_adj": descriptor["sex"],
        "occupation": descriptor["occupation"],
        "symptom1": descriptor["symptom1"],
        "symptom2": descriptor["symptom2"],
        "duration": descriptor["duration"],
        "history": context["histories"][int(u[8] * len(context["histories"]))],
        "heart_rate": int(58 + u[2] * 70),
        "systolic": int(95 + u[3] * 80),
        "diastolic": int(55 + u[4] * 45),
        "temperature": f"{36.2 + u[5] * 3.6:.1f}",
        "lab": lab["name"],
        "value": _format_number(value, decimals),
        "unit": lab["unit"],
        "reference": lab["reference"],
        "test_cap": _cap(condition["test"]["name"]),
        "finding": findings[int(u[6] * len(findings))],
        "diagnosis": condition["diagnosis"],
        "treatment": treatments[int(u[7] * len(treatments))],
        "followup_value": _format_number(followup, decimals),
        "outcome": _choose(context["outcomes"], choice_row, 0).format(days=days, months=months),
        "followup_rose": followup > value,
    }


def _note_text(context: dict, fields: dict, choice_row: np.ndarray) -> str:
    """One template per section; the follow-up shares its draw with the outcome (draw 0)."""
    return " ".join(
        _choose(context[f"{s}_templates"], choice_row, k + 1 if k < 7 else 0).format(**fields)
        for k, s in enumerate(_NOTE_SECTIONS)
    )


def _qa_pairs(condition: dict, fields: dict) -> list[tuple[str, str, str]]:
    """The patient's 4 factual and 4 reasoning ``(qa_type, question, answer)``, in the order of their ids."""
    test = condition["test"]["name"]
    lab, value, unit = fields["lab"], fields["value"], fields["unit"]
    symptom1 = fields["symptom1"]
    who = (
        f"the {fields['age']}-year-old {fields['sex_adj']} {fields['occupation']} "
        f"who presented with {symptom1} for {fields['duration']}"
    )
    direction = "rose" if fields["followup_rose"] else "fell"
    return [
        ("factual", f"What was the admission {lab} of {who}?", f"{value} {unit}"),
        ("factual", f"What did the {test} of {who} show?", _cap(fields["finding"])),
        ("factual", f"How was {who} treated?", _cap(fields["treatment"])),
        (
            "factual",
            f"What was the heart rate on examination of {who}?",
            f"{fields['heart_rate']} beats per minute",
        ),
        (
            "reasoning",
            f"Which laboratory and {test} findings together supported the diagnosis of {who}?",
            f"A {lab} of {value} {unit} (reference {fields['reference']}) together with {test} showing "
            f"{fields['finding']}.",
        ),
        (
            "reasoning",
            f"Considering the {lab} and the {test} of {who}, what was the diagnosis?",
            f"{_cap(fields['diagnosis'])}, supported by a {lab} of {value} {unit} and {fields['finding']}.",
        ),
        (
            "reasoning",
            f"How did the {lab} of {who} change after treatment, and what does that suggest?",
            f"It {direction} from {value} to {fields['followup_value']} {unit} after {fields['treatment']}, "
            f"suggesting a response to treatment.",
        ),
        (
            "reasoning",
            f"Apart from {symptom1}, what other symptom and what background condition did {who} have?",
            f"{_cap(fields['symptom2'])}, on a background of {fields['history']}.",
        ),
    ]


def _append_patient(
    notes_rows: dict, qa_rows: dict, patient_id: str, condition: dict, disease: str, fields: dict, note: str
):
    """Append one patient's note row and QA rows (QA ids ``P000042-F1`` … ``-F4``, ``-R1`` … ``-R4``)."""
    age = fields["age"]
    notes_rows["patient_id"].append(patient_id)
    notes_rows["title"].append(
        f"{condition['title']} in {_article(age)} {age}-year-old {fields['occupation']}"
    )
    notes_rows["note"].append(note)
    notes_rows["disease"].append(disease)
    notes_rows["age"].append(age)
    notes_rows["sex"].append(fields["sex_adj"])
    for k, (qa_type, question, answer) in enumerate(_qa_pairs(condition, fields)):
        qa_rows["qa_id"].append(f"{patient_id}-{'F' if qa_type == 'factual' else 'R'}{k % 4 + 1}")
        qa_rows["patient_id"].append(patient_id)
        qa_rows["disease"].append(disease)
        qa_rows["qa_type"].append(qa_type)
        qa_rows["question"].append(question)
        qa_rows["answer"].append(answer)


def generate_cohort(
    patients: int = 200,
    seed: int | Sequence[int] = 0,
    vocabulary: DiseaseVocabulary | None = None,
    disease_shares=None,
    id_prefix: str = "P",
) -> tuple[pa.Table, pa.Table]:
    """Draw ``patients`` fictitious patients; return ``(notes, qa)`` tables (``NOTES_SCHEMA``, ``QA_SCHEMA``).

    ``seed`` is anything ``numpy.random.default_rng`` takes (an int, or a list of ints naming a stream);
    patient ids are ``id_prefix`` and six digits.

    >>> notes, qa = generate_cohort(patients=20, seed=1)
    >>> notes.num_rows, qa.num_rows, sorted(set(qa["qa_type"].to_pylist()))
    (20, 160, ['factual', 'reasoning'])
    """
    if patients < 1:
        raise InputError(f"`patients` must be at least 1, got {patients}")
    conditions, context = _cohort_data()
    vocabulary = vocabulary or default_vocabulary()
    rng = np.random.default_rng(seed)
    counts = disease_counts(patients, dict(disease_shares or DISEASE_SHARES))
    disease = np.concatenate([np.full(count, name, dtype=object) for name, count in counts.items()])
    disease = disease[rng.permutation(patients)]
    condition_index = rng.random(patients)
    conditions_of_patient = [
        conditions[d][int(u * len(conditions[d]))] for d, u in zip(disease, condition_index)
    ]
    descriptors = _draw_unique_descriptors(rng, conditions_of_patient, context)

    # Everything else is drawn in one vectorised call per field, in a fixed order (reproducibility).
    u = rng.random((patients, 16))
    template_choice = rng.integers(0, 1_000_000, (patients, 8))

    notes_rows: dict[str, list] = {name: [] for name in NOTES_SCHEMA.names}
    qa_rows: dict[str, list] = {name: [] for name in QA_SCHEMA.names}
    for i, condition in enumerate(conditions_of_patient):
        descriptor = {name: values[i] for name, values in descriptors.items()}
        fields = _note_fields(condition, context, descriptor, u[i], template_choice[i])
        note = _note_text(context, fields, template_choice[i])
        _append_patient(notes_rows, qa_rows, f"{id_prefix}{i:06d}", condition, disease[i], fields, note)

    # one batched pass (the keywords' negation detection runs spaCy over the notes)
    notes_rows["disease_keywords"] = vocabulary.record_keywords(notes_rows["title"], notes_rows["note"])
    return pa.table(notes_rows, schema=NOTES_SCHEMA), pa.table(qa_rows, schema=QA_SCHEMA)


def generate_holdout_notes(
    patients: int, seed: int = 0, vocabulary: DiseaseVocabulary | None = None, disease_shares=None
) -> pa.Table:
    """The notes of ``patients`` extra fictitious patients (``NOTES_SCHEMA``, ids ``H000000`` …), drawn as the
    cohort's but from the stream ``[seed, HOLDOUT_NOTES_STREAM]`` (module docstring); their QA are not kept.

    >>> holdout = generate_holdout_notes(3, seed=1)
    >>> holdout["patient_id"].to_pylist()
    ['H000000', 'H000001', 'H000002']
    >>> cohort, _ = generate_cohort(patients=3, seed=1)
    >>> set(holdout["note"].to_pylist()) & set(cohort["note"].to_pylist())
    set()
    """
    if patients < 1:
        raise InputError(f"held-out notes: `patients` must be at least 1, got {patients}")
    notes, _ = generate_cohort(
        patients, [seed, HOLDOUT_NOTES_STREAM], vocabulary, disease_shares, id_prefix=HOLDOUT_ID_PREFIX
    )
    return notes
