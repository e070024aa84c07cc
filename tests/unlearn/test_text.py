"""Unlearning on raw text: chunk boundaries and token counts, the reference's stream chunking, losses on
chunks against hand computations, every method trains on text, IdkDPO refuses it by name."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from tokenizers import processors

from medunlearn.models import build_tiny_llama
from medunlearn.unlearn.methods import METHODS
from medunlearn.unlearn.ops import IGNORE_INDEX
from medunlearn.unlearn.text import (
    TextCorpusUnsupportedError,
    document_chunks,
    stream_chunks,
    text_dataset,
    tokenize_text_dataset,
)

FORGET_TEXTS = [
    "The troponin I level was 2.4 ng/mL and the right coronary artery was 90% occluded.",
    "Streptococcus pneumoniae grew in the sputum culture; she received amoxicillin.",
]
RETAIN_TEXTS = [
    "Invasive ductal carcinoma, estrogen receptor positive.",
    "A stent was placed. The chest pain radiated to the left arm.",
]


def with_bos(tokenizer):
    """The tiny tokenizer, adding BOS in front of every text (as Llama's does)."""
    bos = copy.deepcopy(tokenizer)
    bos._tokenizer.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A", special_tokens=[("<|bos|>", tokenizer.bos_token_id)]
    )
    return bos


def text_config(config_class, tmp_path, **overrides):
    settings = dict(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=2,
        max_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=0,
        disable_tqdm=True,
        data_format="text",
        max_length=8,
    )
    settings.update(overrides)
    return config_class(**settings)


# ---- chunking --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bos", [False, True])
def test_a_document_longer_than_max_length_becomes_ceil_chunks_each_token_labelled_once(tiny_tokenizer, bos):
    tokenizer = with_bos(tiny_tokenizer) if bos else tiny_tokenizer
    ids = tokenizer(FORGET_TEXTS[0], add_special_tokens=False)["input_ids"]
    prefix = [tokenizer.bos_token_id] if bos else []
    max_length = 8
    chunks = document_chunks(ids, prefix, max_length)
    room = max_length - len(prefix)
    assert len(ids) > 2 * room  # the document spans at least three chunks
    assert len(chunks) == math.ceil(len(ids) / room)
    assert all(len(chunk_ids) <= max_length for chunk_ids, _ in chunks)
    assert all(chunk_ids[: len(prefix)] == prefix for chunk_ids, _ in chunks)
    labelled = [token for _, labels in chunks for token in labels if token != IGNORE_INDEX]
    assert labelled == ids  # every text token once, in order; the BOS is never a label
    assert len(chunks[-1][0]) == len(prefix) + (len(ids) - (len(chunks) - 1) * room)


def test_an_exact_multiple_gives_no_empty_chunk_and_max_length_must_leave_room(tiny_tokenizer):
    assert [len(ids) for ids, _ in document_chunks(list(range(8)), [], 4)] == [4, 4]
    assert document_chunks([], [], 4) == []
    with pytest.raises(Exception, match="max_length 1 leaves no room"):
        document_chunks([1, 2], [0], 1)


