"""``--forget-on notes|qa|both`` on AMNESIA (medunlearn.unlearn.sources): the forget corpus is exactly the
forget patients' notes (and QA for ``both``), the retain corpus the other patients', and GradAscent's loss on
the mixed corpus equals a hand computation."""

from __future__ import annotations

import pytest
import torch

from medunlearn.amnesia import build_amnesia_folder
from medunlearn.data_loading import load_config
from medunlearn.models import build_tiny_llama
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.grad_ascent import GradAscentConfig, GradAscentTrainer
from medunlearn.unlearn.ops import IGNORE_INDEX
from medunlearn.unlearn.run import UnlearningDataArguments, make_method_config
from medunlearn.unlearn.sources import corpus_format, load_corpus, training_sets


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_amnesia_folder(tmp_path_factory.mktemp("amnesia") / "data", patients=20, seed=0)


def patients(folder, config) -> set[str]:
    return {row["patient_id"] for split in ("train", "holdout") for row in load_config(folder, config, split)}


def notes_by_patient(folder) -> dict[str, str]:
    return {
        row["patient_id"]: f"{row['title']}\n{row['note']}" for row in load_config(folder, "notes", "train")
    }


def test_qa_stays_the_forget_configs_seen_qa(folder):
    corpus = load_corpus(UnlearningDataArguments(str(folder), "forget_10"), need_retain=True)
    assert corpus.data_format == "qa" and len(corpus.forget) == 1 and len(corpus.retain) == 1
    assert corpus.forget[0]["qa_id"] == load_config(folder, "forget_10", "train")["qa_id"]
    assert corpus.retain[0]["qa_id"] == load_config(folder, "retain_90", "train")["qa_id"]
    assert corpus.retain_name == "retain_90"


def test_notes_are_exactly_the_forget_patients_notes_and_retain_the_others(folder):
    corpus = load_corpus(
        UnlearningDataArguments(str(folder), "forget_10", forget_on="notes"), need_retain=True
    )
    notes = notes_by_patient(folder)
    forget_ids = patients(folder, "forget_10")
    (forget,), (retain,) = corpus.forget, corpus.retain
    assert corpus.data_format == "text" and sorted(forget["patient_id"]) == sorted(forget_ids)
    assert forget["text"] == [notes[pid] for pid in forget["patient_id"]]
    assert set(retain["patient_id"]) == patients(folder, "retain_90") == set(notes) - forget_ids
    assert retain["text"] == [notes[pid] for pid in retain["patient_id"]]


def test_both_is_the_union_of_notes_and_qa(folder):
    corpus = load_corpus(
        UnlearningDataArguments(str(folder), "forget_10", forget_on="both"), need_retain=True
    )
    notes_part, qa_part = corpus.forget
    assert set(notes_part["patient_id"]) == patients(folder, "forget_10")
    assert qa_part["qa_id"] == load_config(folder, "forget_10", "train")["qa_id"]
    retain_notes, retain_qa = corpus.retain
    assert set(retain_notes["patient_id"]) == patients(folder, "retain_90")
    assert retain_qa["qa_id"] == load_config(folder, "retain_90", "train")["qa_id"]
    assert corpus_format("amnesia", "both") == "text" and corpus_format("amnesia", "qa") == "qa"


def test_a_qa_config_for_a_notes_corpus_is_refused_by_name(folder, tiny_tokenizer):
    with pytest.raises(UnlearningInputError, match="--forget-on notes.*data_format 'text'"):
        corpus = load_corpus(
            UnlearningDataArguments(str(folder), "forget_10", forget_on="notes"), need_retain=False
        )
        config = make_method_config("grad_ascent", "unused", use_cpu=True)
        training_sets(corpus, tiny_tokenizer, config, None)
    with pytest.raises(UnlearningInputError, match="forget_on"):
        UnlearningDataArguments(str(folder), "forget_10", forget_on="everything")


@torch.no_grad()
def example_nll(model, ids: list[int], labels: list[int]) -> float:
    logps = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
    token_logps = logps[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    kept = torch.tensor([label != IGNORE_INDEX for label in labels[1:]], dtype=torch.bool)
    assert kept.any()  # max_length leaves every QA row its answer and every chunk a predicted token
    return float(-token_logps[kept].mean())


@pytest.mark.slow
def test_grad_ascent_on_both_equals_the_hand_loss_over_note_chunks_and_qa_answers(
    folder, tiny_tokenizer, tmp_path
):
    corpus = load_corpus(
        UnlearningDataArguments(str(folder), "forget_10", forget_on="both"), need_retain=False
    )
    config = GradAscentConfig(
        output_dir=str(tmp_path / "o"),
        use_cpu=True,
        report_to="none",
        max_steps=1,
        max_length=256,
        data_format="text",
        per_device_train_batch_size=64,
    )
    forget, retain = training_sets(corpus, tiny_tokenizer, config, None)
    assert retain is None
    notes_part, qa_part = corpus.forget
    # The note chunks' labelled tokens are each forget note's tokens, in order; QA rows label the answer only.
    note_rows = [row for row in forget if row["labels"][0] == row["input_ids"][0]]
    labelled = [t for row in note_rows for t in row["labels"] if t != IGNORE_INDEX]
    expected = [
        t for text in notes_part["text"] for t in tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    ]
    assert labelled == expected
    assert len(forget) == len(note_rows) + len(qa_part)
    torch.manual_seed(0)
    model = build_tiny_llama(tiny_tokenizer)
    trainer = GradAscentTrainer(model, config, forget, None, processing_class=tiny_tokenizer)
    batch = trainer.data_collator([trainer.pairs[i] for i in range(len(trainer.pairs))])
    hand = [example_nll(model, row["input_ids"], row["labels"]) for row in forget]
    assert trainer.compute_loss(model, batch).item() == pytest.approx(-sum(hand) / len(hand), abs=1e-5)
