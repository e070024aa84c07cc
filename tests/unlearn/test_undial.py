"""UNDIAL: the loss equals a hand computation on fixed logits with -100 masking and padding."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from tiny_training import (
    GARBAGE,
    assert_loss_splits_like_one_batch,
    changed_parameters,
    logits_and_labels,
    memorised_tiny_model,
    parameters_of,
    qa_batch,
    random_batches,
)

from medunlearn.unlearn.ops import nll_loss
from medunlearn.unlearn.undial import UNDIALConfig, UNDIALTrainer, undial_loss

IS_PROB = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 0]], dtype=torch.bool)
LABELS = torch.tensor([[-100, 1, 2, -100], [-100, -100, 0, 1]])


def as_logits(rows):
    """Log of the probability rows at answer positions, garbage elsewhere (it must never count)."""
    values = torch.tensor(rows)
    return torch.where(IS_PROB.unsqueeze(-1), values.clamp(min=1e-30).log(), values)


POLICY = as_logits(
    [
        [[0.5, 0.25, 0.25], [0.2, 0.3, 0.5], GARBAGE, GARBAGE],
        [GARBAGE, [0.6, 0.2, 0.2], [0.1, 0.8, 0.1], GARBAGE],
    ]
)
REFERENCE = as_logits(
    [
        [[0.25, 0.5, 0.25], [0.2, 0.2, 0.6], [-9.0, 20.0, 3.0], GARBAGE],
        [[1.0, 2.0, 3.0], [0.5, 0.25, 0.25], [0.1, 0.8, 0.1], GARBAGE],
    ]
)


def test_undial_loss_matches_hand_computation():
    """beta = ln 2 halves the answer token's reference probability before renormalising."""
    ln = math.log
    per_token = [
        -(ln(0.5) + ln(0.25) + ln(0.25)) / 3,  # target (.25,.25,.25)/.75
        -(0.2 / 0.7 * ln(0.2) + 0.2 / 0.7 * ln(0.3) + 0.3 / 0.7 * ln(0.5)),  # target (.2,.2,.3)/.7
        -(ln(0.6) + ln(0.2) + ln(0.2)) / 3,  # target (.25,.25,.25)/.75
        -(ln(0.1) / 6 + 2 / 3 * ln(0.8) + ln(0.1) / 6),  # target (.1,.4,.1)/.6
    ]
    loss = undial_loss(POLICY, REFERENCE, LABELS, beta=math.log(2.0))
    assert loss.item() == pytest.approx(sum(per_token) / 4, abs=1e-5)