def reference_pretraining_chunks(texts, tokenizer, max_length):
    """OpenUnlearning d3d7cf9 transcribed: PretrainingDataset._chunk_raw_text (src/data/pretraining.py:71-84)
    then preprocess_pretraining_instance with an empty prefix (src/data/utils.py:166-176)."""
    full = tokenizer("\n\n".join(texts), add_special_tokens=False)["input_ids"]
    pieces = [
        tokenizer.decode(full[i * max_length : (i + 1) * max_length])
        for i in range(len(full) // max_length + 1)
    ]
    out = []
    for piece in pieces:
        seq = tokenizer(piece, add_special_tokens=True)["input_ids"]
        prefix_len = len(tokenizer("", add_special_tokens=True)["input_ids"])
        seq = seq[: prefix_len + max_length]
        matched = prefix_len or 1
        out.append((seq, [-100] * matched + seq[matched:]))
    return out


@pytest.mark.parametrize("bos", [False, True])
def test_stream_chunking_is_the_reference_pretraining_dataset_without_its_empty_piece(tiny_tokenizer, bos):
    tokenizer = with_bos(tiny_tokenizer) if bos else tiny_tokenizer
    texts = FORGET_TEXTS + RETAIN_TEXTS
    reference = reference_pretraining_chunks(texts, tokenizer, 8)
    ours = stream_chunks(texts, tokenizer, 8)
    nonempty = [chunk for chunk in reference if any(label != -100 for label in chunk[1])]
    assert ours == nonempty and len(ours) >= 4
    stream_length = len(tokenizer("\n\n".join(texts), add_special_tokens=False)["input_ids"])
    assert len(ours) == math.ceil(stream_length / 8)
    # A stream of exactly 8 tokens: the reference makes two pieces, the second empty; we keep one.
    eight = tokenizer.decode(tokenizer(" ".join(texts), add_special_tokens=False)["input_ids"][:8])
    assert len(tokenizer(eight, add_special_tokens=False)["input_ids"]) == 8
    assert len(reference_pretraining_chunks([eight], tokenizer, 8)) == 2
    assert len(stream_chunks([eight], tokenizer, 8)) == 1


def test_tokenize_text_dataset_names_a_missing_column_and_keeps_the_disease(tiny_tokenizer, tmp_path):
    from medunlearn.unlearn.errors import UnlearningInputError
    from medunlearn.unlearn.grad_diff import GradDiffConfig

    config = text_config(GradDiffConfig, tmp_path)
    import datasets

    rows = datasets.Dataset.from_dict({"text": FORGET_TEXTS, "disease": ["cardio", "infection"]})
    chunks = tokenize_text_dataset(rows, tiny_tokenizer, config, "forget")
    counts = [math.ceil(len(tiny_tokenizer(t)["input_ids"]) / 8) for t in FORGET_TEXTS]
    assert chunks["disease"] == ["cardio"] * counts[0] + ["infection"] * counts[1]
    with pytest.raises(UnlearningInputError, match="forget set has no text column 'note'"):
        tokenize_text_dataset(
            rows, tiny_tokenizer, text_config(GradDiffConfig, tmp_path, text_column="note"), "forget"
        )


# ---- losses on chunks against hand computations ----------------------------------------------------------


@torch.no_grad()
def chunk_logps(model, ids: list[int]) -> torch.Tensor:
    """log p(x_{t+1} | x_≤t) for t = 0..len-2, the chunk run alone (no padding)."""
    logits = model(input_ids=torch.tensor([ids])).logits[0].double()
    logps = torch.log_softmax(logits, -1)
    return logps[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]


def hand_nll(model, rows) -> float:
    """mean over chunks of the mean next-token NLL of each chunk's labelled tokens (sequence averaging)."""
    per_chunk = []
    for ids, labels in zip(rows["input_ids"], rows["labels"]):
        logps = chunk_logps(model, ids)
        kept = torch.tensor([label != IGNORE_INDEX for label in labels[1:]])
        per_chunk.append(float(-logps[kept].mean()))
    return sum(per_chunk) / len(per_chunk)


def first_batch(trainer):
    items = [trainer.pairs[i] for i in range(len(trainer.pairs))]
    return trainer.data_collator(items)


def build(stem, tiny_tokenizer, tmp_path, **overrides):
    config_class, trainer_class = METHODS[stem].load()
    torch.manual_seed(0)
    model = build_tiny_llama(tiny_tokenizer)
    config = text_config(config_class, tmp_path, **overrides)
    trainer = trainer_class(
        model, config, text_dataset(FORGET_TEXTS), text_dataset(RETAIN_TEXTS), processing_class=tiny_tokenizer
    )
    return trainer, model


def perturb(model):
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))


