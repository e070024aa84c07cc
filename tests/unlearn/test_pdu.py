"""PDU: the flattening loss and the dual update equal hand computations, with -100 masking and padding."""

from __future__ import annotations

import pytest
import torch

from medunlearn.unlearn.pdu import constrained_objective, dual_ascent_step, logit_margin_flattening_loss

GARBAGE = [40.0, -30.0, 7.0]


def fixed_batch():
    """Answer-position logits: (1,2,3) margin 1; (0,0,3) margin 2; (2,2,2) margin 0; (4,0,-1) margin 3."""
    logits = torch.tensor(
        [
            [[1.0, 2.0, 3.0], [0.0, 0.0, 3.0], GARBAGE, GARBAGE],
            [GARBAGE, [2.0, 2.0, 2.0], [4.0, 0.0, -1.0], GARBAGE],
        ]
    )
    labels = torch.tensor([[-100, 1, 2, -100], [-100, -100, 0, 1]])
    return logits, labels


def test_flattening_loss_matches_hand_computation():
    logits, labels = fixed_batch()
    expected = (1**2 + 2**2 + 0**2 + 3**2) / 4
    assert logit_margin_flattening_loss(logits, labels).item() == pytest.approx(expected, abs=1e-6)


def test_flattening_loss_is_zero_for_uniform_logits_and_shift_invariant():
    logits, labels = fixed_batch()
    assert logit_margin_flattening_loss(torch.full_like(logits, 3.7), labels).item() == 0.0
    shifted = logits + torch.randn(2, 4, 1)  # adding a constant per position leaves the distribution unchanged
    torch.testing.assert_close(logit_margin_flattening_loss(shifted, labels), logit_margin_flattening_loss(logits, labels))


def test_flattening_loss_ignores_extra_padding_columns():
    logits, labels = fixed_batch()
    padded_logits = torch.cat([logits, torch.tensor([[[9.0, -9.0, 0.0]] * 2] * 2)], dim=1)
    padded_labels = torch.cat([labels, torch.full((2, 2), -100)], dim=1)
    assert logit_margin_flattening_loss(padded_logits, padded_labels).item() == pytest.approx(3.5, abs=1e-6)


def test_flattening_gradient_by_hand():
    """For (0,0,3): margin m = 3 - 1 = 2, d m^2 / dz = 2m * (onehot(argmax) - 1/3) = 4 * (-1/3, -1/3, 2/3), /4 tokens."""
    logits, labels = fixed_batch()
    logits.requires_grad_(True)
    logit_margin_flattening_loss(logits, labels).backward()
    expected = torch.tensor([-1 / 3, -1 / 3, 2 / 3])
    torch.testing.assert_close(logits.grad[0, 1], expected, atol=1e-6, rtol=0)


def test_constrained_objective_and_dual_ascent():
    forget, retain = torch.tensor(3.5), torch.tensor(0.9)
    assert constrained_objective(forget, retain, dual=10.0, retain_loss_eps=0.5, gamma=2.0).item() == pytest.approx(
        2.0 * 3.5 + 10.0 * (0.9 - 0.5)
    )
    assert dual_ascent_step(10.0, retain_loss=0.9, retain_loss_eps=0.5, step_size=5.0) == pytest.approx(12.0)
    assert dual_ascent_step(10.0, retain_loss=0.3, retain_loss_eps=0.5, step_size=5.0) == pytest.approx(9.0)
    assert dual_ascent_step(0.5, retain_loss=0.0, retain_loss_eps=0.5, step_size=5.0) == 0.0
