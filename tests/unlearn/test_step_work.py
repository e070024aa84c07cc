"""Less work per unlearning step, same numbers: one forward over forget and retain where the loss allows
(``UnlearningTrainer.forward_pair``), and the reference's outputs on fixed rows precomputed once
(``medunlearn.unlearn.frozen``) instead of a live reference pass at every step."""

from __future__ import annotations

import pytest
import torch

from medunlearn.unlearn.ops import concatenate_batches, padded_token_ratio, split_rows

FUSED = ["grad_diff", "npo", "simnpo", "wga", "satimp", "pdu", "kl_min", "rmu", "undial", "ce_u"]
FROZEN = {"kl_min": "retain", "rmu": "retain", "undial": "forget"}
# Methods whose retain term is α·NLL only: α ≠ 0 here so that a retain batch is read.
WITH_RETAIN = {"undial": {"retain_weight": 1.0}, "ce_u": {"retain_weight": 1.0}}
RMU_SETTINGS = {"layer": 1, "steering_coeff": 2.0}


def trainer_for(stem, model, tokenizer, forget, retain, make_args, **overrides):
    from medunlearn.unlearn.methods import METHODS

    config_class, trainer_class = METHODS[stem].load()
    settings = {**WITH_RETAIN.get(stem, {}), **(RMU_SETTINGS if stem == "rmu" else {}), **overrides}
    return trainer_class(
        model, make_args(config_class, **settings), forget, retain, processing_class=tokenizer
    )


def count_forwards(model):
    calls = []
    handle = model.register_forward_hook(lambda *_: calls.append(1))
    return calls, handle


def loss_and_gradients(trainer, batch):
    model = trainer.model
    model.zero_grad()
    losses = trainer.unlearning_loss(model, batch["forget"], batch.get("retain"))
    losses["loss"].backward()
    gradients = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return {k: v.detach() for k, v in losses.items()}, gradients


def uneven_batch(trainer):
    """Two pairs whose forget and retain batches have different lengths (the joint one pads)."""
    return trainer.data_collator([trainer.pairs[0], trainer.pairs[3]])


