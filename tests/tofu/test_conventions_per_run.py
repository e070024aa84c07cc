"""One set of conventions per run: fine-tuning, unlearning and evaluation render a TOFU example the same way.

The defect this guards against: ``finetune`` and ``unlearn --benchmark tofu`` rendered prompts without the
system prompt the ``open-unlearning`` preset uses at evaluation, so a model fine-tuned with it started
unlearning from a retain NLL far above its fine-tuning loss.
"""

from __future__ import annotations

import json
import warnings

import pytest

from medunlearn.chat import (
    CONVENTIONS_FILE,
    PRESETS,
    ConventionsMismatchWarning,
    read_model_conventions,
    warn_if_conventions_differ,
    write_model_conventions,
)
from medunlearn.tofu.synthetic import build_tofu_folder

SYSTEM_PROMPT = PRESETS["open-unlearning"].system_prompt


def _prompt_and_full(input_ids, labels):
    first = next(i for i, label in enumerate(labels) if label != -100)
    return tuple(input_ids[:first]), tuple(input_ids)


def _sft_rows(trainer):
    rows = trainer.train_dataset
    if "labels" in rows.column_names:
        return [_prompt_and_full(i, lab) for i, lab in zip(rows["input_ids"], rows["labels"])]
    return [
        _prompt_and_full(ids, [-100 if bit == 0 else t for t, bit in zip(ids, mask)])
        for ids, mask in zip(rows["input_ids"], rows["completion_mask"])
    ]


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    """A tiny model fine-tuned on a TOFU folder with the ``open-unlearning`` preset, and the SFT trainer."""
    import trl

    from medunlearn.models import ModelArguments
    from medunlearn.unlearn.run import FinetuneArguments, default_sft_config, run_finetune

    root = tmp_path_factory.mktemp("conventions")
    data = build_tofu_folder(root / "tofu", authors=10, qa_per_author=2, perturbed=2, options=3)
    recorded = []

    class RecordingSFTTrainer(trl.SFTTrainer):
        def train(self, *args, **kwargs):
            recorded.append(self)
            return super().train(*args, **kwargs)

    model_args = ModelArguments("tiny-llama", tiny_vocab_size=400)
    sft = default_sft_config(
        model_args,
        root / "ft",
        [
            "--per_device_train_batch_size",
            "4",
            "--learning_rate",
            "5e-3",
            "--logging_steps",
            "1",
            "--disable_tqdm",
            "true",
        ],
    )
    original = trl.SFTTrainer
    trl.SFTTrainer = RecordingSFTTrainer
    try:
        out = run_finetune(
            FinetuneArguments(
                str(data), str(root / "ft"), 0, 25, benchmark="tofu", conventions="open-unlearning"
            ),
            model_args,
            sft,
        )
    finally:
        trl.SFTTrainer = original
    return data, out, recorded[-1]


def _unlearn(data, model, out, conventions, monkeypatch):
    from medunlearn.models import ModelArguments
    from medunlearn.unlearn.grad_diff import GradDiffTrainer
    from medunlearn.unlearn.run import UnlearningDataArguments, make_method_config, run_unlearning

    recorded = []
    original_train = GradDiffTrainer.train

    def recording_train(self, *args, **kwargs):
        recorded.append(self)
        return original_train(self, *args, **kwargs)

    monkeypatch.setattr(GradDiffTrainer, "train", recording_train)
    config = make_method_config(
        "grad_diff",
        out,
        conventions=conventions,
        max_steps=1,
        logging_steps=1,
        learning_rate=1e-6,
        per_device_train_batch_size=2,
        disable_tqdm=True,
        report_to="none",
    )
    run_unlearning(
        config,
        ModelArguments(str(model)),
        UnlearningDataArguments(str(data), "forget10", benchmark="tofu", conventions=conventions),
    )
    return recorded[-1]


@pytest.mark.slow
def test_finetune_and_unlearn_with_one_preset_see_the_same_prompt_tokens(finetuned, tmp_path, monkeypatch):
    data, model, sft_trainer = finetuned
    trainer = _unlearn(data, model, tmp_path / "gd", "open-unlearning", monkeypatch)
    tokenizer = trainer.processing_class

    sft_rows = _sft_rows(sft_trainer)
    sft_prompts = {prompt for prompt, _ in sft_rows}
    sft_sequences = {full for _, full in sft_rows}
    for part in (trainer.pairs.forget, trainer.pairs.retain):
        rows = [_prompt_and_full(i, lab) for i, lab in zip(part["input_ids"], part["labels"])]
        assert rows
        for prompt, full in rows:
            assert prompt in sft_prompts  # the very tokens the model was fine-tuned on
            assert full in sft_sequences
            assert SYSTEM_PROMPT in tokenizer.decode(list(prompt))

    # Both folders record the conventions; the unlearned model's card names them.
    assert read_model_conventions(model) == PRESETS["open-unlearning"]
    assert read_model_conventions(tmp_path / "gd") == PRESETS["open-unlearning"]
    card = (tmp_path / "gd" / "README.md").read_text()
    assert "## Conventions" in card and "--preset open-unlearning" in card
    assert json.loads((tmp_path / "gd" / CONVENTIONS_FILE).read_text())["system_prompt"] == SYSTEM_PROMPT
    # The open-unlearning preset selected GradDiff's reference averaging: one token mean.
    assert trainer.args.loss_averaging == "token"


