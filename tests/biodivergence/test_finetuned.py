"""The fine-tuned baseline: its loss against a hand computation, that it learns, that a seed repeats, the
reconciliation rule, and the CLI. A tiny BERT built from config with a word-level tokenizer keeps each test
to seconds (the shipped MiniLM is measured in docs/biodivergence.md, not here)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from medunlearn.biodivergence.finetuned import FinetunedBaseline, FinetunedConfig  # noqa: E402
from medunlearn.biodivergence.finetuned_heads import (  # noqa: E402
    CONFOUNDER_IDS,
    LossWeights,
    ReconciliationLookup,
    decode_heads,
    head_losses,
)
from medunlearn.biodivergence.schema import normalise_pool  # noqa: E402
from medunlearn.ontology.biodivergence import AXIS_IDS, CONFLICT_TYPE_IDS  # noqa: E402


def learnable_pool(n: int, seed: int) -> pd.DataFrame:
    """Pairs whose labels follow from words of the claims: the direction word of claim B gives the class
    (raises → contextual contradiction, lowers → no conflict), "children" in claim A gives the population
    axis (and the confounder, for a contradiction)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        raises, children = bool(rng.integers(2)), bool(rng.integers(2))
        conflict = "contextual_contradiction" if raises else "no_conflict"
        axes = ["population"] if children else []
        population = "children" if children else "adults"
        rows.append(
            {
                "pair_id": f"p{i:03d}",
                "domain": "oncology",
                "claim_a": f"drug x lowers mortality in {population} of cohort {i % 7}",
                "claim_b": f"drug x {'raises' if raises else 'lowers'} mortality in adults of cohort {i % 5}",
                "article_a": f"a{i}",
                "article_b": f"b{i}",
                "conflict_type": conflict,
                "axes": axes,
                "dominant_confounder": "population" if children and raises else "none",
                "reconciliation": f"{conflict} / {'population' if children else 'none'}",
                "label_source": "llm",
                "confidence": 0.9,
            }
        )
    return normalise_pool(pd.DataFrame(rows), "learnable pool")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> str:
    """A 2-layer BERT (hidden 32) from config and a word-level WordPiece tokenizer over the pool's words."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    texts = pd.concat([learnable_pool(64, 0)[column] for column in ("claim_a", "claim_b")])
    words = sorted({word for text in texts for word in re.findall(r"\w+", text.lower())})
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    tokenizer = BertTokenizerFast(vocab={token: i for i, token in enumerate(tokens)})
    tokenizer.save_pretrained(folder)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    return str(folder)


def quick_config(model: str, **overrides) -> FinetunedConfig:
    settings = {"model": model, "epochs": 12, "learning_rate": 1e-2, "batch_size": 8, "max_length": 48}
    return FinetunedConfig(**{**settings, **overrides})


def test_head_losses_match_a_hand_computation():
    """CE + BCE + CE on a fixed batch of two pairs, computed by hand with math.log / math.exp."""
    conflict = [[2.0, 0.5, -1.0, 0.0, 0.3, -0.2], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]]
    conflict_labels = [0, 5]
    axis = [[0.5 * (j - 6) for j in range(13)], [(-1.0) ** j for j in range(13)]]
    axis_labels = [
        [1.0 if j in (0, 3) else 0.0 for j in range(13)],
        [1.0 if j % 2 == 0 else 0.0 for j in range(13)],
    ]
    confounder = [[0.1 * j for j in range(14)], [1.0 if j == 13 else 0.0 for j in range(14)]]
    confounder_labels = [2, 13]

    def cross_entropy(rows, labels):
        return sum(math.log(sum(math.exp(z) for z in row)) - row[y] for row, y in zip(rows, labels)) / len(
            rows
        )

    def sigmoid(z):
        return 1 / (1 + math.exp(-z))

    bce = (
        -sum(
            y * math.log(sigmoid(z)) + (1 - y) * math.log(1 - sigmoid(z))
            for row, ys in zip(axis, axis_labels)
            for z, y in zip(row, ys)
        )
        / 26
    )
    expected = {
        "conflict_loss": cross_entropy(conflict, conflict_labels),
        "axis_loss": bce,
        "confounder_loss": cross_entropy(confounder, confounder_labels),
    }
    logits = {
        "conflict_logits": torch.tensor(conflict),
        "axis_logits": torch.tensor(axis),
        "confounder_logits": torch.tensor(confounder),
    }
    labels = {
        "conflict_labels": torch.tensor(conflict_labels),
        "axis_labels": torch.tensor(axis_labels),
        "confounder_labels": torch.tensor(confounder_labels),
    }
    losses = head_losses(logits, labels, LossWeights(conflict=2.0, axes=0.5, confounder=3.0))
    for name, value in expected.items():
        assert losses[name].item() == pytest.approx(value, rel=1e-5)
    total = 2.0 * expected["conflict_loss"] + 0.5 * expected["axis_loss"] + 3.0 * expected["confounder_loss"]
    assert losses["loss"].item() == pytest.approx(total, rel=1e-5)
    assert head_losses(logits, labels)["loss"].item() == pytest.approx(sum(expected.values()), rel=1e-5)


def test_decoding_keeps_the_confounder_only_among_predicted_axes():
    conflict = np.eye(6)[[1, 5]]
    axis = np.full((2, 13), -1.0)
    axis[0, AXIS_IDS.index("geography")] = 2.0
    confounder = np.zeros((2, 14))
    confounder[0, CONFOUNDER_IDS.index("geography")] = 5.0
    confounder[1, CONFOUNDER_IDS.index("population")] = 5.0  # not a predicted axis of pair 2: "none"
    classes, axes, confounders = decode_heads(conflict, axis, confounder)
    assert classes == [CONFLICT_TYPE_IDS[1], CONFLICT_TYPE_IDS[5]]
    assert axes == [["geography"], []]
    assert confounders == ["geography", "none"]


def test_reconciliation_is_the_nearest_train_group_of_the_predicted_class():
    train = pd.DataFrame(
        {
            "conflict_type": ["contextual_contradiction"] * 4 + ["no_conflict"],
            "axes": [["population"], ["population"], ["population", "geography"], ["time_period"], []],
            "reconciliation": [
                "ages differ",
                "ages differ",
                "ages and places differ",
                "eras differ",
                "agree",
            ],
        }
    )
    lookup = ReconciliationLookup(train)
    assert lookup.nearest("contextual_contradiction", ["population"]) == "ages differ"
    # Jaccard 2/3 to {population, geography} beats 1/3 to {population}.
    assert lookup.nearest("contextual_contradiction", ["population", "geography", "assay_protocol"]) == (
        "ages and places differ"
    )
    assert lookup.nearest("no_conflict", ["population"]) == "agree"  # only group of that class
    # A class that train lacks falls back to all groups: {population} exactly.
    assert lookup.nearest("direct_contradiction", ["population"]) == "ages differ"


def test_training_on_a_tiny_pool_reaches_high_train_accuracy(tiny_bert, one_torch_thread):
    """It can learn: 12 epochs on 48 pairs take the conflict-type accuracy on train from the majority share
    (0.56) to at least 0.9, and the training loss of the last epoch below 60% of the first's."""
    from medunlearn.metrics.contextual_contradiction import contextual_contradiction

    pool = learnable_pool(48, 0)
    baseline = FinetunedBaseline(quick_config(tiny_bert)).fit(pool)
    scores = contextual_contradiction(baseline.predict(pool), pool.to_dict(orient="records"))
    majority = pool["conflict_type"].value_counts(normalize=True).max()
    assert majority < 0.65
    assert scores["accuracy"] >= 0.9
    record = baseline.training
    losses = [entry["loss"] for entry in record["train_loss_per_epoch"]]
    assert losses[-1] < 0.6 * losses[0]
    assert record["epochs_run"] == 12 and record["steps"] == 12 * 6 and record["dev_pairs"] == 0
    assert record["train_tokens"] > 0 and record["config"]["seed"] == 0


