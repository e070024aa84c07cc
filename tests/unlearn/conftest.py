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


@pytest.fixture(scope="session")
def memorised_state(tiny_tokenizer):
    """State dict of a tiny Llama trained to memorise every QA answer (the starting point of unlearning)."""
    import torch

    from medunlearn.models import build_tiny_llama
    from medunlearn.unlearn.data import ForgetRetainCollator, tokenize_prompt_completion
    from medunlearn.unlearn.ops import nll_loss

    model = build_tiny_llama(tiny_tokenizer)
    encoded = tokenize_prompt_completion(
        [r[2] for r in QA_ROWS], [r[3] for r in QA_ROWS], tiny_tokenizer, 128
    )
    examples = [dict(zip(encoded, values)) for values in zip(*encoded.values())]
    batch = ForgetRetainCollator(tiny_tokenizer.pad_token_id)([{"forget": e} for e in examples])["forget"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    torch.manual_seed(0)
    for _ in range(60):
        optimizer.zero_grad()
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        nll_loss(logits, batch["labels"]).backward()
        optimizer.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.fixture()
def memorised_model(tiny_tokenizer, memorised_state):
    from medunlearn.models import build_tiny_llama

    model = build_tiny_llama(tiny_tokenizer)
    model.load_state_dict(memorised_state)
    return model
