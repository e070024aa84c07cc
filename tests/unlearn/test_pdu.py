"""PDU: the flattening loss and the dual update equal hand computations, with -100 masking and padding."""

from __future__ import annotations

import pytest
import torch
from datasets import concatenate_datasets
from hypothesis import given, settings
from tiny_training import (
    GARBAGE,
    answer_nll,
    assert_loss_splits_like_one_batch,
    changed_parameters,
    logits_and_labels,
    memorised_tiny_model,
    parameters_of,
    random_batches,
)

from medunlearn.models import build_tiny_llama
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.pdu import (
    PDUConfig,
    PDUTrainer,
    constrained_objective,
    dual_ascent_step,
    logit_margin_flattening_loss,
)


def margin_batch():
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
    logits, labels = margin_batch()
    expected = (1**2 + 2**2 + 0**2 + 3**2) / 4
    assert logit_margin_flattening_loss(logits, labels).item() == pytest.approx(expected, abs=1e-6)


def test_flattening_loss_is_zero_for_uniform_logits_and_shift_invariant():
    logits, labels = margin_batch()
    assert logit_margin_flattening_loss(torch.full_like(logits, 3.7), labels).item() == 0.0
    shifted = logits + torch.randn(
        2, 4, 1
    )  # adding a constant per position leaves the distribution unchanged
    torch.testing.assert_close(
        logit_margin_flattening_loss(shifted, labels), logit_margin_flattening_loss(logits, labels)
    )


def test_flattening_loss_ignores_extra_padding_columns():
    logits, labels = margin_batch()
    padded_logits = torch.cat([logits, torch.tensor([[[9.0, -9.0, 0.0]] * 2] * 2)], dim=1)
    padded_labels = torch.cat([labels, torch.full((2, 2), -100)], dim=1)
    assert logit_margin_flattening_loss(padded_logits, padded_labels).item() == pytest.approx(3.5, abs=1e-6)


def test_flattening_gradient_by_hand():
    """For (0,0,3): margin m = 3 - 1 = 2, d m^2 / dz = 2m * (onehot(argmax) - 1/3) = 4 * (-1/3, -1/3, 2/3),
    /4 tokens."""
    logits, labels = margin_batch()
    logits.requires_grad_(True)
    logit_margin_flattening_loss(logits, labels).backward()
    expected = torch.tensor([-1 / 3, -1 / 3, 2 / 3])
    torch.testing.assert_close(logits.grad[0, 1], expected, atol=1e-6, rtol=0)


def test_constrained_objective_and_dual_ascent():
    forget, retain = torch.tensor(3.5), torch.tensor(0.9)
    assert constrained_objective(
        forget, retain, dual=10.0, retain_loss_eps=0.5, gamma=2.0
    ).item() == pytest.approx(2.0 * 3.5 + 10.0 * (0.9 - 0.5))
    assert dual_ascent_step(10.0, retain_loss=0.9, retain_loss_eps=0.5, step_size=5.0) == pytest.approx(12.0)
    assert dual_ascent_step(10.0, retain_loss=0.3, retain_loss_eps=0.5, step_size=5.0) == pytest.approx(9.0)
    assert dual_ascent_step(0.5, retain_loss=0.0, retain_loss_eps=0.5, step_size=5.0) == 0.0


# ---- trainer on the tiny model -----------------------------------------------------------------------------


def test_flattening_reduction_is_per_answer_then_over_answers():
    logits, labels = margin_batch()
    labels[0, 2] = -100  # row 0 keeps margin 1; row 1 keeps margins 0 and 3
    assert logit_margin_flattening_loss(logits, labels).item() == pytest.approx(
        (1 + (0 + 9) / 2) / 2, abs=1e-6
    )


