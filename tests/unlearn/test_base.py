"""The shared machinery: log-prob helpers against hand computations, tokenisation, pairing, reference,
errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from medunlearn.unlearn.data import ForgetRetainDataset, sample_retain_indices, tokenize_prompt_completion
from medunlearn.unlearn.errors import (
    EmptyForgetSetError,
    MissingChatTemplateError,
    NonFiniteLossError,
    UnlearningInputError,
)
from medunlearn.unlearn.ops import (
    IGNORE_INDEX,
    completion_token_logps,
    kl_to_reference,
    masked_sequence_mean,
    sequence_logps,
    sequence_mean_nll,
)

# Batch of 2, 4 positions, vocabulary 3. Row 0: prompt token, then 2 completion tokens, then padding.
# Row 1: prompt, prompt, then 2 completion tokens (no padding).
LOGITS = torch.tensor(
    [
        [[1.0, 0.0, -1.0], [0.5, 2.0, 0.0], [0.0, 0.0, 3.0], [9.0, 9.0, 9.0]],
        [[0.2, 0.1, 0.0], [1.0, 1.0, 0.0], [-1.0, 2.0, 0.5], [0.0, 1.0, 2.0]],
    ]
)
LABELS = torch.tensor([[IGNORE_INDEX, 1, 2, IGNORE_INDEX], [IGNORE_INDEX, IGNORE_INDEX, 0, 1]])


def log_softmax(row: list[float], index: int) -> float:
    return row[index] - math.log(sum(math.exp(v) for v in row))


def hand_token_logps() -> list[list[float]]:
    """Per row, log p of each completion label, computed with scalars: logits at t predict labels at t+1."""
    out = []
    for b in range(2):
        row = []
        for t in range(3):
            label = int(LABELS[b, t + 1])
            if label != IGNORE_INDEX:
                row.append(log_softmax(LOGITS[b, t].tolist(), label))
        out.append(row)
    return out


def test_completion_token_logps_match_hand_computation():
    logps, mask = completion_token_logps(LOGITS, LABELS)
    expected = hand_token_logps()
    assert mask.tolist() == [[True, True, False], [False, True, True]]
    assert logps[mask].tolist() == pytest.approx([v for row in expected for v in row], abs=1e-5)
    assert logps[~mask].abs().sum() == 0


def test_sequence_logps_and_mean_nll_ignore_prompt_and_padding():
    expected = hand_token_logps()
    assert sequence_logps(LOGITS, LABELS).tolist() == pytest.approx([sum(r) for r in expected], abs=1e-5)
    assert sequence_mean_nll(LOGITS, LABELS).tolist() == pytest.approx(
        [-sum(r) / len(r) for r in expected], abs=1e-5
    )
    # Changing logits at a padding position or at the last position (which predicts nothing) changes nothing.
    changed = LOGITS.clone()
    changed[0, 3] = torch.tensor([-5.0, 4.0, 0.0])
    changed[1, 3] = torch.tensor([7.0, -7.0, 0.0])
    assert torch.equal(sequence_logps(changed, LABELS), sequence_logps(LOGITS, LABELS))


def test_kl_to_reference_is_a_masked_mean_of_token_kls():
    reference = torch.tensor(
        [
            [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [5.0, 5.0, 0.0]],
            [[3.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.5], [1.0, 1.0, 1.0]],
        ]
    )

    def token_kl(p_logits, q_logits):
        p = [math.exp(log_softmax(p_logits, v)) for v in range(3)]
        return sum(p[v] * (log_softmax(p_logits, v) - log_softmax(q_logits, v)) for v in range(3))

    expected = []
    for b in range(2):
        kls = [
            token_kl(reference[b, t].tolist(), LOGITS[b, t].tolist())
            for t in range(3)
            if LABELS[b, t + 1] != -100
        ]
        expected.append(sum(kls) / len(kls))
    assert kl_to_reference(LOGITS, reference, LABELS).tolist() == pytest.approx(expected, abs=1e-5)
    assert kl_to_reference(LOGITS, LOGITS, LABELS).abs().max() < 1e-6


def test_masked_sequence_mean_broadcasts_over_hidden_size():
    values = torch.arange(12, dtype=torch.float32).reshape(2, 3, 2)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    # Row 0: positions 0 and 2, values (0,1) and (4,5) -> mean 2.5; row 1 has no position -> 0.
    assert masked_sequence_mean(values, mask).tolist() == [2.5, 0.0]


def test_tokenisation_labels_only_the_completion(tiny_tokenizer):
    encoded = tokenize_prompt_completion(
        ["Which artery?", "Dose?"], ["The right one.", "2 mg."], tiny_tokenizer, 512
    )
    for ids, labels, answer in zip(encoded["input_ids"], encoded["labels"], ["The right one.", "2 mg."]):
        assert len(ids) == len(labels)
        completion = [i for i, label in zip(ids, labels) if label != IGNORE_INDEX]
        assert [label for label in labels if label != IGNORE_INDEX] == completion
        assert tiny_tokenizer.decode(completion).startswith(answer + "<|im_end|>")
        prompt = tiny_tokenizer.decode([i for i, label in zip(ids, labels) if label == IGNORE_INDEX])
        assert prompt.endswith("<|im_start|>assistant\n")
    short = tokenize_prompt_completion(["Which artery?"], ["The right one."], tiny_tokenizer, 5)
    assert len(short["input_ids"][0]) == 5 == len(short["labels"][0])


def test_missing_chat_template_is_a_clear_error(tiny_tokenizer):
    import copy

    bare = copy.deepcopy(tiny_tokenizer)
    bare.chat_template = None
    with pytest.raises(MissingChatTemplateError, match="chat template"):
        tokenize_prompt_completion(["q"], ["a"], bare, 16)


def test_same_disease_sampling_pairs_within_disease_and_falls_back():
    rng = np.random.default_rng(0)
    forget = np.array(["cancer", "cardio", "cancer", "rare"] * 50)
    retain = np.array(["cardio", "cancer", "infection", "cancer", "cardio"])
    pairing = sample_retain_indices(forget, retain, len(retain), "same_disease", rng)
    matched = forget != "rare"
    assert (retain[pairing[matched]] == forget[matched]).all()
    # Both cancer retain rows (1 and 3) are used: sampling is uniform within the disease, not "first match".
    assert set(pairing[forget == "cancer"]) == {1, 3}
    assert ((pairing[~matched] >= 0) & (pairing[~matched] < len(retain))).all()


def test_pairing_is_deterministic_and_redrawn_per_epoch(forget_qa, retain_qa):
    a = ForgetRetainDataset(forget_qa, retain_qa, strategy="random", seed=3)
    b = ForgetRetainDataset(forget_qa, retain_qa, strategy="random", seed=3)
    assert a.pairing.tolist() == b.pairing.tolist()
    first = a.pairing.copy()
    draws = []
    for epoch in range(1, 6):
        a.set_epoch(epoch)
        draws.append(a.pairing.tolist())
    assert any(d != first.tolist() for d in draws)
    item = a[1]
    assert item["forget"]["question"] == forget_qa[1]["question"]
    assert item["retain"]["question"] == retain_qa[int(a.pairing[1])]["question"]


def test_empty_forget_set_is_a_clear_error(tiny_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args):
    from medunlearn.unlearn import GradDiffConfig, GradDiffTrainer

    with pytest.raises(EmptyForgetSetError, match="no rows"):
        GradDiffTrainer(
            tiny_model,
            unlearning_args(GradDiffConfig),
            forget_qa.select([]),
            retain_qa,
            processing_class=tiny_tokenizer,
        )


def test_nan_loss_stops_with_a_clear_error_and_keeps_checkpoints(
    tiny_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args, tmp_path
):
    from medunlearn.unlearn import GradDiffConfig, GradDiffTrainer

    class NaNAtStep3(GradDiffTrainer):
        def unlearning_loss(self, model, forget, retain):
            losses = super().unlearning_loss(model, forget, retain)
            if self.state.global_step == 2:
                losses["loss"] = losses["loss"] * float("nan")
            return losses

    args = unlearning_args(GradDiffConfig, max_steps=4, save_strategy="steps", save_steps=1)
    trainer = NaNAtStep3(tiny_model, args, forget_qa, retain_qa, processing_class=tiny_tokenizer)
    with pytest.raises(NonFiniteLossError, match="step 2.*kept"):
        trainer.train()
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert (out / "checkpoint-2" / "model.safetensors").is_file()


def test_gradient_accumulation_gives_the_same_loss_as_a_big_batch(
    tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    """Sequence-weighted reduction: 1×4 and 2×2 (accumulated) see the same loss and end in the same
    weights."""
    from medunlearn.models import build_tiny_llama
    from medunlearn.unlearn import GradDiffConfig, GradDiffTrainer

    results = []
    for batch, accumulation in [(4, 1), (2, 2)]:
        model = build_tiny_llama(tiny_tokenizer)
        args = unlearning_args(
            GradDiffConfig,
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=accumulation,
            max_steps=1,
        )
        trainer = GradDiffTrainer(model, args, forget_qa, retain_qa, processing_class=tiny_tokenizer)
        trainer.train()
        results.append(
            (trainer.state.log_history[0]["loss"], model.model.layers[0].mlp.down_proj.weight.detach())
        )
    assert results[0][0] == pytest.approx(results[1][0], abs=1e-5)
    torch.testing.assert_close(results[0][1], results[1][1], atol=1e-6, rtol=1e-5)


def test_peft_reference_is_exactly_the_base_model(
    tiny_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    from peft import LoraConfig

    from medunlearn.unlearn import KLMinConfig, KLMinTrainer

    batch = tiny_tokenizer(["Which artery was occluded?"], return_tensors="pt")
    with torch.no_grad():
        base_logits = tiny_model(**batch).logits.clone()
    peft_config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    trainer = KLMinTrainer(
        tiny_model,
        unlearning_args(KLMinConfig, reference_mode="adapter"),
        forget_qa,
        retain_qa,
        processing_class=tiny_tokenizer,
        peft_config=peft_config,
    )
    assert trainer.reference_source == "adapter" and trainer.ref_model is None
    trainer.train()  # moves the adapter away from its zero initialisation
    inputs = {**batch, "labels": batch["input_ids"]}
    with torch.no_grad():
        adapted = trainer.model(**batch).logits
    assert not torch.allclose(adapted, base_logits)
    assert torch.equal(trainer.reference_logits(trainer.model, inputs), base_logits)


def test_methods_without_a_reference_never_build_one(
    tiny_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    from medunlearn.unlearn import NPOConfig, NPOTrainer, SimNPOConfig, SimNPOTrainer

    simnpo = SimNPOTrainer(
        tiny_model, unlearning_args(SimNPOConfig), forget_qa, retain_qa, processing_class=tiny_tokenizer
    )
    assert simnpo.reference_source == "none" and simnpo.ref_model is None
    npo = NPOTrainer(
        tiny_model, unlearning_args(NPOConfig), forget_qa, retain_qa, processing_class=tiny_tokenizer
    )
    assert npo.reference_source == "precomputed" and npo.ref_model is None
    assert "reference_logps" in npo.pairs.forget.column_names


def test_same_disease_pairs_share_the_disease_in_every_epoch(forget_qa, retain_qa):
    pairs = ForgetRetainDataset(forget_qa, retain_qa, strategy="same_disease", seed=0)
    for epoch in range(3):
        pairs.set_epoch(epoch)
        for i in range(len(pairs)):
            item = pairs[i]
            assert item["retain"]["disease"] == item["forget"]["disease"]


@pytest.mark.parametrize("strategy", ["random", "same_disease"])
def test_pairing_invariants_hold_for_any_cohort(strategy):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    diseases = st.sampled_from(["cancer", "cardio", "infection", "renal"])

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(diseases, min_size=1, max_size=30),
        st.lists(diseases, min_size=1, max_size=30),
        st.integers(0, 99),
    )
    def check(forget, retain, seed):
        forget, retain = np.array(forget), np.array(retain)
        pairing = sample_retain_indices(forget, retain, len(retain), strategy, np.random.default_rng(seed))
        assert pairing.shape == forget.shape and ((0 <= pairing) & (pairing < len(retain))).all()
        again = sample_retain_indices(forget, retain, len(retain), strategy, np.random.default_rng(seed))
        assert (pairing == again).all()  # deterministic given the seed: every process draws the same pairs
        if strategy == "same_disease":
            has_match = np.isin(forget, retain)
            assert (retain[pairing[has_match]] == forget[has_match]).all()

    check()


def test_template_whose_prompt_is_not_a_prefix_is_a_clear_error(tiny_tokenizer):
    import copy

    odd = copy.deepcopy(tiny_tokenizer)
    # Generation prompt says "bot" but the assistant turn says "assistant": the answer cannot be located.
    odd.chat_template = (
        "{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ 'bot: ' }}{% endif %}"
    )
    with pytest.raises(UnlearningInputError, match="row 0"):
        tokenize_prompt_completion(["Which artery?"], ["The right one."], odd, 64)


def test_the_compatibility_module_base_re_exports_the_split_modules():
    """``medunlearn.unlearn.base`` was split by job; old imports from it keep working, with the same
    objects."""
    from medunlearn.unlearn import base, config, data, ops, trainer
    from medunlearn.utils import distributed

    assert base.UnlearningConfig is config.UnlearningConfig
    assert base.UnlearningTrainer is trainer.UnlearningTrainer
    assert base.ForgetRetainCollator is data.ForgetRetainCollator and base.nll_loss is ops.nll_loss
    assert base.leave_process_group is distributed.leave_process_group
    assert all(hasattr(base, name) for name in base.__all__)