def test_undial_without_adjustment_on_the_reference_itself_is_its_entropy():
    probs = [[0.5, 0.25, 0.25], [0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [0.1, 0.8, 0.1]]
    mean_entropy = sum(-sum(p * math.log(p) for p in row) for row in probs) / 4
    assert undial_loss(POLICY, POLICY, LABELS, beta=0.0).item() == pytest.approx(mean_entropy, abs=1e-5)


def test_undial_large_beta_removes_the_answer_token_from_the_target():
    """beta -> inf: target = reference without the answer token, renormalised
    (row 0, token 1: (.5, 0, .5))."""
    single_policy, single_reference, single_labels = POLICY[:1, :2], REFERENCE[:1, :2], LABELS[:1, :2]
    expected = -(0.5 * math.log(0.5) + 0.5 * math.log(0.25))
    loss = undial_loss(single_policy, single_reference, single_labels, beta=1e4)
    assert loss.item() == pytest.approx(expected, abs=1e-5)


def test_undial_ignores_extra_padding_columns_and_does_not_train_the_reference():
    policy, reference = POLICY.clone().requires_grad_(True), REFERENCE.clone().requires_grad_(True)
    pad = torch.full((2, 3, 3), 66.0)
    padded_labels = torch.cat([LABELS, torch.full((2, 3), -100)], dim=1)
    loss = undial_loss(torch.cat([policy, pad], 1), torch.cat([reference, pad], 1), padded_labels, beta=2.0)
    torch.testing.assert_close(loss, undial_loss(POLICY, REFERENCE, LABELS, beta=2.0))
    loss.backward()
    assert policy.grad.abs().sum() > 0
    assert reference.grad is None or reference.grad.abs().sum() == 0


def test_undial_config_defaults_are_the_reference_recipe(tmp_path):
    config = UNDIALConfig(output_dir=str(tmp_path))
    assert (config.beta, config.forget_weight, config.retain_weight) == (10.0, 1.0, 0.0)
    assert (config.learning_rate, config.num_train_epochs) == (1e-4, 10.0)


# ---- trainer on the tiny model -----------------------------------------------------------------------------


def test_undial_reduction_is_per_answer_then_over_answers():
    """Row 0 keeps one answer token, row 1 two: (ce_00 + (ce_11 + ce_12) / 2) / 2 with beta = 0
    (plain CE to ref)."""
    labels = LABELS.clone()
    labels[0, 2] = -100
    ln = math.log
    ce_00 = -(0.25 * ln(0.5) + 0.5 * ln(0.25) + 0.25 * ln(0.25))
    ce_11 = -(0.5 * ln(0.6) + 0.25 * ln(0.2) + 0.25 * ln(0.2))
    ce_12 = -(0.1 * ln(0.1) + 0.8 * ln(0.8) + 0.1 * ln(0.1))
    expected = (ce_00 + (ce_11 + ce_12) / 2) / 2
    assert undial_loss(POLICY, REFERENCE, labels, beta=0.0).item() == pytest.approx(expected, abs=1e-5)


def test_undial_trainer_distils_away_from_the_forget_answers(tiny_tokenizer, forget_qa, unlearning_args):
    """Default alpha = 0: no retain set needed; the reference is a frozen copy of the starting model (forced:
    by default its outputs are precomputed, tests/unlearn/test_step_work.py)."""
    model = memorised_tiny_model(tiny_tokenizer, forget_qa)
    start_logits, labels = logits_and_labels(model, tiny_tokenizer, forget_qa)
    nll_before = nll_loss(start_logits, labels).item()
    trainer = UNDIALTrainer(
        model,
        unlearning_args(UNDIALConfig, reference_mode="copy"),
        forget_qa,
        processing_class=tiny_tokenizer,
    )
    assert trainer.reference_source == "copy" and trainer.ref_model is not model
    before = parameters_of(trainer.model)
    reference_before = parameters_of(trainer.ref_model)
    trainer.train()
    assert changed_parameters(before, trainer.model)
    assert not changed_parameters(reference_before, trainer.ref_model)
    logits_after, _ = logits_and_labels(trainer.model, tiny_tokenizer, forget_qa)
    assert undial_loss(logits_after, start_logits, labels, beta=10.0) < undial_loss(
        start_logits, start_logits, labels, 10.0
    )
    assert nll_loss(logits_after, labels).item() > nll_before + 0.05


def test_undial_under_peft_uses_the_adapter_disabled_model(
    tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    from peft import LoraConfig

    model = memorised_tiny_model(tiny_tokenizer, forget_qa)
    start_logits, _ = logits_and_labels(model, tiny_tokenizer, forget_qa)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    args = unlearning_args(UNDIALConfig, retain_weight=1.0, reference_mode="adapter")
    trainer = UNDIALTrainer(
        model, args, forget_qa, retain_qa, processing_class=tiny_tokenizer, peft_config=lora
    )
    assert trainer.reference_source == "adapter" and trainer.ref_model is None
    trainer.train()
    assert "retain_loss" in trainer.state.log_history[0]
    batch = qa_batch(tiny_tokenizer, forget_qa)
    torch.testing.assert_close(trainer.reference_logits(trainer.model, batch), start_logits)


def undial_with_shuffled_reference(logits, labels):
    """The reference is the policy's logits reversed over the vocabulary: different, but a function of the
    rows."""
    return undial_loss(logits, logits.flip(-1), labels, beta=3.0)


@settings(max_examples=25, deadline=None)
@given(random_batches())
def test_undial_splits_over_processes_like_one_batch(batch):
    assert_loss_splits_like_one_batch(undial_with_shuffled_reference, batch)