def test_one_seed_gives_identical_predictions_and_dev_stops_early(tiny_bert, one_torch_thread):
    pool = learnable_pool(64, 1)
    train, dev, test = pool.iloc[:40], pool.iloc[40:52], pool.iloc[52:]
    config = quick_config(tiny_bert, epochs=6, patience=1)
    runs = [FinetunedBaseline(config).fit(train, dev) for _ in range(2)]
    logits = [run.logits(test) for run in runs]
    for first, second in zip(*logits):
        np.testing.assert_array_equal(first, second)
    assert runs[0].predict(test) == runs[1].predict(test)
    record = runs[0].training
    assert record["dev_pairs"] == 12 and len(record["dev_per_epoch"]) == record["epochs_run"]
    losses = [entry["loss"] for entry in record["dev_per_epoch"]]
    assert record["best_dev_loss"] == pytest.approx(min(losses))
    other_seed = FinetunedBaseline(quick_config(tiny_bert, epochs=6, seed=1)).fit(train, dev)
    assert not np.array_equal(other_seed.logits(test)[0], logits[0][0])


def test_a_missing_encoder_is_an_error_naming_the_flag(tmp_path):
    from medunlearn.biodivergence.finetuned import EncoderLoadError
    from medunlearn.errors import MedunlearnError

    with pytest.raises(EncoderLoadError, match="--model") as caught:
        FinetunedBaseline(FinetunedConfig(model=str(tmp_path / "no-such-encoder"))).fit(learnable_pool(4, 0))
    assert isinstance(caught.value, MedunlearnError)
    with pytest.raises(MedunlearnError, match="--epochs"):
        FinetunedConfig(epochs=0)


def test_cli_eval_finetuned_writes_predictions_metrics_and_a_model_card(
    tiny_bert, built_folder, tmp_path, one_torch_thread
):
    from medunlearn.cli import main

    out = tmp_path / "ft"
    code = main(
        [
            "biodivergence", "eval", "--baseline", "finetuned", "--model", tiny_bert,
            "--data", str(built_folder), "--epochs", "1", "--max-length", "32", "--no-context",
            "--limit", "12", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["system"] == "finetuned" and metrics["scores"]["num_examples"] == 12
    training = metrics["training"]
    assert training["epochs_run"] == 1 and training["config"]["use_context"] is False
    assert training["config"]["max_length"] == 32 and training["steps"] >= 1
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 12
    card = (out / "README.md").read_text()
    assert "1 of at most 1 epochs" in card and "Loss: 1.0·CE(conflict)" in card


def test_lora_trains_adapters_and_the_heads_only(tiny_bert, one_torch_thread):
    pytest.importorskip("peft")
    pool = learnable_pool(16, 2)
    full = FinetunedBaseline(quick_config(tiny_bert, epochs=1)).fit(pool)
    lora = FinetunedBaseline(quick_config(tiny_bert, epochs=1, lora=True, lora_rank=2)).fit(pool)
    trainable = {name for name, p in lora.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name or "_head" in name for name in trainable)
    assert lora.training["trainable_parameters"] < full.training["trainable_parameters"]
    assert len(lora.predict(pool)) == 16