def test_joint_batch_pads_on_the_right_and_splits_back():
    first = {"input_ids": torch.tensor([[5, 6, 7]]), "attention_mask": torch.tensor([[1, 1, 1]])}
    second = {"input_ids": torch.tensor([[8], [9]]), "attention_mask": torch.tensor([[1], [1]])}
    joint = concatenate_batches(first, second, pad_token_id=0)
    assert joint["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0], [9, 0, 0]]
    assert joint["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [1, 0, 0]]
    a, b = split_rows(joint["input_ids"].unsqueeze(-1), first, second)
    assert a.squeeze(-1).tolist() == [[5, 6, 7]] and b.squeeze(-1).tolist() == [[8], [9]]
    assert padded_token_ratio(first, second) == pytest.approx(9 / 5)


@pytest.mark.parametrize("stem", FUSED)
def test_one_forward_over_forget_and_retain_equals_two(
    stem, memorised_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    """Same loss components and gradients, to float rounding, from one forward of the policy instead of
    two (the reference passes, live here, are not counted: they run on the frozen copy)."""
    trainer = trainer_for(
        stem, memorised_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args, reference_mode="copy"
    )
    trainer.joint_padding_limit = float("inf")
    batch = uneven_batch(trainer)
    assert batch["forget"]["input_ids"].shape[1] != batch["retain"]["input_ids"].shape[1]
    results = {}
    for fused in (True, False):
        trainer.fuse_forget_retain = fused
        calls, handle = count_forwards(trainer.model)
        results[fused] = loss_and_gradients(trainer, batch)
        handle.remove()
        assert len(calls) == (1 if fused else 2)
    (joint_losses, joint_grads), (losses, grads) = results[True], results[False]
    assert joint_losses.keys() == losses.keys()
    for name in losses:
        torch.testing.assert_close(joint_losses[name], losses[name], rtol=1e-5, atol=1e-6)
    assert grads and joint_grads.keys() == grads.keys()
    for name in grads:
        torch.testing.assert_close(joint_grads[name], grads[name], rtol=1e-4, atol=1e-6)


def test_no_joint_forward_with_dropout_or_too_much_padding(
    tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    from medunlearn.models import build_tiny_llama

    model = build_tiny_llama(tiny_tokenizer)
    trainer = trainer_for("grad_diff", model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args)
    batch = uneven_batch(trainer)
    trainer.joint_padding_limit = padded_token_ratio(batch["forget"], batch["retain"])
    assert trainer.joint_forward_allowed(model, batch["forget"], batch["retain"])
    trainer.joint_padding_limit -= 1e-3
    assert not trainer.joint_forward_allowed(model, batch["forget"], batch["retain"])
    trainer.joint_padding_limit = float("inf")
    model.config.attention_dropout = 0.1
    dropout = trainer_for("grad_diff", model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args)
    dropout.joint_padding_limit = float("inf")
    assert not dropout.joint_forward_allowed(model.train(), batch["forget"], batch["retain"])
    assert dropout.joint_forward_allowed(model.eval(), batch["forget"], batch["retain"])


def logged_losses(trainer):
    trainer.train()
    return [
        {k: v for k, v in entry.items() if k.endswith("loss")}
        for entry in trainer.state.log_history
        if "loss" in entry
    ]


@pytest.mark.parametrize("stem", sorted(FROZEN))
def test_precomputed_reference_outputs_give_the_live_reference_losses(
    stem, tiny_tokenizer, memorised_state, forget_qa, retain_qa, unlearning_args
):
    """Four steps over two epochs (the pairing redrawn), shuffled, two accumulation micro-batches of
    unequal lengths: every logged loss with the stored outputs equals the live frozen copy's."""
    from medunlearn.models import build_tiny_llama

    runs = {}
    for mode in ("auto", "copy"):
        model = build_tiny_llama(tiny_tokenizer)
        model.load_state_dict(memorised_state)
        trainer = trainer_for(
            stem,
            model,
            tiny_tokenizer,
            forget_qa,
            retain_qa,
            unlearning_args,
            reference_mode=mode,
            max_steps=4,
            gradient_accumulation_steps=2,
            per_device_train_batch_size=1,
            learning_rate=1e-2,
        )
        assert (trainer.reference_source, trainer.ref_model is None) == (
            ("precomputed", True) if mode == "auto" else ("copy", False)
        )
        runs[mode] = logged_losses(trainer)
    assert len(runs["auto"]) == 4 and runs["auto"][0].keys() == runs["copy"][0].keys()
    for stored, live in zip(runs["auto"], runs["copy"]):
        assert stored == pytest.approx(live, rel=1e-4, abs=1e-5)
    assert runs["auto"][0] != runs["auto"][-1]  # the steps moved the model


def test_the_store_holds_the_answer_positions_of_the_paired_rows_only(
    tiny_tokenizer, tiny_model, forget_qa, retain_qa, unlearning_args
):
    from medunlearn.unlearn.frozen import paired_retain_rows

    trainer = trainer_for(
        "rmu", tiny_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args, max_steps=1
    )
    store = trainer.frozen["retain"]
    # One step of batch 2 lies in epoch 0: only the retain rows epoch 0 pairs with forget rows.
    assert sorted(store.rows) == sorted(set(paired_retain_rows(trainer.pairs, 1).tolist()))
    assert len(store.rows) <= len(forget_qa) < len(retain_qa)
    for row, values in store.rows.items():
        answer_tokens = sum(label != -100 for label in trainer.pairs.retain[row]["labels"])
        assert values.shape == (answer_tokens, tiny_model.config.hidden_size)
    assert store.nbytes == sum(v.numel() for v in store.rows.values()) * 4


def test_a_store_over_the_memory_limit_keeps_the_live_reference(
    tiny_tokenizer, tiny_model, forget_qa, retain_qa, unlearning_args, monkeypatch
):
    from medunlearn.unlearn import KLMinTrainer

    monkeypatch.setattr(KLMinTrainer, "frozen_memory_limit_bytes", 0)
    trainer = trainer_for("kl_min", tiny_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args)
    assert trainer.reference_source == "copy" and trainer.ref_model is not None and not trainer.frozen
    forced = trainer_for(
        "kl_min",
        tiny_model,
        tiny_tokenizer,
        forget_qa,
        retain_qa,
        unlearning_args,
        reference_mode="precomputed",
    )
    assert forced.reference_source == "precomputed" and "retain" in forced.frozen