def test_pdu_trainer_flattens_forget_predictions(tiny_tokenizer, forget_qa, retain_qa, unlearning_args):
    model = memorised_tiny_model(tiny_tokenizer, concatenate_datasets([forget_qa, retain_qa]))
    flat_before = logit_margin_flattening_loss(*logits_and_labels(model, tiny_tokenizer, forget_qa))
    nll_before = answer_nll(model, tiny_tokenizer, forget_qa)
    trainer = PDUTrainer(
        model, unlearning_args(PDUConfig), forget_qa, retain_qa, processing_class=tiny_tokenizer
    )
    assert trainer.ref_model is None
    before = parameters_of(trainer.model)
    trainer.train()
    assert changed_parameters(before, trainer.model)
    assert (
        logit_margin_flattening_loss(*logits_and_labels(trainer.model, tiny_tokenizer, forget_qa))
        < flat_before
    )
    assert answer_nll(trainer.model, tiny_tokenizer, forget_qa) > nll_before
    history = [entry for entry in trainer.state.log_history if "dual" in entry]
    # 5 warm-up epochs by default: lambda stays at its initial value alpha = 100 during these 3 steps.
    assert [entry["dual"] for entry in history] == [100.0, 100.0, 100.0]
    # Unset epsilon: 1.1 x the first step's retain loss.
    assert history[0]["retain_loss_eps"] == pytest.approx(1.1 * history[0]["retain_loss"], rel=1e-4)


@pytest.mark.parametrize("accumulation", [1, 2])
def test_pdu_dual_variable_follows_projected_ascent(
    tiny_tokenizer, forget_qa, retain_qa, unlearning_args, accumulation
):
    """With epsilon = 0 the constraint is always violated: lambda_{k+1} = lambda_k + eta * retain_loss_k,
    where retain_loss_k is the mean over the step's micro-batches (what the base trainer logs per step)."""
    model = build_tiny_llama(tiny_tokenizer)
    args = unlearning_args(
        PDUConfig,
        dual_warmup_epochs=0,
        retain_loss_eps=0.0,
        retain_weight=1.0,
        dual_step_size=0.5,
        learning_rate=1e-4,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=accumulation,
        max_steps=2,
    )
    trainer = PDUTrainer(model, args, forget_qa, retain_qa, processing_class=tiny_tokenizer)
    trainer.train()
    history = [entry for entry in trainer.state.log_history if "dual" in entry]
    expected_dual = 1.0
    for entry in history:
        assert entry["dual"] == pytest.approx(expected_dual, rel=1e-5)
        expected_dual += 0.5 * entry["retain_loss"]
    assert trainer.dual == pytest.approx(expected_dual, rel=1e-5)


@settings(max_examples=25, deadline=None)
@given(random_batches())
def test_flattening_splits_over_processes_like_one_batch(batch):
    assert_loss_splits_like_one_batch(logit_margin_flattening_loss, batch)


def test_pdu_config_rejects_negative_bounds(tmp_path):
    with pytest.raises(UnlearningInputError, match="retain_loss_eps"):
        PDUConfig(output_dir=str(tmp_path), retain_loss_eps=-0.1)
    with pytest.raises(UnlearningInputError, match="dual_step_size"):
        PDUConfig(output_dir=str(tmp_path), dual_step_size=-1.0)


def test_pdu_checkpoint_carries_the_dual_variable(
    tiny_tokenizer, forget_qa, retain_qa, unlearning_args, tmp_path
):
    """Resuming from a checkpoint continues with the saved lambda and epsilon, not lambda_0."""
    settings = dict(
        dual_warmup_epochs=0,
        retain_weight=1.0,
        dual_step_size=0.5,
        learning_rate=1e-4,
        per_device_train_batch_size=1,
    )
    first = PDUTrainer(
        build_tiny_llama(tiny_tokenizer),
        unlearning_args(PDUConfig, max_steps=2, save_strategy="steps", save_steps=2, **settings),
        forget_qa,
        retain_qa,
        processing_class=tiny_tokenizer,
    )
    first.train()
    saved_dual, saved_eps = first.dual, first.retain_loss_eps
    assert saved_dual != 1.0
    resumed = PDUTrainer(
        build_tiny_llama(tiny_tokenizer),
        unlearning_args(PDUConfig, max_steps=3, **settings),
        forget_qa,
        retain_qa,
        processing_class=tiny_tokenizer,
    )
    resumed.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-2"))
    resumed_steps = [
        entry for entry in resumed.state.log_history if "dual" in entry and entry.get("step") == 3
    ]
    assert resumed_steps and resumed_steps[0]["dual"] == pytest.approx(saved_dual, rel=1e-5)
    assert resumed_steps[0]["retain_loss_eps"] == pytest.approx(saved_eps, rel=1e-5)
