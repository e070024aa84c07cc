"""SatImp: the loss equals a hand computation on fixed logits with -100 masking and padding."""

from __future__ import annotations

import math

import pytest
import torch

from medunlearn.unlearn.satimp import SatImpConfig, satimp_loss

GARBAGE = [40.0, -30.0, 7.0]
ANSWER_PROBS = [0.25, 0.5, 0.6, 0.8]


def fixed_batch():
    """B=2, T=4, V=3. Answer-token probabilities: row 0 -> 0.25, 0.5; row 1 -> 0.6, 0.8. Row 0 ends in padding."""
    logits = torch.tensor(
        [
            [[0.5, 0.25, 0.25], [0.2, 0.3, 0.5], GARBAGE, GARBAGE],
            [GARBAGE, [0.6, 0.2, 0.2], [0.1, 0.8, 0.1], GARBAGE],
        ]
    )
    is_log_prob = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 0]], dtype=torch.bool)
    logits = torch.where(is_log_prob.unsqueeze(-1), logits.log(), logits)
    labels = torch.tensor([[-100, 1, 2, -100], [-100, -100, 0, 1]])
    return logits, labels


@pytest.mark.parametrize(("beta1", "beta2"), [(5.0, 1.0), (1.0, 0.0), (2.0, 3.0)])
def test_satimp_loss_matches_hand_computation(beta1, beta2):
    logits, labels = fixed_batch()
    expected = sum(p**beta1 * (1 - p) ** beta2 * math.log(p) for p in ANSWER_PROBS) / 4
    assert satimp_loss(logits, labels, beta1=beta1, beta2=beta2).item() == pytest.approx(expected, abs=1e-5)


def test_satimp_default_values_by_hand():
    """beta1=5, beta2=1 written out: 0.25^5*0.75*ln .25 + 0.5^5*0.5*ln .5 + 0.6^5*0.4*ln .6 + 0.8^5*0.2*ln .8."""
    logits, labels = fixed_batch()
    expected = (
        0.25**5 * 0.75 * math.log(0.25)
        + 0.5**5 * 0.5 * math.log(0.5)
        + 0.6**5 * 0.4 * math.log(0.6)
        + 0.8**5 * 0.2 * math.log(0.8)
    ) / 4
    config = SatImpConfig()
    assert satimp_loss(logits, labels, config.beta1, config.beta2).item() == pytest.approx(expected, abs=1e-6)


def test_satimp_ignores_extra_padding_columns():
    logits, labels = fixed_batch()
    padded_logits = torch.cat([logits, torch.full((2, 2, 3), -55.0)], dim=1)
    padded_labels = torch.cat([labels, torch.full((2, 2), -100)], dim=1)
    torch.testing.assert_close(satimp_loss(padded_logits, padded_labels), satimp_loss(logits, labels))


def test_satimp_weights_are_detached():
    """The gradient is w * (onehot - p) / N with w = p^5 (1-p) held fixed."""
    logits, labels = fixed_batch()
    logits.requires_grad_(True)
    satimp_loss(logits, labels, beta1=5.0, beta2=1.0).backward()
    p = torch.tensor([0.6, 0.2, 0.2])
    expected = 0.6**5 * 0.4 * (torch.tensor([1.0, 0.0, 0.0]) - p) / 4
    torch.testing.assert_close(logits.grad[1, 1], expected, atol=1e-7, rtol=0)
