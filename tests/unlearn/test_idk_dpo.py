"""IdkDPO: the loss equals a hand computation; refusals are valid and assigned deterministically."""

from __future__ import annotations

import math

import pytest
import torch
from datasets import concatenate_datasets
from tiny_training import (
    answer_nll,
    changed_parameters,
    fixed_batch,
    logits_and_labels,
    memorised_tiny_model,
    parameters_of,
)

from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.idk_dpo import (
    IdkDPOConfig,
    IdkDPOTrainer,
    assign_idk_answers,
    idk_dpo_loss,
    load_idk_answers,
)
from medunlearn.unlearn.ops import sequence_logps


def test_sequence_log_probs_sum_answer_tokens_only():
    logits, labels = fixed_batch()
    expected = torch.tensor([math.log(0.25 * 0.5), math.log(0.6 * 0.8)])
    torch.testing.assert_close(sequence_logps(logits, labels), expected, atol=1e-5, rtol=0)


def test_idk_dpo_loss_matches_hand_computation():
    """Margins: row 0 (-1+1.5) - (-3+2.5) = 1.0; row 1 (-2+2) - (-1+1.5) = -0.5; beta = 0.1."""
    loss = idk_dpo_loss(
        policy_idk_logps=torch.tensor([-1.0, -2.0]),
        policy_forget_logps=torch.tensor([-3.0, -1.0]),
        reference_idk_logps=torch.tensor([-1.5, -2.0]),
        reference_forget_logps=torch.tensor([-2.5, -1.5]),
        beta=0.1,
    )

    def log_sigmoid(x):
        return -math.log1p(math.exp(-x))

    expected = -(2 / 0.1) * (log_sigmoid(0.1) + log_sigmoid(-0.05)) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-5)


def test_idk_dpo_at_zero_margin_is_2_ln2_over_beta_and_tends_to_minus_margin():
    zeros = torch.zeros(3)
    assert idk_dpo_loss(zeros, zeros, zeros, zeros, beta=0.5).item() == pytest.approx(
        4 * math.log(2), abs=1e-6
    )
    idk, forget = torch.tensor([0.3, -0.2, 1.0]), torch.tensor([0.1, 0.4, -0.5])
    small_beta = 1e-3
    shifted = idk_dpo_loss(idk, forget, zeros, zeros, beta=small_beta).item() - 2 * math.log(2) / small_beta
    assert shifted == pytest.approx(-(idk - forget).mean().item(), abs=1e-3)


def test_shipped_refusals_are_many_distinct_and_short():
    answers = load_idk_answers()
    assert len(answers) >= 90
    assert len(set(answers)) == len(answers)
    assert all(len(a) < 120 and not a.startswith("#") for a in answers)


def test_refusal_file_errors_and_comments(tmp_path):
    path = tmp_path / "idk.txt"
    path.write_text("# header\n\nNo idea.\n  Not known.  \n", encoding="utf-8")
    assert load_idk_answers(path) == ["No idea.", "Not known."]
    path.write_text("# only a comment\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no refusal answers"):
        load_idk_answers(path)


def test_assign_idk_answers_is_deterministic_and_uses_the_list():
    answers = load_idk_answers()
    first = assign_idk_answers(50, answers, seed=0)
    assert first == assign_idk_answers(50, answers, seed=0)
    assert first != assign_idk_answers(50, answers, seed=1)
    assert set(first) <= set(answers) and len(set(first)) > 10


# ---- trainer on the tiny model -----------------------------------------------------------------------------


def test_idk_dpo_trainer_prefers_refusals(tiny_tokenizer, forget_qa, retain_qa, unlearning_args):
    model = memorised_tiny_model(tiny_tokenizer, concatenate_datasets([forget_qa, retain_qa]))
    nll_before = answer_nll(model, tiny_tokenizer, forget_qa)
    refusals = assign_idk_answers(len(forget_qa), load_idk_answers(), seed=0)
    refusal_rows = {"question": forget_qa["question"], "answer": refusals}
    refusal_nll_before = answer_nll(model, tiny_tokenizer, refusal_rows)
    trainer = IdkDPOTrainer(
        model, unlearning_args(IdkDPOConfig), forget_qa, retain_qa, processing_class=tiny_tokenizer
    )
    # Reference log-probs of both answers are precomputed once; no reference model exists.
    assert trainer.reference_source == "precomputed" and trainer.ref_model is None
    forget_columns = trainer.pairs.forget.column_names
    assert {"reference_logps", "idk_reference_logps", "idk_input_ids", "idk_labels"} <= set(forget_columns)
    logits, labels = logits_and_labels(model, tiny_tokenizer, refusal_rows)
    torch.testing.assert_close(
        torch.tensor(trainer.pairs.forget["idk_reference_logps"]),
        sequence_logps(logits, labels),
        atol=1e-4,
        rtol=0,
    )
    before = parameters_of(trainer.model)
    trainer.train()
    assert changed_parameters(before, trainer.model)
    history = [entry for entry in trainer.state.log_history if "preference_margin" in entry]
    assert history[0]["preference_margin"] == pytest.approx(0.0, abs=1e-4)  # policy == reference at step 0
    assert history[-1]["preference_margin"] > 0
    assert answer_nll(trainer.model, tiny_tokenizer, forget_qa) > nll_before
    assert answer_nll(trainer.model, tiny_tokenizer, refusal_rows) < refusal_nll_before


def test_idk_dpo_live_reference_matches_precomputed(tiny_tokenizer, forget_qa, retain_qa, unlearning_args):
    """reference_mode='copy' computes the reference terms live; on the same batch it gives the same loss."""
    model = memorised_tiny_model(tiny_tokenizer, concatenate_datasets([forget_qa, retain_qa]))
    precomputed = IdkDPOTrainer(
        model, unlearning_args(IdkDPOConfig), forget_qa, retain_qa, processing_class=tiny_tokenizer
    )
    live = IdkDPOTrainer(
        model,
        unlearning_args(IdkDPOConfig, reference_mode="copy"),
        forget_qa,
        retain_qa,
        processing_class=tiny_tokenizer,
    )
    assert live.reference_source == "copy" and "idk_reference_logps" not in live.pairs.forget.column_names
    item = precomputed.pairs[0]
    batch = precomputed.data_collator([item, precomputed.pairs[1]])
    live_batch = live.data_collator([live.pairs[0], live.pairs[1]])
    with torch.no_grad():
        expected = precomputed.unlearning_loss(model, batch["forget"], batch["retain"])
        actual = live.unlearning_loss(model, live_batch["forget"], live_batch["retain"])
    torch.testing.assert_close(actual["forget_loss"], expected["forget_loss"], atol=1e-4, rtol=0)
    assert abs(expected["preference_margin"].item()) < 1e-3


def test_idk_dpo_trainer_reports_a_missing_refusals_file(
    tiny_tokenizer, tiny_model, forget_qa, retain_qa, unlearning_args, tmp_path
):
    missing = tmp_path / "no_such_refusals.txt"
    args = unlearning_args(IdkDPOConfig, idk_answers_file=str(missing))
    with pytest.raises(UnlearningInputError, match="no_such_refusals.txt"):
        IdkDPOTrainer(tiny_model, args, forget_qa, retain_qa, processing_class=tiny_tokenizer)
