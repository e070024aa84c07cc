"""``--preset open-unlearning`` selects the reference's training recipe (OpenUnlearning d3d7cf9), per
benchmark; our preset keeps our defaults; PDU's flattening term at the reference's positions equals its code
and a hand computation."""

from __future__ import annotations

import pytest
import torch

from medunlearn.unlearn.reference_recipe import METHOD_ARGS, TRAINING, ReferenceRecipeError
from medunlearn.unlearn.run import make_method_config

# The values read at d3d7cf9, written out here independently of the table in reference_recipe.py.
TOFU = {  # configs/trainer/finetune.yaml:3,5,24; configs/experiment/unlearn/tofu/default.yaml:44-47
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 4,
    "learning_rate": 1e-5,
    "weight_decay": 0.01,
    "num_train_epochs": 10.0,
    "warmup_epochs": 1.0,
    "seed": 0,
}
MUSE = {  # configs/experiment/unlearn/muse/default.yaml:44-48; finetune.yaml:18,24; MUSE_forget.yaml:2,9
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 8,
    "learning_rate": 1e-5,
    "weight_decay": 0.0,
    "num_train_epochs": 10.0,
    "seed": 0,
    "data_format": "text",
    "max_length": 2048,
    "text_chunking": "stream",
}


def resolved(config, names):
    values = {name: getattr(config, name) for name in names}
    if "lr_scheduler_type" in names:
        values["lr_scheduler_type"] = str(
            getattr(config.lr_scheduler_type, "value", config.lr_scheduler_type)
        )
    return values


@pytest.mark.parametrize("benchmark", ["tofu", "amnesia"])
def test_the_preset_selects_the_tofu_experiment_recipe(benchmark, tmp_path):
    config = make_method_config("grad_diff", tmp_path, "open-unlearning", benchmark, use_cpu=True)
    assert resolved(config, TOFU) == TOFU
    assert config.data_format == "qa" and config.lr_scheduler_type == "linear"


def test_the_preset_selects_the_muse_experiment_recipe(tmp_path):
    config = make_method_config("npo", tmp_path, "open-unlearning", "muse", use_cpu=True)
    assert resolved(config, MUSE) == MUSE
    assert str(getattr(config.lr_scheduler_type, "value", config.lr_scheduler_type)) == "constant"
    assert config.warmup_epochs is None  # the MUSE experiment sets no warm-up


def test_the_preset_selects_the_reference_rmu_and_pdu_arguments(tmp_path):
    rmu = make_method_config("rmu", tmp_path, "open-unlearning", "tofu", use_cpu=True)
    assert (rmu.steering_coeff, rmu.trainable_params_regex) == (2.0, [".*"])  # RMU.yaml:8, :12-13
    assert (rmu.forget_weight, rmu.retain_weight, rmu.layer) == (1.0, 1.0, None)  # :7, :10; layer 7 as ours
    pdu = make_method_config("pdu", tmp_path, "open-unlearning", "tofu", use_cpu=True, retain_loss_eps=0.3)
    assert (pdu.retain_weight, pdu.dual_step_size, pdu.dual_warmup_epochs) == (1.0, 1.0, 5.0)  # PDU.yaml:8-12
    assert (pdu.forget_weight, pdu.primal_dual, pdu.forget_positions) == (1.0, True, "labelled")
    assert pdu.loss_averaging == "token"


def test_pdu_under_the_preset_requires_retain_loss_eps_as_the_reference_does(tmp_path):
    with pytest.raises(ReferenceRecipeError, match=r"--retain_loss_eps.*configs/trainer/PDU.yaml:6"):
        make_method_config("pdu", tmp_path, "open-unlearning", "tofu", use_cpu=True)
    assert make_method_config("pdu", tmp_path, use_cpu=True).retain_loss_eps is None  # ours derives it


def test_our_preset_keeps_our_defaults_and_a_given_field_wins_over_the_reference(tmp_path):
    ours = make_method_config("rmu", tmp_path, "medunlearn", "tofu", use_cpu=True)
    assert (ours.per_device_train_batch_size, ours.gradient_accumulation_steps, ours.num_train_epochs) == (
        4,
        1,
        5,
    )
    assert (ours.weight_decay, ours.steering_coeff, ours.trainable_params_regex) == (0.01, 20.0, None)
    pdu = make_method_config("pdu", tmp_path, "medunlearn", use_cpu=True)
    assert (pdu.retain_weight, pdu.dual_step_size, pdu.forget_positions) == (100.0, 5.0, "predicting")
    given = make_method_config(
        "grad_diff", tmp_path, "open-unlearning", "tofu", use_cpu=True, num_train_epochs=2
    )
    assert (given.num_train_epochs, given.per_device_train_batch_size) == (2, 8)


