"""Fixtures for the unlearning tests: tiny QA datasets in the AMNESIA row format and a trainer factory."""

from __future__ import annotations

import pytest

QA_ROWS = [
    # (patient_id, disease, question, answer)
    ("p1", "cardiovascular", "What was the troponin level?", "The troponin I level was 2.4 ng/mL."),
    ("p1", "cardiovascular", "Which artery was occluded?", "The right coronary artery was 90% occluded."),
    ("p2", "infection_immune", "What grew in the sputum culture?", "Streptococcus pneumoniae grew."),
    ("p2", "infection_immune", "What antibiotic was given?", "She received amoxicillin."),
    (
        "p3",
        "cancer",
        "What did the breast biopsy show?",
        "Invasive ductal carcinoma, estrogen receptor positive.",
    ),
    ("p3", "cancer", "Was the tumour hormone sensitive?", "Yes, estrogen receptor positive."),
    ("p4", "cardiovascular", "What was placed in the artery?", "A stent was placed."),
    ("p4", "cardiovascular", "Where did the chest pain radiate?", "To the left arm."),
    ("p5", "infection_immune", "What did the chest film show?", "A right lower lobe consolidation."),
    (
        "p5",
        "infection_immune",
        "Was the organism sensitive to penicillin?",
        "Yes, it was sensitive to penicillin.",
    ),
]


def qa_dataset(patients: set[str]):
    from datasets import Dataset

    rows = [r for r in QA_ROWS if r[0] in patients]
    return Dataset.from_dict(
        {
            "qa_id": [f"{r[0]}-{i}" for i, r in enumerate(rows)],
            "patient_id": [r[0] for r in rows],
            "disease": [r[1] for r in rows],
            "qa_type": ["factual" if i % 2 == 0 else "reasoning" for i in range(len(rows))],
            "question": [r[2] for r in rows],
            "answer": [r[3] for r in rows],
        }
    )


@pytest.fixture()
def forget_qa():
    return qa_dataset({"p1", "p2"})


@pytest.fixture()
def retain_qa():
    return qa_dataset({"p3", "p4", "p5"})


@pytest.fixture()
def unlearning_args(tmp_path):
    """Common CPU-friendly training arguments for a few steps on the tiny model."""

    def make(config_class, **overrides):
        settings = dict(
            output_dir=str(tmp_path / "out"),
            use_cpu=True,
            bf16=False,
            per_device_train_batch_size=2,
            per_device_eval_batch_size=4,
            max_steps=3,
            learning_rate=1e-3,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            seed=0,
            disable_tqdm=True,
        )
        settings.update(overrides)
        return config_class(**settings)

    return make
