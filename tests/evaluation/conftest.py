"""Builders shared by the evaluation tests (tables shaped like AMNESIA QA rows, a lively tiny model)."""

from __future__ import annotations

import pandas as pd
import pytest

QUESTIONS = [
    "What was the troponin level?",
    "Which artery was occluded?",
    "What grew in the sputum culture and which antibiotic did she receive for it?",
    "Biopsy?",
    "What did the electrocardiogram show in leads II, III and aVF after two hours of chest pain?",
    "Which receptor was positive?",
    "What was placed?",
]
ANSWERS = [
    "The troponin I level was 2.4 ng/mL.",
    "The right coronary artery.",
    "Streptococcus pneumoniae; amoxicillin.",
    "Invasive ductal carcinoma.",
    "ST elevation.",
    "Estrogen receptor.",
    "A stent.",
]


def examples_table(questions=QUESTIONS, answers=ANSWERS, population="forget_seen") -> pd.DataFrame:
    n = len(questions)
    return pd.DataFrame(
        {
            "example_id": [f"{population}/q{i}" for i in range(n)],
            "population": population,
            "qa_id": [f"q{i}" for i in range(n)],
            "patient_id": [f"p{i // 2}" for i in range(n)],
            "disease": "cardiovascular",
            "qa_type": ["factual" if i % 2 == 0 else "reasoning" for i in range(n)],
            "question": list(questions),
            "answer": list(answers),
            "disease_keywords": [[] for _ in range(n)],
        }
    )


def lively(model, seed: int = 0, scale: float = 0.3):
    """Re-draw the weights with a larger scale so greedy outputs vary (a fresh tiny Llama is near-uniform)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() > 1:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)
    return model


def qa_frame(patients, diseases, split: str) -> pd.DataFrame:
    """Two QA (one factual, one reasoning) per patient, shaped like an AMNESIA QA split."""
    rows = []
    for patient, disease in zip(patients, diseases):
        for qa_type in ("factual", "reasoning"):
            rows.append(
                {
                    "qa_id": f"{patient}-{split}-{qa_type}",
                    "patient_id": patient,
                    "disease": disease,
                    "qa_type": qa_type,
                    "question": f"What {qa_type} finding did patient {patient} have?",
                    "answer": f"{disease} finding of {patient}",
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture()
def make_examples():
    return examples_table


@pytest.fixture()
def make_qa():
    return qa_frame


@pytest.fixture()
def lively_model(tiny_model):
    """The shared tiny Llama with larger random weights: varied greedy outputs, still deterministic."""
    return lively(tiny_model)