def test_every_cited_value_names_a_file_and_line_at_the_commit():
    for table in [*TRAINING.values(), *METHOD_ARGS.values()]:
        for cited in table.values():
            assert cited.citation().startswith("open-unlearning@d3d7cf9 ")
            path, _, lines = cited.source.rpartition(":")
            assert path.endswith((".yaml", ".py")) and lines.replace("-", "").isdigit(), cited.source


def test_warmup_epochs_gives_the_reference_warmup_steps(
    tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    from medunlearn.models import build_tiny_llama
    from medunlearn.unlearn.grad_diff import GradDiffConfig, GradDiffTrainer

    # int(warmup_epochs · rows // (batch · accumulation · processes)) = int(1.5 · 4 // (1 · 2 · 1)) = 3
    config = unlearning_args(
        GradDiffConfig, warmup_epochs=1.5, per_device_train_batch_size=1, gradient_accumulation_steps=2
    )
    GradDiffTrainer(
        build_tiny_llama(tiny_tokenizer), config, forget_qa, retain_qa, processing_class=tiny_tokenizer
    )
    assert len(forget_qa) == 4 and config.warmup_steps == 3


# ---- PDU: the reference's positions ----------------------------------------------------------------------


def reference_pdu_forget_loss(logits, labels):
    """OpenUnlearning d3d7cf9 src/trainer/unlearn/pdu.py:115-122, transcribed."""
    logits = logits.reshape(-1, logits.size(-1))
    forget_loss = (logits.max(dim=-1)[0] - logits.mean(dim=-1)) ** 2
    mask = (labels != -100).reshape(-1)
    return (forget_loss * mask).sum() / mask.sum()


def test_pdu_labelled_positions_equal_the_reference_code_and_a_hand_computation():
    from medunlearn.unlearn.pdu import logit_margin_flattening_loss

    # Margins (max − mean) per position: row 0: 1, 2, 0, 3; row 1: 0, 6, 1, 4.
    logits = torch.tensor(
        [
            [[1.0, 2.0, 3.0], [0.0, 0.0, 3.0], [2.0, 2.0, 2.0], [4.0, 0.0, -1.0]],
            [[5.0, 5.0, 5.0], [3.0, -3.0, 9.0], [0.0, 1.0, 2.0], [6.0, 0.0, 0.0]],
        ]
    )
    labels = torch.tensor([[-100, 7, 7, -100], [-100, -100, 7, 7]])
    # The reference: positions whose own label is kept: row 0 → 1, 2 (m 2, 0); row 1 → 2, 3 (m 1, 4).
    by_hand = (2**2 + 0**2 + 1**2 + 4**2) / 4
    got = logit_margin_flattening_loss(logits, labels, "token", positions="labelled")
    assert got.item() == pytest.approx(by_hand, abs=1e-6)
    assert got.item() == pytest.approx(reference_pdu_forget_loss(logits, labels).item(), abs=1e-6)
    # Ours: the positions predicting the kept labels: row 0 → 0, 1 (m 1, 2); row 1 → 1, 2 (m 6, 1).
    ours = logit_margin_flattening_loss(logits, labels, "token")
    assert ours.item() == pytest.approx((1 + 4 + 36 + 1) / 4, abs=1e-6)


def test_pdu_counts_the_unshifted_forget_tokens_for_the_step_mean(
    tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    from medunlearn.models import build_tiny_llama
    from medunlearn.unlearn.pdu import PDUConfig, PDUTrainer

    # A first-position label counts unshifted but is never predicted: 4 tokens unshifted, 3 shifted.
    batch = {"labels": torch.tensor([[7, 7, -100, -100], [-100, -100, 7, 7]])}
    for positions, count in (("labelled", 4), ("predicting", 3)):
        config = unlearning_args(PDUConfig, forget_positions=positions)
        trainer = PDUTrainer(
            build_tiny_llama(tiny_tokenizer), config, forget_qa, retain_qa, processing_class=tiny_tokenizer
        )
        assert int(trainer.count_loss_tokens("forget", batch)) == count
        assert int(trainer.count_loss_tokens("retain", batch)) == 3
