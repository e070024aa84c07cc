"""Leakage-score scan speed: medunlearn's compiled-per-keyword-set scan vs the naive per-keyword
``re.search``.

Both run in this process on the same synthetic forget-set answers (8 QA per patient, 8 disease keywords per
patient, answers of ~30 words, about a third mentioning a keyword), and must give identical per-answer values.
Prints answers/s for each and the ratio. Target (issue 4): >= 100,000 answers/s on one core.

    python bench/bench_leakage.py [--answers 100000]
"""

from __future__ import annotations

import argparse
import random
import re
import time

import numpy as np

from medunlearn.metrics.disease_leakage import leakage_per_example

FILLER = (
    "the patient was admitted with a history of pain and fever after two days of treatment her his blood "
    "pressure level showed no sign of improvement on examination revealed mild swelling given oral therapy "
    "follow up imaging confirmed stable findings discharged home week later"
).split()
DISEASE_TERMS = [
    "myocardial infarction",
    "heart failure",
    "atrial fibrillation",
    "hypertension",
    "angina",
    "cardiomyopathy",
    "lung cancer",
    "breast cancer",
    "cancer",
    "carcinoma",
    "lymphoma",
    "leukemia",
    "melanoma",
    "metastasis",
    "pneumonia",
    "sepsis",
    "tuberculosis",
    "hiv",
    "hepatitis b",
    "cellulitis",
    "meningitis",
    "endocarditis",
    "diabetes mellitus",
    "asthma",
    "copd",
    "stroke",
    "anemia",
    "lupus",
    "sarcoidosis",
    "pancreatitis",
    "chronic kidney disease",
    "cirrhosis",
    "appendicitis",
    "osteomyelitis",
    "covid-19",
    "influenza",
]


def synthetic_answers(n_answers: int, seed: int = 0):
    rng = random.Random(seed)
    n_patients = max(1, n_answers // 8)
    keywords = [rng.sample(DISEASE_TERMS, 8) for _ in range(n_patients)]
    answers, references, questions = [], [], []
    for index in range(n_answers):
        patient_keywords = keywords[index % n_patients]
        words = rng.choices(FILLER, k=30)
        if rng.random() < 0.35:
            words[rng.randrange(30)] = rng.choice(patient_keywords)
        question = (
            "What was found in the patient with "
            + (patient_keywords[0] if rng.random() < 0.3 else "it")
            + "?"
        )
        answers.append(" ".join(words).capitalize() + ".")
        # a fresh list per row, as datasets' to_pylist gives it
        references.append(list(patient_keywords))
        questions.append(question)
    return answers, references, questions


def naive_leakage(answers, references, questions) -> np.ndarray:
    """The definition as one would first write it: one re.search per keyword, per answer and question."""
    values = np.empty(len(answers))
    for index, (answer, keywords, question) in enumerate(zip(answers, references, questions)):
        leaked = 0
        for keyword in keywords:
            pattern = r"\b" + re.escape(keyword) + r"\b"
            if re.search(pattern, answer, re.IGNORECASE) and not re.search(pattern, question, re.IGNORECASE):
                leaked += 1
        values[index] = leaked / len(keywords)
    return values


def answers_per_second(function, *args, repeats: int = 3) -> tuple[float, float, np.ndarray]:
    """Best of ``repeats`` runs, as answers per CPU second of this (single-threaded) process and per wall
    second.

    CPU time is the "one core" figure: on a shared machine wall time also counts the time other processes hold
    the core.
    """
    best_cpu = best_wall = float("inf")
    for _ in range(repeats):
        cpu, wall = time.process_time(), time.perf_counter()
        result = function(*args)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    return len(args[0]) / best_cpu, len(args[0]) / best_wall, result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--naive-answers", type=int, default=20_000, help="the baseline runs on this prefix")
    options = parser.parse_args()
    answers, references, questions = synthetic_answers(options.answers)
    fast_rate, fast_wall, fast = answers_per_second(leakage_per_example, answers, references, questions)
    cut = min(options.naive_answers, options.answers)
    naive_rate, naive_wall, naive = answers_per_second(
        naive_leakage, answers[:cut], references[:cut], questions[:cut]
    )
    if not np.allclose(fast[:cut], naive):
        raise SystemExit("the fast scan and the naive scan disagree")
    print(f"answers: {options.answers:,} (baseline on the first {cut:,}); mean LS {np.nanmean(fast):.4f}")
    print("                              answers/CPU-s   answers/wall-s")
    print(f"naive per-keyword re.search : {naive_rate:13,.0f}  {naive_wall:15,.0f}")
    print(
        f"medunlearn scan             : {fast_rate:13,.0f}  {fast_wall:15,.0f}   "
        "(target >= 100,000 on one core)"
    )
    print(f"ratio                       : {fast_rate / naive_rate:13.1f}x {fast_wall / naive_wall:14.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
