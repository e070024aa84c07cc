"""GradAscent, GradDiff, KL-Min, NPO, SimNPO, RMU: losses against hand computations, and short training
runs."""

from __future__ import annotations

import math

import pytest
import torch

from medunlearn.unlearn.grad_ascent import grad_ascent_loss
from medunlearn.unlearn.grad_diff import grad_diff_loss
from medunlearn.unlearn.kl_min import kl_min_loss
from medunlearn.unlearn.npo import npo_loss
from medunlearn.unlearn.ops import TwoTermWeighting, sequence_mean_nll
from medunlearn.unlearn.rmu import activation_mse, random_control_vector, rmu_loss
from medunlearn.unlearn.simnpo import simnpo_loss

# Same layout as test_base: row 0 = prompt, 2 completion tokens, padding; row 1 = 2 prompt, 2 completion
# tokens.
FORGET_LOGITS = torch.tensor(
    [
        [[1.0, 0.0, -1.0], [0.5, 2.0, 0.0], [0.0, 0.0, 3.0], [9.0, 9.0, 9.0]],
        [[0.2, 0.1, 0.0], [1.0, 1.0, 0.0], [-1.0, 2.0, 0.5], [0.0, 1.0, 2.0]],
    ]
)
FORGET_LABELS = torch.tensor([[-100, 1, 2, -100], [-100, -100, 0, 1]])
RETAIN_LOGITS = torch.tensor(
    [[[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [4.0, 4.0, 4.0]]]
)
RETAIN_REFERENCE = torch.tensor(
    [[[1.0, 1.0, 0.0], [0.0, 2.0, 0.0], [1.0, 0.0, 0.0]], [[0.0, 0.0, 3.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]]
)
RETAIN_LABELS = torch.tensor([[-100, 0, -100], [-100, 2, 1]])


def log_p(row, index):
    row = [float(v) for v in row]
    return row[index] - math.log(sum(math.exp(v) for v in row))


def hand_sequence_logps(logits, labels):
    """[(Σ log p, |y|)] per row, with scalar arithmetic."""
    out = []
    for b in range(labels.shape[0]):
        terms = [
            log_p(logits[b, t], int(labels[b, t + 1]))
            for t in range(labels.shape[1] - 1)
            if labels[b, t + 1] != -100
        ]
        out.append((sum(terms), len(terms)))
    return out


def hand_nll(logits, labels):
    rows = hand_sequence_logps(logits, labels)
    return sum(-s / n for s, n in rows) / len(rows)


def hand_kl(policy, reference, labels):
    per_row = []
    for b in range(labels.shape[0]):
        kls = []
        for t in range(labels.shape[1] - 1):
            if labels[b, t + 1] == -100:
                continue
            kls.append(
                sum(
                    math.exp(log_p(reference[b, t], v)) * (log_p(reference[b, t], v) - log_p(policy[b, t], v))
                    for v in range(3)
                )
            )
        per_row.append(sum(kls) / len(kls))
    return sum(per_row) / len(per_row)


def test_grad_ascent_loss_is_minus_the_sequence_weighted_nll():
    assert grad_ascent_loss(FORGET_LOGITS, FORGET_LABELS).item() == pytest.approx(
        -hand_nll(FORGET_LOGITS, FORGET_LABELS), abs=1e-5
    )


def test_grad_diff_loss_matches_hand_computation():
    losses = grad_diff_loss(
        FORGET_LOGITS,
        FORGET_LABELS,
        RETAIN_LOGITS,
        RETAIN_LABELS,
        TwoTermWeighting(forget_weight=0.5, retain_weight=2.0),
    )
    forget, retain = -hand_nll(FORGET_LOGITS, FORGET_LABELS), hand_nll(RETAIN_LOGITS, RETAIN_LABELS)
    assert losses["forget_loss"].item() == pytest.approx(forget, abs=1e-5)
    assert losses["retain_loss"].item() == pytest.approx(retain, abs=1e-5)
    assert losses["loss"].item() == pytest.approx(0.5 * forget + 2.0 * retain, abs=1e-5)


def test_two_term_losses_still_take_their_weights_as_keywords():
    """The keywords the losses took before TwoTermWeighting gathered them give the same values."""
    forget, retain = -hand_nll(FORGET_LOGITS, FORGET_LABELS), hand_nll(RETAIN_LOGITS, RETAIN_LABELS)
    by_keyword = grad_diff_loss(
        FORGET_LOGITS, FORGET_LABELS, RETAIN_LOGITS, RETAIN_LABELS, forget_weight=0.5, retain_weight=2.0
    )
    assert by_keyword["loss"].item() == pytest.approx(0.5 * forget + 2.0 * retain, abs=1e-5)
    kl = kl_min_loss(
        FORGET_LOGITS, FORGET_LABELS, RETAIN_LOGITS, RETAIN_REFERENCE, RETAIN_LABELS, retain_weight=3.0
    )
    assert kl["loss"].item() == pytest.approx(
        forget + 3.0 * hand_kl(RETAIN_LOGITS, RETAIN_REFERENCE, RETAIN_LABELS), abs=1e-5
    )
    with pytest.raises(TypeError, match="not both"):
        grad_diff_loss(
            FORGET_LOGITS, FORGET_LABELS, RETAIN_LOGITS, RETAIN_LABELS, TwoTermWeighting(), forget_weight=2.0
        )
    with pytest.raises(TypeError, match="forget_wieght"):
        grad_diff_loss(FORGET_LOGITS, FORGET_LABELS, RETAIN_LOGITS, RETAIN_LABELS, forget_wieght=2.0)


def test_kl_min_loss_matches_hand_computation_on_completion_tokens_only():
    losses = kl_min_loss(
        FORGET_LOGITS,
        FORGET_LABELS,
        RETAIN_LOGITS,
        RETAIN_REFERENCE,
        RETAIN_LABELS,
        TwoTermWeighting(1.0, 3.0),
    )
    kl = hand_kl(RETAIN_LOGITS, RETAIN_REFERENCE, RETAIN_LABELS)
    assert losses["retain_loss"].item() == pytest.approx(kl, abs=1e-5)
    assert losses["loss"].item() == pytest.approx(
        -hand_nll(FORGET_LOGITS, FORGET_LABELS) + 3.0 * kl, abs=1e-5
    )
    # Padding/prompt positions do not count: changing the reference there changes nothing.
    changed = RETAIN_REFERENCE.clone()
    changed[0, 1] = torch.tensor([9.0, -9.0, 0.0])
    again = kl_min_loss(
        FORGET_LOGITS, FORGET_LABELS, RETAIN_LOGITS, changed, RETAIN_LABELS, TwoTermWeighting(1.0, 3.0)
    )
    assert again["retain_loss"].item() == pytest.approx(kl, abs=1e-6)


def test_npo_loss_matches_hand_computation():
    policy = [s for s, _ in hand_sequence_logps(FORGET_LOGITS, FORGET_LABELS)]
    reference = [-2.0, -0.5]
    beta = 0.1
    expected = sum((2 / beta) * math.log(1 + math.exp(beta * (p - r))) for p, r in zip(policy, reference)) / 2
    from medunlearn.unlearn.ops import sequence_logps

    got = npo_loss(sequence_logps(FORGET_LOGITS, FORGET_LABELS), torch.tensor(reference), beta)
    assert got.item() == pytest.approx(expected, abs=1e-5)
    # At the reference (policy = reference) the loss is (2/β) log 2.
    assert npo_loss(torch.tensor(policy), torch.tensor(policy), beta).item() == pytest.approx(
        20 * math.log(2), abs=1e-4
    )


def test_simnpo_loss_matches_hand_computation():
    beta, delta = 4.5, 0.5
    rows = hand_sequence_logps(FORGET_LOGITS, FORGET_LABELS)
    expected = sum(
        -(2 / beta) * math.log(1 / (1 + math.exp(-beta * (-s / n - delta)))) for s, n in rows
    ) / len(rows)
    got = simnpo_loss(sequence_mean_nll(FORGET_LOGITS, FORGET_LABELS), beta, delta)
    assert got.item() == pytest.approx(expected, abs=1e-5)


def test_rmu_loss_matches_hand_computation():
    forget_acts = torch.tensor([[[1.0, 2.0], [3.0, 0.0], [7.0, 7.0]], [[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]]])
    forget_mask = torch.tensor([[False, True, True], [False, False, True]])
    control = torch.tensor([1.0, 1.0])
    retain_acts = torch.tensor([[[1.0, 1.0], [0.0, 2.0]]])
    retain_ref = torch.tensor([[[0.0, 1.0], [0.0, 0.0]]])
    retain_mask = torch.tensor([[True, True]])
    # Row 0: ((3-1)^2+(0-1)^2)/2 = 2.5 and ((7-1)^2*2)/2 = 36 -> 19.25;
    # row 1: ((2-1)^2+1)/2 = 1 -> mean 10.125.
    # Retain: (1+0)/2 = 0.5 and (0+4)/2 = 2 -> 1.25.
    weighting = TwoTermWeighting(2.0, 4.0)
    losses = rmu_loss(forget_acts, control, forget_mask, retain_acts, retain_ref, retain_mask, weighting)
    assert losses["forget_loss"].item() == pytest.approx(10.125, abs=1e-6)
    assert losses["retain_loss"].item() == pytest.approx(1.25, abs=1e-6)
    assert losses["loss"].item() == pytest.approx(2 * 10.125 + 4 * 1.25, abs=1e-5)
    assert activation_mse(retain_ref, retain_ref, retain_mask).item() == 0


def test_rmu_control_vector_has_the_steering_norm_and_is_seeded():
    a, b = random_control_vector(64, 20.0, seed=1), random_control_vector(64, 20.0, seed=1)
    assert torch.equal(a, b) and a.norm().item() == pytest.approx(20.0, rel=1e-5) and (a >= 0).all()
    assert not torch.equal(a, random_control_vector(64, 20.0, seed=2))


# ----- short training runs on the memorised tiny model ------------------------------------------------------

RUNS = {
    # stem: (config overrides, forget metric direction): NLL of forget answers must rise; RMU's distance
    # to c·u falls.
    "grad_ascent": {},
    "grad_diff": {},
    "kl_min": {},
    "npo": {},
    "simnpo": {},
    "rmu": {"layer": 1, "steering_coeff": 2.0},
}


def forget_nll(model, trainer) -> float:
    batch = trainer.data_collator(
        [{"forget": trainer.pairs.forget[i]} for i in range(len(trainer.pairs.forget))]
    )
    with torch.no_grad():
        logits = model(
            input_ids=batch["forget"]["input_ids"], attention_mask=batch["forget"]["attention_mask"]
        ).logits
    return sequence_mean_nll(logits, batch["forget"]["labels"]).mean().item()


@pytest.mark.parametrize("stem", list(RUNS))
def test_method_trains_and_moves_the_forget_loss_the_intended_way(
    stem, memorised_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    from medunlearn.unlearn.methods import get_method

    config_class, trainer_class = get_method(stem)
    args = unlearning_args(config_class, max_steps=4, learning_rate=5e-3, **RUNS[stem])
    before = {k: v.detach().clone() for k, v in memorised_model.named_parameters()}
    trainer = trainer_class(memorised_model, args, forget_qa, retain_qa, processing_class=tiny_tokenizer)
    nll_before = forget_nll(memorised_model, trainer)
    first_forget_loss = None
    if stem == "rmu":
        pairs = trainer.data_collator([trainer.pairs[i] for i in range(4)])
        first_forget_loss = trainer.unlearning_loss(memorised_model, **pairs)["forget_loss"].item()
    trainer.train()

    logged = trainer.state.log_history[0]
    assert isinstance(logged["forget_loss"], float) and math.isfinite(logged["forget_loss"])
    changed = {k for k, v in memorised_model.named_parameters() if not torch.equal(v.detach(), before[k])}
    assert changed, "no parameter changed"
    assert {k for k, v in memorised_model.named_parameters() if v.requires_grad} >= changed
    if stem == "rmu":
        assert changed == {f"model.layers.{i}.mlp.down_proj.weight" for i in (0, 1)}
        last_forget_loss = trainer.unlearning_loss(memorised_model, **pairs)["forget_loss"].item()
        assert last_forget_loss < first_forget_loss
    else:
        assert forget_nll(memorised_model, trainer) > nll_before + 0.05


def test_npo_precomputed_reference_equals_the_live_reference(
    tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    """Stored log π_ref(y|x) are the values a live frozen copy gives; one training step ends in the same
    weights."""
    from medunlearn.models import build_tiny_llama
    from medunlearn.unlearn import NPOConfig, NPOTrainer

    results = {}
    for mode in ("precomputed", "copy"):
        model = build_tiny_llama(tiny_tokenizer)
        trainer = NPOTrainer(
            model,
            unlearning_args(NPOConfig, reference_mode=mode, max_steps=1),
            forget_qa,
            retain_qa,
            processing_class=tiny_tokenizer,
        )
        assert (trainer.ref_model is None) == (mode == "precomputed")
        trainer.train()
        results[mode] = (
            trainer.state.log_history[0]["loss"],
            model.model.layers[1].mlp.up_proj.weight.detach(),
        )
    assert results["precomputed"][0] == pytest.approx(results["copy"][0], abs=1e-5)
    torch.testing.assert_close(results["precomputed"][1], results["copy"][1])


def test_rmu_under_peft_trains_the_adapter_against_the_adapter_disabled_reference(
    tiny_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    from peft import LoraConfig

    from medunlearn.unlearn import RMUConfig, RMUTrainer

    trainer = RMUTrainer(
        tiny_model,
        unlearning_args(RMUConfig, layer=1, steering_coeff=2.0, max_steps=2, reference_mode="adapter"),
        forget_qa,
        retain_qa,
        processing_class=tiny_tokenizer,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["down_proj", "up_proj"], lora_dropout=0.0),
    )
    assert trainer.reference_source == "adapter" and trainer.ref_model is None
    trainer.train()
    named = dict(trainer.model.named_parameters())
    assert any(not torch.all(p == 0) for name, p in named.items() if "lora_B" in name)
    assert all("lora_" in name for name, p in named.items() if p.requires_grad)


def test_rmu_layer_out_of_range_is_a_clear_error(
    tiny_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    from medunlearn.unlearn import RMUConfig, RMUTrainer, UnlearningInputError

    # An explicit layer is taken as given: layer 7 of a 2-layer model is an error, not a fallback.
    with pytest.raises(UnlearningInputError, match="layer 7 does not exist: the model has 2 decoder layers"):
        RMUTrainer(
            tiny_model,
            unlearning_args(RMUConfig, layer=7),
            forget_qa,
            retain_qa,
            processing_class=tiny_tokenizer,
        )


@pytest.mark.parametrize("num_layers, expected", [(2, 0), (4, 1), (7, 2), (8, 7), (9, 7)])
@pytest.mark.parametrize("peft", [False, True], ids=["full", "lora"])
def test_rmu_default_layer_is_7_or_the_same_relative_depth_and_is_said(
    num_layers, expected, peft, tiny_tokenizer, forget_qa, retain_qa, unlearning_args, caplog
):
    """Unset ``layer``: 7 on a model with more than 7 layers, else round(7/32 of the depth), halves up; the
    resolved layer is written into the config (what the card records) and logged, as a warning when it is not
    the paper's."""
    import logging

    from peft import LoraConfig

    from medunlearn.models import TinyLlamaConfig, build_tiny_llama
    from medunlearn.unlearn import RMUConfig, RMUTrainer
    from medunlearn.unlearn.rmu import default_rmu_layer

    model = build_tiny_llama(tiny_tokenizer, TinyLlamaConfig(num_hidden_layers=num_layers))
    args = unlearning_args(RMUConfig)
    assert args.layer is None
    with caplog.at_level(logging.INFO, logger="medunlearn.unlearn.rmu"):
        trainer = RMUTrainer(
            model,
            args,
            forget_qa,
            retain_qa,
            processing_class=tiny_tokenizer,
            peft_config=LoraConfig(r=2, target_modules=["down_proj"]) if peft else None,
        )
    assert default_rmu_layer(num_layers) == expected
    assert trainer.args.layer == expected and args.method_hyperparameters()["layer"] == expected
    said = [r for r in caplog.records if r.name == "medunlearn.unlearn.rmu"]
    assert len(said) == 1 and f"decoder layer {expected}" in said[0].getMessage()
    assert said[0].levelno == (logging.INFO if expected == 7 else logging.WARNING)
    if not peft:
        trained = {
            f"model.layers.{i}.mlp.down_proj.weight" for i in range(max(0, expected - 2), expected + 1)
        }
        assert set(trainer.trainable_parameter_names) == trained
