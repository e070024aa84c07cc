"""A fine-tuned folder carries a model card: base model, data, both stages with their row counts, the training
settings, and commands that name the output folder (never the staging folder it was written in)."""

from __future__ import annotations

import pytest

from medunlearn.cli import main
from medunlearn.data_loading import load_config


@pytest.mark.slow
def test_finetune_writes_a_card_that_describes_the_run(tmp_path):
    data, out = tmp_path / "amnesia", tmp_path / "finetuned"
    assert main(["amnesia", "build", "--out", str(data), "--patients", "20", "--seed", "0"]) == 0
    argv = ["finetune", "--model", "tiny-llama", "--data", str(data), "--out", str(out)]
    assert main([*argv, "--notes-epochs", "1", "--qa-epochs", "2", "--max_steps", "1"]) == 0
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers\ntags: [medunlearn, fine-tuned, amnesia]\n---")
    assert "| base model | `tiny-llama` |" in card
    assert "| stage 1: notes | 1.0 epochs over 20 notes |" in card  # one note per patient
    trained_qa = len(load_config(data, "full", "train"))  # the holdout QA are never trained on
    assert (
        trained_qa == 120
        and f"| stage 2: QA | 2.0 epochs over {trained_qa} QA rows (completion only) |" in card
    )
    assert "| max_steps | 1 |" in card
    assert "| num_train_epochs | 1.0 (stage 1, notes), 2.0 (stage 2, QA) |" in card
    assert f"medunlearn unlearn --model {out} --data {data}" in card
    assert ".partial-" not in card


@pytest.mark.parametrize(("notes", "qa"), [(0.0, 1.0), (1.0, 3.0), (2.0, 0.5)])
def test_the_card_shows_each_stages_epochs(tmp_path, notes, qa):
    """Before: the card's settings listed the SFTConfig template's num_train_epochs (3.0, TrainingArguments'
    default, or whatever --num_train_epochs said) whatever the stages trained."""
    from types import SimpleNamespace

    from medunlearn.unlearn.card import write_finetune_card
    from medunlearn.unlearn.run import FinetuneArguments

    args = FinetuneArguments("data", str(tmp_path), notes, qa, "amnesia", conventions="medunlearn")
    training = SimpleNamespace(num_train_epochs=3.0, learning_rate=1e-3, max_steps=-1)
    card = write_finetune_card(
        tmp_path, model_path=tmp_path, base_model="tiny-llama", args=args, training=training, rows={}
    ).read_text()
    assert f"| num_train_epochs | {notes} (stage 1, notes), {qa} (stage 2, QA) |" in card
    assert "| num_train_epochs | 3.0 |" not in card and "| learning_rate | 0.001 |" in card
