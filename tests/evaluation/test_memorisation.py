"""End to end on a tiny Llama that memorised a 10-patient QA set: gradient ascent on the forget QA is visible.

Before unlearning, MU and the forget patients' answer similarity are high; after a few gradient-ascent steps
on the forget QA, the forget similarity drops and AFE rises.
"""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import torch

from medunlearn.evaluation.pipeline import evaluate_unlearning
from medunlearn.evaluation.populations import PopulationConfig, build_populations
from medunlearn.evaluation.runner import RunnerConfig, encode_examples
from medunlearn.models import TinyLlamaConfig, build_tiny_llama, train_bpe_tokenizer

DRUGS = [
    "aspirin",
    "heparin",
    "cisplatin",
    "amoxicillin",
    "warfarin",
    "insulin",
    "rituximab",
    "vancomycin",
    "statin",
    "imatinib",
]
FINDINGS = [
    "anemia",
    "fever",
    "stenosis",
    "melanoma",
    "sepsis",
    "edema",
    "lymphoma",
    "arrhythmia",
    "pneumonia",
    "glioma",
]
DISEASES = [
    "cancer",
    "cardiovascular",
    "cancer",
    "infection_immune",
    "cardiovascular",
    "cancer",
    "cancer",
    "infection_immune",
    "cardiovascular",
    "cancer",
]


def _cohort():
    seen, holdout = [], []
    for i in range(10):
        patient = f"P{i:02d}"
        base = {"patient_id": patient, "disease": DISEASES[i]}
        seen.append(
            {
                **base,
                "qa_id": f"{patient}-F",
                "qa_type": "factual",
                "question": f"Which drug did patient {patient} receive?",
                "answer": f"{DRUGS[i]} daily",
            }
        )
        seen.append(
            {
                **base,
                "qa_id": f"{patient}-R",
                "qa_type": "reasoning",
                "question": f"What explains the symptoms of patient {patient}?",
                "answer": f"{FINDINGS[i]} progression",
            }
        )
        holdout.append(
            {
                **base,
                "qa_id": f"{patient}-H",
                "qa_type": "factual",
                "question": f"What finding did patient {patient} show?",
                "answer": f"{FINDINGS[i]} progression",
            }
        )
    seen, holdout = pd.DataFrame(seen), pd.DataFrame(holdout)
    forget_ids = {"P00", "P01", "P02"}
    is_forget, is_forget_holdout = seen["patient_id"].isin(forget_ids), holdout["patient_id"].isin(forget_ids)
    forget = {"train": seen[is_forget], "holdout": holdout[is_forget_holdout]}
    retain = {"train": seen[~is_forget], "holdout": holdout[~is_forget_holdout]}
    notes = pd.DataFrame({"patient_id": seen["patient_id"].unique()})
    notes["disease_keywords"] = [[FINDINGS[i]] for i in range(10)]
    return seen, build_populations(forget, retain, notes, PopulationConfig(max_retain_patients=None))


def _batch(tokenizer, frame):
    encoded = encode_examples(tokenizer, frame["question"].tolist(), frame["answer"].tolist())
    width = max(len(ids) for ids in encoded.full_ids)
    input_ids = torch.full((len(frame), width), tokenizer.pad_token_id)
    labels = torch.full((len(frame), width), -100)
    for row, ids in enumerate(encoded.full_ids):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        start, end = encoded.answer_start[row], encoded.answer_end[row]
        labels[row, start:end] = input_ids[row, start:end]
    return {
        "input_ids": input_ids,
        "attention_mask": (labels != -100) | (input_ids != tokenizer.pad_token_id),
        "labels": labels,
    }


def _steps(model, batch, steps, lr, sign):
    """Plain AdamW steps on the answer-token NLL (sign=+1) or its negation (sign=-1: gradient ascent)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    for _ in range(steps):
        loss = sign * model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


@pytest.mark.slow  # ~12 s on one core: 150 training steps, 10 ascent steps, three evaluations
def test_gradient_ascent_lowers_forget_similarity_and_raises_afe(tmp_path):
    torch.manual_seed(0)
    seen, examples = _cohort()
    texts = (seen["question"] + " " + seen["answer"]).tolist()
    tokenizer = train_bpe_tokenizer(texts * 4, vocab_size=300)
    model = build_tiny_llama(
        tokenizer, TinyLlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2)
    )
    _steps(model, _batch(tokenizer, seen), steps=150, lr=3e-3, sign=+1)
    before = copy.deepcopy(model)

    config = RunnerConfig(batch_size=16, max_new_tokens=16, progress=False)
    kwargs = {"tokenizer": tokenizer, "runner_config": config, "examples": examples}
    start = evaluate_unlearning(model, None, "forget_30", tmp_path / "before", **kwargs)["populations"]
    assert start["forget_seen"]["all"]["similarity"] > 0.9
    assert start["retain_same_disease"]["all"]["model_utility"] > 0.9
    assert start["retain_out_of_disease"]["all"]["model_utility"] > 0.9
    assert start["forget_seen"]["all"]["exact_memorization"] > 0.9

    forget_seen = seen[seen["patient_id"].isin({"P00", "P01", "P02"})]
    _steps(model, _batch(tokenizer, forget_seen), steps=10, lr=1e-3, sign=-1)
    after = evaluate_unlearning(
        model, None, "forget_30", tmp_path / "after", before=(before, tokenizer), **kwargs
    )
    forget = after["populations"]["forget_seen"]["all"]
    assert forget["similarity_before"] == pytest.approx(start["forget_seen"]["all"]["similarity"])
    assert forget["similarity"] < forget["similarity_before"] - 0.3
    assert forget["answer_forgetting"] > 0.3
    assert forget["prob"] < start["forget_seen"]["all"]["prob"] / 2
