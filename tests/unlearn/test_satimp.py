"""SatImp: the loss equals a hand computation on fixed logits with -100 masking and padding."""

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

from medunlearn.unlearn.satimp import SatImpConfig, SatImpTrainer, satimp_loss

ANSWER_PROBS = [0.25, 0.5, 0.6, 0.8]


@pytest.mark.parametrize(("beta1", "beta2"), [(5.0, 1.0), (1.0, 0.0), (2.0, 3.0)])
def test_satimp_loss_matches_hand_computation(beta1, beta2):
    logits, labels = fixed_batch()
    expected = sum(p**beta1 * (1 - p) ** beta2 * math.log(p) for p in ANSWER_PROBS) / 4
    assert satimp_loss(logits, labels, beta1=beta1, beta2=beta2).item() == pytest.approx(expected, abs=1e-5)


def test_satimp_default_values_by_hand(tmp_path):
    """beta1=5, beta2=1 written out: 0.25^5*0.75*ln .25 + 0.5^5*0.5*ln .5 + 0.6^5*0.4*ln .6
    + 0.8^5*0.2*ln .8."""
    logits, labels = fixed_batch()
    expected = (
        0.25**5 * 0.75 * math.log(0.25)
        + 0.5**5 * 0.5 * math.log(0.5)
        + 0.6**5 * 0.4 * math.log(0.6)
        + 0.8**5 * 0.2 * math.log(0.8)
    ) / 4
    config = SatImpConfig(output_dir=str(tmp_path))
    assert (config.forget_weight, config.retain_weight) == (0.1, 1.0)
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


# ---- trainer on the tiny model -----------------------------------------------------------------------------


def test_satimp_reduction_is_per_answer_then_over_answers():
    logits, labels = fixed_batch()
    labels[1, 3] = -100  # row 1 keeps only p = .6

    def f(p):
        return p**2 * (1 - p) * math.log(p)

    expected = ((f(0.25) + f(0.5)) / 2 + f(0.6)) / 2
    assert satimp_loss(logits, labels, beta1=2.0, beta2=1.0).item() == pytest.approx(expected, abs=1e-6)


def test_satimp_trainer_unlearns_the_forget_answers(tiny_tokenizer, forget_qa, retain_qa, unlearning_args):
    model = memorised_tiny_model(tiny_tokenizer, concatenate_datasets([forget_qa, retain_qa]))
    satimp_before = satimp_loss(*logits_and_labels(model, tiny_tokenizer, forget_qa))
    nll_before = answer_nll(model, tiny_tokenizer, forget_qa)
    # gamma = 1 rather than the recipe's 0.1 so that three steps show a clear effect.
    args = unlearning_args(SatImpConfig, forget_weight=1.0)
    trainer = SatImpTrainer(model, args, forget_qa, retain_qa, processing_class=tiny_tokenizer)
    assert trainer.ref_model is None
    before = parameters_of(trainer.model)
    trainer.train()
    assert changed_parameters(before, trainer.model)
    assert satimp_loss(*logits_and_labels(trainer.model, tiny_tokenizer, forget_qa)) < satimp_before
    assert answer_nll(trainer.model, tiny_tokenizer, forget_qa) > nll_before


@settings(max_examples=25, deadline=None)
@given(random_batches())
def test_satimp_splits_over_processes_like_one_batch(batch):
    assert_loss_splits_like_one_batch(satimp_loss, batch)
