"""CE-U: the loss equals a hand computation on fixed logits with -100 masking and padding."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from tiny_training import (
    answer_nll,
    assert_loss_splits_like_one_batch,
    changed_parameters,
    fixed_batch,
    memorised_tiny_model,
    parameters_of,
    random_batches,
)

from medunlearn.unlearn.ce_u import CEUConfig, CEUTrainer, ce_u_loss, mask_first_answer_tokens


def test_mask_first_answer_tokens_per_row():
    labels = torch.tensor([[-100, 5, 6, 7, -100], [-100, -100, -100, 8, 9], [-100, -100, -100, -100, -100]])
    assert mask_first_answer_tokens(labels, 1).tolist() == [
        [-100, -100, 6, 7, -100],
        [-100, -100, -100, -100, 9],
        [-100] * 5,
    ]
    assert mask_first_answer_tokens(labels, 2)[0].tolist() == [-100, -100, -100, 7, -100]
    assert torch.equal(mask_first_answer_tokens(labels, 0), labels)


def test_ce_u_loss_matches_hand_computation_without_skipping():
    """Target = own distribution without the answer token, renormalised; cross-entropy averaged over 4
    tokens."""
    ln = math.log
    per_token = [
        -(0.5 / 0.75 * ln(0.5) + 0.25 / 0.75 * ln(0.25)),  # drop token 1 of (.5,.25,.25)
        -(0.2 / 0.5 * ln(0.2) + 0.3 / 0.5 * ln(0.3)),  # drop token 2 of (.2,.3,.5)
        -(0.5 * ln(0.2) + 0.5 * ln(0.2)),  # drop token 0 of (.6,.2,.2)
        -(0.5 * ln(0.1) + 0.5 * ln(0.1)),  # drop token 1 of (.1,.8,.1)
    ]
    logits, labels = fixed_batch()
    assert ce_u_loss(logits, labels, 0).item() == pytest.approx(sum(per_token) / 4, abs=1e-5)


def test_ce_u_loss_skips_the_first_answer_token_by_default():
    ln = math.log
    expected = (-(0.4 * ln(0.2) + 0.6 * ln(0.3)) - ln(0.1)) / 2
    logits, labels = fixed_batch()
    assert ce_u_loss(logits, labels).item() == pytest.approx(expected, abs=1e-5)


def test_ce_u_gradient_is_p_minus_target():
    """d loss / d logits = (p - q) / N: +p_y on the answer token, -p_v p_y / (1 - p_y) elsewhere."""
    logits, labels = fixed_batch()
    logits.requires_grad_(True)
    ce_u_loss(logits, labels, 0).backward()
    p = torch.tensor([0.1, 0.8, 0.1])
    q = torch.tensor([0.5, 0.0, 0.5])
    torch.testing.assert_close(logits.grad[1, 2], (p - q) / 4, atol=1e-6, rtol=0)
    assert logits.grad[0, 2].abs().sum() == 0 and logits.grad[1, 3].abs().sum() == 0


def test_ce_u_ignores_extra_padding_columns():
    logits, labels = fixed_batch()
    padded_logits = torch.cat([logits, torch.full((2, 2, 3), 13.0)], dim=1)
    padded_labels = torch.cat([labels, torch.full((2, 2), -100)], dim=1)
    torch.testing.assert_close(ce_u_loss(padded_logits, padded_labels), ce_u_loss(logits, labels))


# ---- trainer on the tiny model -----------------------------------------------------------------------------


def test_ce_u_reduction_is_per_answer_then_over_answers():
    """Without skipping, row 0 keeps one token and row 1 two: (ce_00 + (ce_11 + ce_12) / 2) / 2."""
    logits, labels = fixed_batch()
    labels[0, 2] = -100
    ln = math.log
    ce_00 = -(0.5 / 0.75 * ln(0.5) + 0.25 / 0.75 * ln(0.25))
    ce_11, ce_12 = -ln(0.2), -ln(0.1)
    expected = (ce_00 + (ce_11 + ce_12) / 2) / 2
    assert ce_u_loss(logits, labels, 0).item() == pytest.approx(expected, abs=1e-5)


def test_ce_u_trainer_unlearns_without_a_retain_set(tiny_tokenizer, forget_qa, unlearning_args):
    model = memorised_tiny_model(tiny_tokenizer, forget_qa)
    nll_before = answer_nll(model, tiny_tokenizer, forget_qa)
    trainer = CEUTrainer(model, unlearning_args(CEUConfig), forget_qa, processing_class=tiny_tokenizer)
    assert trainer.ref_model is None and not trainer.uses_retain
    before = parameters_of(trainer.model)
    trainer.train()
    assert changed_parameters(before, trainer.model)
    assert answer_nll(trainer.model, tiny_tokenizer, forget_qa) > nll_before + 0.05
    losses = [entry["forget_loss"] for entry in trainer.state.log_history if "forget_loss" in entry]
    assert len(losses) == 3 and "retain_loss" not in trainer.state.log_history[0]


@settings(max_examples=25, deadline=None)
@given(random_batches())
def test_ce_u_splits_over_processes_like_one_batch(batch):
    assert_loss_splits_like_one_batch(ce_u_loss, batch)
