"""TOFU mode through the existing commands: every unlearning method on a TOFU folder, the evaluate hook, and
the reference's tag rendering."""

from __future__ import annotations

import json

import pytest

from medunlearn.tofu.conventions import ConventionTokenizer, preset
from medunlearn.tofu.data import retain_config_for
from medunlearn.tofu.synthetic import build_tofu_folder


@pytest.fixture(scope="module")
def tofu_model(tmp_path_factory):
    """A TOFU folder and a tiny checkpoint saved the way `medunlearn finetune` saves one."""
    from medunlearn.models import build_tiny_llama_for_texts
    from medunlearn.tofu.evaluate import tofu_examples

    root = tmp_path_factory.mktemp("tofu-mode")
    folder = build_tofu_folder(root / "data", authors=10, qa_per_author=2, perturbed=2, options=3)
    examples = tofu_examples(folder, "forget10")
    model, tokenizer = build_tiny_llama_for_texts(examples["question"].tolist() + examples["answer"].tolist())
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return folder, root / "model"


@pytest.mark.slow
def test_every_unlearning_method_runs_on_a_tofu_forget_config(tofu_model, tmp_path):
    from safetensors.torch import load_file

    from medunlearn.cli import main
    from medunlearn.unlearn.methods import METHODS

    folder, model_dir = tofu_model
    before = load_file(model_dir / "model.safetensors")
    for method in METHODS:
        out = tmp_path / method
        extra = ["--layer", "1"] if method == "rmu" else []  # the tiny model has two decoder layers
        code = main(
            [
                "unlearn",
                "--method",
                method,
                "--model",
                str(model_dir),
                "--data",
                str(folder),
                "--forget",
                "forget10",
                "--retain",
                retain_config_for("forget10"),
                "--out",
                str(out),
                "--max_steps",
                "1",
                "--disable_tqdm",
                "true",
                *extra,
            ]
        )
        assert code == 0, method
        after = load_file(out / "model.safetensors")
        assert any(not (before[k] == after[k]).all() for k in before), f"{method} changed no weight"


def _evaluate(model_dir, folder, out, *argv) -> int:
    from medunlearn.cli import main

    return main(
        [
            "evaluate",
            "--benchmark",
            "tofu",
            "--model",
            str(model_dir),
            "--data",
            str(folder),
            "--forget",
            "forget10",
            "--out",
            str(out),
            "--no-progress",
            *argv,
        ]
    )


def test_evaluate_benchmark_tofu_uses_the_preset_unless_max_new_tokens_is_given(tofu_model, tmp_path, capsys):
    folder, model_dir = tofu_model
    assert (
        _evaluate(
            model_dir,
            folder,
            tmp_path / "a",
            "--preset",
            "open-unlearning",
            "--max-new-tokens",
            "3",
            "--batch-size",
            "64",
        )
        == 0
    )
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert (
        summary["conventions"]["name"] == "open-unlearning" and summary["conventions"]["max_new_tokens"] == 3
    )
    capsys.readouterr()
    assert _evaluate(model_dir, folder, tmp_path / "a", "--rescore") == 0
    assert json.loads(capsys.readouterr().out.split("\nsummary:")[0]) == summary["open_unlearning"]
    with pytest.raises(SystemExit) as stopped:  # an unknown preset is refused while parsing, naming it
        _evaluate(model_dir, folder, tmp_path / "b", "--preset", "tofu-v0")
    assert stopped.value.code == 2 and "tofu-v0" in capsys.readouterr().err


def test_evaluate_benchmark_tofu_takes_the_tofu_options_and_an_explicit_default_length(tofu_model, tmp_path):
    """One command, one set of options: --system-prompt and --stop reach the conventions, and an explicit
    --max-new-tokens equal to the AMNESIA default is kept, not taken as "not set"."""
    folder, model_dir = tofu_model
    assert (
        _evaluate(
            model_dir,
            folder,
            tmp_path / "c",
            "--preset",
            "open-unlearning",
            "--max-new-tokens",
            "64",
            "--system-prompt",
            "Be brief.",
            "--stop",
            "\n\n",
            "--batch-size",
            "64",
        )
        == 0
    )
    conventions = json.loads((tmp_path / "c" / "summary.json").read_text())["conventions"]
    assert conventions["max_new_tokens"] == 64 and conventions["system_prompt"] == "Be brief."
    assert conventions["stop_strings"] == ["\n\n"]


def test_evaluate_without_max_new_tokens_leaves_the_length_to_the_preset():
    from medunlearn.cli.evaluate import build_parser

    assert build_parser().parse_args(["--out", "x"]).max_new_tokens is None


def test_llama3_preset_renders_the_reference_tags_and_ends_the_answer_with_eos(tiny_tokenizer):
    rendering = ConventionTokenizer(tiny_tokenizer, preset("open-unlearning-llama3"))
    prompt = rendering.apply_chat_template([[{"role": "user", "content": "Q?"}]], add_generation_prompt=True)[
        0
    ]
    full = rendering.apply_chat_template(
        [[{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "A."}]]
    )[0]
    system = (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "You are a helpful assistant.<|eot_id|>"
    )
    assert (
        prompt == system + "<|start_header_id|>user<|end_header_id|>\n\nQ?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert full == prompt + "A." + tiny_tokenizer.eos_token
    assert rendering.eos_token_id == tiny_tokenizer.eos_token_id  # everything else is the wrapped tokenizer


def test_chat_template_preset_adds_the_system_prompt(tiny_tokenizer):
    rendering = ConventionTokenizer(tiny_tokenizer, preset("open-unlearning"))
    prompt = rendering.apply_chat_template([{"role": "user", "content": "Q?"}], add_generation_prompt=True)
    direct = tiny_tokenizer.apply_chat_template(
        [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Q?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert prompt == direct
    with pytest.raises(ValueError, match="text only"):
        rendering.apply_chat_template([{"role": "user", "content": "Q?"}], tokenize=True)


def test_missing_model_and_data_are_named(capsys):
    from medunlearn.cli import main

    assert main(["evaluate", "--benchmark", "tofu", "--out", "x"]) == 2
    assert "--model, --data required" in capsys.readouterr().err


@pytest.mark.slow
def test_finetune_unlearn_evaluate_with_benchmark_tofu(tmp_path):
    from medunlearn.cli import main

    data = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=2, perturbed=2, options=3)
    assert (
        main(
            [
                "finetune",
                "--benchmark",
                "tofu",
                "--model",
                "tiny-llama",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "ft"),
                "--qa-epochs",
                "1",
                "--tiny-vocab-size",
                "400",
                "--disable_tqdm",
                "true",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "unlearn",
                "--benchmark",
                "tofu",
                "--method",
                "NPO",
                "--model",
                str(tmp_path / "ft"),
                "--data",
                str(data),
                "--forget",
                "forget10",
                "--out",
                str(tmp_path / "npo"),
                "--max_steps",
                "1",
                "--disable_tqdm",
                "true",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "evaluate",
                "--benchmark",
                "tofu",
                "--tofu-preset",
                "open-unlearning",
                "--model",
                str(tmp_path / "npo"),
                "--retain-model",
                str(tmp_path / "ft"),
                "--data",
                str(data),
                "--forget",
                "forget10",
                "--out",
                str(tmp_path / "eval"),
                "--max-new-tokens",
                "4",
                "--no-progress",
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert (
        summary["conventions"]["name"] == "open-unlearning"
        and summary["metrics"]["forget_quality"] is not None
    )
