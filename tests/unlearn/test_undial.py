"""UNDIAL: the loss equals a hand computation on fixed logits with -100 masking and padding."""

from __future__ import annotations

import math

import pytest
import torch

from medunlearn.unlearn.undial import UNDIALConfig, undial_loss

GARBAGE = [40.0, -30.0, 7.0]
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
    """beta -> inf: target = reference without the answer token, renormalised (row 0, token 1: (.5, 0, .5))."""
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