@pytest.mark.slow
def test_the_first_retain_nll_is_at_the_fine_tuning_loss_scale(finetuned, tmp_path, monkeypatch):
    data, model, sft_trainer = finetuned
    logged = [entry["loss"] for entry in sft_trainer.state.log_history if "loss" in entry]
    finetuning_loss = sum(logged[-5:]) / 5  # the last epoch (5 steps of 4 of the 20 QA rows)
    trainer = _unlearn(data, model, tmp_path / "same", "open-unlearning", monkeypatch)
    first = next(e for e in trainer.state.log_history if "retain_loss" in e)
    # Both are token means of the answer NLL (TRL's SFT loss; GradDiff's reference averaging).
    assert first["retain_loss"] == pytest.approx(finetuning_loss, rel=0.5), (finetuning_loss, first)

    # Unlearning with other conventions than the model was fine-tuned with is named, not silent.
    with pytest.warns(ConventionsMismatchWarning, match="trained with the 'open-unlearning' conventions"):
        _unlearn(data, model, tmp_path / "other", "medunlearn", monkeypatch)


def test_the_recorded_conventions_are_read_back_and_a_mismatch_warns(tmp_path):
    write_model_conventions(tmp_path, PRESETS["open-unlearning"])
    assert read_model_conventions(tmp_path) == PRESETS["open-unlearning"]
    assert read_model_conventions(tmp_path / "elsewhere") is None
    assert read_model_conventions("tiny-llama") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # Same rendering (another generation length, another scoring): no warning.
        same_rendering = PRESETS["open-unlearning"].with_options(name="mine", max_new_tokens=8)
        assert warn_if_conventions_differ(tmp_path, same_rendering) is None
    with pytest.warns(
        ConventionsMismatchWarning, match="system_prompt: 'You are a helpful assistant.' vs None"
    ):
        message = warn_if_conventions_differ(tmp_path, PRESETS["medunlearn"])
    assert "--preset open-unlearning" in message


def test_training_tokens_render_the_preset_exactly_as_evaluation_does(tiny_tokenizer):
    from medunlearn.evaluation.runner import encode_examples
    from medunlearn.tofu.conventions import ConventionTokenizer
    from medunlearn.unlearn.data import tokenize_prompt_completion

    questions, answers = ["Who wrote the book?", "Where was she born?"], ["Jane Roe.", "In Lisbon."]
    for name, conventions in PRESETS.items():
        trained = tokenize_prompt_completion(questions, answers, tiny_tokenizer, 512, conventions)
        scored = encode_examples(ConventionTokenizer(tiny_tokenizer, conventions), questions, answers)
        for row in range(len(questions)):
            assert trained["input_ids"][row] == scored.full_ids[row], name
            first = next(i for i, label in enumerate(trained["labels"][row]) if label != -100)
            assert trained["input_ids"][row][:first] == scored.prompt_ids[row], name
        if conventions.system_prompt:
            assert conventions.system_prompt in tiny_tokenizer.decode(trained["input_ids"][0]), name


def test_the_reference_presets_generate_200_tokens_and_the_reference_names_are_complete():
    from medunlearn.tofu.scoring import REFERENCE_NAMES

    # OpenUnlearning d3d7cf9, configs/generation/default.yaml: max_new_tokens: 200.
    assert PRESETS["open-unlearning"].max_new_tokens == 200
    assert PRESETS["open-unlearning-llama3"].max_new_tokens == 200
    assert PRESETS["medunlearn"].max_new_tokens == 64
    assert REFERENCE_NAMES["ra_Q_A_PERT_Prob"] == "real_authors_perturbed_prob"
    assert REFERENCE_NAMES["wf_Q_A_PERT_Prob"] == "world_facts_perturbed_prob"


def test_finetune_and_unlearn_take_the_preset_and_system_prompt_options():
    from medunlearn.cli.finetune import build_parser as finetune_parser
    from medunlearn.cli.options import conventions_from_args
    from medunlearn.cli.unlearn import build_parser as unlearn_parser

    args = finetune_parser().parse_args(
        ["--model", "tiny-llama", "--data", "d", "--out", "o", "--preset", "open-unlearning"]
    )
    assert conventions_from_args(args) == PRESETS["open-unlearning"]
    args = unlearn_parser().parse_args(["--preset", "medunlearn", "--system-prompt", "Be brief."])
    assert conventions_from_args(args).system_prompt == "Be brief."
    assert "200 new tokens" in unlearn_parser().format_help().replace("\n", " ").replace("  ", " ")