def test_grad_ascent_and_grad_diff_on_chunks_equal_the_hand_nll(tiny_tokenizer, tmp_path):
    trainer, model = build("grad_ascent", tiny_tokenizer, tmp_path)
    forget = trainer.pairs.forget
    assert len(forget) == sum(math.ceil(len(tiny_tokenizer(t)["input_ids"]) / 8) for t in FORGET_TEXTS)
    loss = trainer.compute_loss(model, first_batch(trainer))
    assert loss.item() == pytest.approx(-hand_nll(model, forget), abs=1e-5)

    trainer, model = build("grad_diff", tiny_tokenizer, tmp_path, retain_weight=0.5)
    batch = first_batch(trainer)
    retain_rows = {
        key: [trainer.pairs.retain[int(i)][key] for i in trainer.pairs.pairing]
        for key in ("input_ids", "labels")
    }
    expected = -hand_nll(model, trainer.pairs.forget) + 0.5 * hand_nll(model, retain_rows)
    assert trainer.compute_loss(model, batch).item() == pytest.approx(expected, abs=1e-5)


def test_npo_on_chunks_uses_each_chunks_precomputed_log_probability(tiny_tokenizer, tmp_path):
    trainer, model = build("npo", tiny_tokenizer, tmp_path, retain_weight=0.0)
    forget = trainer.pairs.forget
    start = []
    for ids, labels in zip(forget["input_ids"], forget["labels"]):
        kept = torch.tensor([label != IGNORE_INDEX for label in labels[1:]])
        start.append(float(chunk_logps(model, ids)[kept].sum()))
    assert forget["reference_logps"] == pytest.approx(start, abs=1e-4)

    perturb(model)
    beta = trainer.args.beta
    now = []
    for ids, labels in zip(forget["input_ids"], forget["labels"]):
        kept = torch.tensor([label != IGNORE_INDEX for label in labels[1:]])
        now.append(float(chunk_logps(model, ids)[kept].sum()))
    expected = sum((2 / beta) * math.log1p(math.exp(beta * (p - r))) for p, r in zip(now, start)) / len(now)
    assert abs(expected - (2 / beta) * math.log(2)) > 1e-3  # the perturbation moved the loss
    assert trainer.compute_loss(model, first_batch(trainer)).item() == pytest.approx(expected, abs=1e-4)


def test_kl_min_on_chunks_compares_with_the_frozen_starting_model(tiny_tokenizer, tmp_path):
    trainer, model = build("kl_min", tiny_tokenizer, tmp_path)
    reference = copy.deepcopy(model)
    perturb(model)
    batch = first_batch(trainer)
    retain_rows = [trainer.pairs.retain[int(i)] for i in trainer.pairs.pairing]
    kls = []
    with torch.no_grad():
        for row in retain_rows:
            ids = torch.tensor([row["input_ids"]])
            p = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)[:-1]
            q = torch.log_softmax(reference(input_ids=ids).logits[0].double(), -1)[:-1]
            kept = torch.tensor([label != IGNORE_INDEX for label in row["labels"][1:]])
            kls.append(float((q.exp() * (q - p)).sum(-1)[kept].mean()))
    expected = -hand_nll(model, trainer.pairs.forget) + sum(kls) / len(kls)
    assert trainer.compute_loss(model, batch).item() == pytest.approx(expected, abs=1e-5)


# ---- every method trains on text; the one that cannot says so --------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("stem", [stem for stem in METHODS if stem != "idk_dpo"])
def test_every_method_but_idk_dpo_takes_steps_on_a_text_corpus(stem, tiny_tokenizer, tmp_path):
    trainer, model = build(stem, tiny_tokenizer, tmp_path)
    before = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters() if n in before)


def test_idk_dpo_refuses_a_text_corpus_by_name(tiny_tokenizer, tmp_path):
    with pytest.raises(TextCorpusUnsupportedError, match="IdkDPOTrainer needs question/answer rows"):
        build("idk_dpo", tiny_tokenizer, tmp_path)


def test_the_probe_needs_qa_rows(tmp_path):
    from medunlearn.unlearn.errors import UnlearningInputError
    from medunlearn.unlearn.grad_diff import GradDiffConfig

    with pytest.raises(UnlearningInputError, match="eval_probe_steps needs question/answer rows"):
        text_config(GradDiffConfig, tmp_path, eval_probe_steps=1)
