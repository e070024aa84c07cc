"""WGA: the loss equals a hand computation on fixed logits with -100 masking and padding."""

from __future__ import annotations

import math

import pytest
import torch
from datasets import concatenate_datasets
from hypothesis import given, settings
from tiny_training import (
    answer_nll,
    assert_loss_splits_like_one_batch,
    changed_parameters,
    fixed_batch,
    logits_and_labels,
    memorised_tiny_model,
    parameters_of,
    random_batches,
)

from medunlearn.unlearn.ops import completion_token_logps
from medunlearn.unlearn.wga import WGAConfig, WGATrainer, wga_loss

ANSWER_PROBS = [0.25, 0.5, 0.6, 0.8]


def test_answer_token_log_probs_are_shifted_and_masked():
    logits, labels = fixed_batch()
    log_probs, mask = completion_token_logps(logits, labels)
    assert mask.tolist() == [[True, True, False], [False, True, True]]
    expected = [[math.log(0.25), math.log(0.5), 0.0], [0.0, math.log(0.6), math.log(0.8)]]
    torch.testing.assert_close(log_probs, torch.tensor(expected), atol=1e-5, rtol=0)


@pytest.mark.parametrize("beta", [0.0, 1.0, 2.5])
def test_wga_loss_matches_hand_computation(beta):
    logits, labels = fixed_batch()
    expected = sum(p**beta * math.log(p) for p in ANSWER_PROBS) / len(ANSWER_PROBS)
    assert wga_loss(logits, labels, beta=beta).item() == pytest.approx(expected, abs=1e-5)


def test_wga_with_beta_zero_is_gradient_ascent():
    logits, labels = fixed_batch()
    mean_log_likelihood = sum(math.log(p) for p in ANSWER_PROBS) / 4
    assert wga_loss(logits, labels, beta=0.0).item() == pytest.approx(mean_log_likelihood, abs=1e-5)


def test_wga_ignores_extra_padding_columns():
    logits, labels = fixed_batch()
    padded_logits = torch.cat([logits, torch.full((2, 3, 3), 55.0)], dim=1)
    padded_labels = torch.cat([labels, torch.full((2, 3), -100)], dim=1)
    torch.testing.assert_close(wga_loss(padded_logits, padded_labels), wga_loss(logits, labels))


def test_wga_weights_are_detached():
    """d/dz of w*log p with w held fixed: w * (onehot - p), averaged over the 4 answer tokens."""
    logits, labels = fixed_batch()
    logits.requires_grad_(True)
    wga_loss(logits, labels, beta=1.0).backward()
    p = torch.tensor([0.5, 0.25, 0.25])
    expected = 0.25 * (torch.tensor([0.0, 1.0, 0.0]) - p) / 4
    torch.testing.assert_close(logits.grad[0, 0], expected, atol=1e-6, rtol=0)
    assert logits.grad[0, 2].abs().sum() == 0 and logits.grad[1, 0].abs().sum() == 0


# ---- trainer on the tiny model -----------------------------------------------------------------------------


def test_wga_reduction_is_per_answer_then_over_answers():
    """Row 0 keeps one answer token (p=.25), row 1 two (p=.6, .8): (f(.25) + (f(.6) + f(.8)) / 2) / 2."""
    logits, labels = fixed_batch()
    labels[0, 2] = -100

    def f(p):
        return p * math.log(p)

    expected = (f(0.25) + (f(0.6) + f(0.8)) / 2) / 2
    assert wga_loss(logits, labels, beta=1.0).item() == pytest.approx(expected, abs=1e-6)


def test_wga_trainer_unlearns_the_forget_answers(tiny_tokenizer, forget_qa, retain_qa, unlearning_args):
    model = memorised_tiny_model(tiny_tokenizer, concatenate_datasets([forget_qa, retain_qa]))
    wga_before = wga_loss(*logits_and_labels(model, tiny_tokenizer, forget_qa))
    nll_before = answer_nll(model, tiny_tokenizer, forget_qa)
    trainer = WGATrainer(
        model, unlearning_args(WGAConfig), forget_qa, retain_qa, processing_class=tiny_tokenizer
    )
    assert trainer.reference_source == "none" and trainer.ref_model is None
    before = parameters_of(trainer.model)
    trainer.train()
    assert changed_parameters(before, trainer.model)
    assert wga_loss(*logits_and_labels(trainer.model, tiny_tokenizer, forget_qa)) < wga_before
    assert answer_nll(trainer.model, tiny_tokenizer, forget_qa) > nll_before + 0.05
    assert {"forget_loss", "retain_loss"} <= set(trainer.state.log_history[0])


@settings(max_examples=25, deadline=None)
@given(random_batches())
def test_wga_splits_over_processes_like_one_batch(batch):
    assert_loss_splits_like_one_batch(wga_loss, batch)
