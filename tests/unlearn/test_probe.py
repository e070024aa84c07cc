"""Evaluation during unlearning: the rule on planted probe sequences, probe metrics in the log history every N
steps on the tiny model, and the rule and the step kept in the model card."""

from __future__ import annotations

import json
import math

import pytest

from medunlearn.unlearn.probe import RULE, select_probe_step


def history(*records):
    return [{"step": step, "probe_afe": afe, "probe_retain_mu": mu} for step, afe, mu in records]


def test_the_rule_keeps_the_highest_afe_within_the_retain_mu_bound():
    planted = history((0, 0.0, 0.80), (2, 0.30, 0.80), (4, 0.55, 0.76), (6, 0.90, 0.70), (8, 0.95, 0.50))
    choice = select_probe_step(planted, max_retain_mu_drop=0.05)
    assert (choice.step, choice.probe_afe, choice.rule_met) == (4, 0.55, True)
    assert choice.probe_retain_mu_drop == pytest.approx(0.04)
    assert select_probe_step(planted, max_retain_mu_drop=0.10).step == 6  # drop 0.10: on the bound counts
    assert select_probe_step(planted, max_retain_mu_drop=1.0).step == 8


def test_ties_keep_the_earliest_step_and_nan_afe_is_never_kept():
    planted = history((0, 0.0, 0.5), (3, 0.6, 0.5), (6, 0.6, 0.52), (9, math.nan, 0.5))
    assert select_probe_step(planted, 0.05).step == 3
    assert select_probe_step(history((0, 0.0, 0.5), (3, math.nan, 0.5)), 0.05).rule_met is False


def test_no_step_within_the_bound_keeps_none_and_step_0_is_never_kept():
    planted = history((0, 0.0, 0.9), (5, 0.8, 0.5), (10, 0.9, 0.4))
    choice = select_probe_step(planted, 0.05)
    assert (choice.step, choice.rule_met) == (None, False)
    with pytest.raises(ValueError, match="start with step 0"):
        select_probe_step(planted[1:], 0.05)


def test_probe_metrics_are_logged_every_n_steps(
    tiny_model, tiny_tokenizer, forget_qa, retain_qa, unlearning_args
):
    from medunlearn.unlearn.grad_diff import GradDiffConfig, GradDiffTrainer

    config = unlearning_args(
        GradDiffConfig, max_steps=5, eval_probe_steps=2, probe_patients=2, probe_max_new_tokens=4
    )
    trainer = GradDiffTrainer(tiny_model, config, forget_qa, retain_qa, processing_class=tiny_tokenizer)
    trainer.train()
    probed = [entry for entry in trainer.state.log_history if "probe_afe" in entry]
    assert [entry["step"] for entry in probed] == [0, 2, 4, 5]  # every 2 steps and the last
    assert all({"probe_retain_mu", "probe_retain_mu_drop"} <= set(entry) for entry in probed)
    assert probed[0]["probe_afe"] == 0.0 and probed[0]["probe_retain_mu_drop"] == 0.0
    record = trainer.probe_callback.record()
    assert record["probe"] == {
        "forget_patients": 2,
        "forget_questions": 4,
        "retain_patients": 2,
        "retain_questions": 4,
    }
    assert record["rule"] == RULE and [h["step"] for h in record["history"]] == [0, 2, 4, 5]


@pytest.fixture(scope="module")
def amnesia_and_model(tmp_path_factory):
    from medunlearn.amnesia import build_amnesia_folder
    from medunlearn.cli import main

    data = build_amnesia_folder(tmp_path_factory.mktemp("amnesia") / "data", patients=20, seed=0)
    model = tmp_path_factory.mktemp("ft") / "model"
    command = ["finetune", "--model", "tiny-llama", "--data", str(data), "--out", str(model)]
    command += [
        "--notes-epochs",
        "0",
        "--qa-epochs",
        "1",
        "--tiny-vocab-size",
        "600",
        "--disable_tqdm",
        "true",
    ]
    assert main(command) == 0
    return data, model


def test_the_card_names_the_rule_and_the_step_kept(amnesia_and_model, tmp_path):
    from medunlearn.cli import main

    data, model = amnesia_and_model
    out = tmp_path / "unlearned"
    command = ["unlearn", "--method", "grad_diff", "--model", str(model), "--data", str(data)]
    command += ["--forget", "forget_10", "--out", str(out), "--max_steps", "4", "--disable_tqdm", "true"]
    command += ["--eval-probe-steps", "2", "--max-retain-mu-drop", "1.0", "--probe_max_new_tokens", "4"]
    assert main(command) == 0
    probe = json.loads((out / "probe.json").read_text())
    assert [h["step"] for h in probe["history"]] == [0, 2, 4]
    expected = select_probe_step(probe["history"], 1.0)
    card = (out / "README.md").read_text()
    assert "## Evaluation during unlearning" in card and RULE in card
    assert "max_retain_mu_drop = 1.0" in card
    if expected.rule_met:  # AFE is NaN when the tiny model answered nothing right at step 0
        assert probe["choice"]["step"] == expected.step
        assert f"**step {expected.step}**" in card
        assert (out / "best" / "model.safetensors").is_file()
        assert not (out / "best" / "training_args.bin").exists()
    else:
        assert "no probed step stayed within the bound" in card and not (out / "best").exists()
