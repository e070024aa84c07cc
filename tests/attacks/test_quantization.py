"""The quantization attack on CPU: 8-bit and 4-bit NF4 loads through bitsandbytes keep the shapes and change
the numbers; the evaluation runs on the quantized model (docs/attacks.md, "Quantization")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("bitsandbytes")

from medunlearn.attacks.quantization import (  # noqa: E402
    full_precision_folder,
    load_quantized,
    quantization_attack,
    quantization_config,
)
from medunlearn.errors import InputError  # noqa: E402
from medunlearn.evaluation.pipeline import evaluate_on_examples  # noqa: E402
from medunlearn.evaluation.runner import RunnerConfig  # noqa: E402

RUNNER = RunnerConfig(max_new_tokens=6, progress=False)


def examples() -> pd.DataFrame:
    questions = ["What was the troponin level?", "Which artery was occluded?", "What was placed?"]
    answers = ["The troponin I level was 2.4 ng/mL.", "The right coronary artery.", "A stent."]
    return pd.DataFrame(
        {
            "example_id": [f"forget_seen/q{i}" for i in range(3)],
            "population": "forget_seen",
            "qa_id": [f"q{i}" for i in range(3)],
            "patient_id": ["p0", "p0", "p1"],
            "disease": "cardiovascular",
            "qa_type": ["factual", "reasoning", "factual"],
            "question": questions,
            "answer": answers,
            "disease_keywords": [[] for _ in range(3)],
        }
    )


@pytest.fixture()
def saved_model(tiny_model, tiny_tokenizer, tmp_path, one_torch_thread):
    """The tiny Llama with larger random weights (a fresh one is near-uniform, so rounding would hide)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in tiny_model.parameters():
            if parameter.dim() > 1:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    folder = tmp_path / "model"
    tiny_model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def _logits(model, tokenizer):
    import torch

    batch = tokenizer(
        ["What was the troponin level? The troponin I level was 2.4 ng/mL."], return_tensors="pt"
    )
    with torch.no_grad():
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()


@pytest.mark.parametrize(("scheme", "layer_class"), [("8bit", "Linear8bitLt"), ("nf4", "Linear4bit")])
def test_quantized_load_keeps_shapes_and_changes_logits(saved_model, scheme, layer_class):
    from medunlearn.models import load_model_and_tokenizer

    full, tokenizer = load_model_and_tokenizer(str(saved_model))
    quantized, _ = load_quantized(saved_model, scheme)
    assert any(type(m).__name__ == layer_class for m in quantized.modules())
    reference, rounded = _logits(full, tokenizer), _logits(quantized, tokenizer)
    assert rounded.shape == reference.shape
    difference = (rounded - reference).abs().max().item()
    assert difference > 1e-4, f"{scheme} logits equal the full-precision ones"
    assert (
        np.corrcoef(rounded.flatten().numpy(), reference.flatten().numpy())[0, 1] > 0.5
    )  # same model (0.86 for NF4)


def test_quantized_evaluation_differs_from_full_precision(saved_model, tmp_path):
    table = examples()
    full = evaluate_on_examples(str(saved_model), table, tmp_path / "full", runner_config=RUNNER)
    results = quantization_attack(saved_model, table, tmp_path / "attack", runner_config=RUNNER, name="tiny")
    assert [r["scheme"] for r in results] == ["8bit", "nf4"]
    reference = pd.read_parquet(tmp_path / "full" / "per_example.parquet")
    assert full["populations"]["forget_seen"]["all"]["n"] == 3
    for result in results:
        attacked = pd.read_parquet(f"{result['eval_dir']}/per_example.parquet")
        assert attacked["example_id"].tolist() == reference["example_id"].tolist()
        assert len(attacked["generated_text"]) == 3
        assert not np.allclose(attacked["loss"], reference["loss"], rtol=0, atol=1e-6), result["scheme"]
        assert result["summary"]["populations"]["forget_seen"]["all"]["n"] == 3


def test_lora_adapter_is_merged_in_full_precision_before_quantizing(saved_model, tmp_path):
    from peft import LoraConfig, get_peft_model

    from medunlearn.models import load_model_and_tokenizer

    base, tokenizer = load_model_and_tokenizer(str(saved_model))
    adapter = get_peft_model(base, LoraConfig(r=2, lora_alpha=4, target_modules="all-linear"))
    adapter.save_pretrained(tmp_path / "adapter")
    tokenizer.save_pretrained(tmp_path / "adapter")
    merged = full_precision_folder(tmp_path / "adapter", tmp_path / "work")
    assert (merged / "config.json").is_file() and not (merged / "adapter_config.json").exists()
    assert full_precision_folder(saved_model, tmp_path / "work") == saved_model


def test_a_merge_is_reused_only_for_the_adapter_it_was_made_from(saved_model, tmp_path):
    """Two adapters of one folder share the default work_dir: the second must not get the first's merge."""
    import torch
    from peft import LoraConfig, get_peft_model

    from medunlearn.models import load_model_and_tokenizer

    merged_weights = {}
    for name, seed in (("a", 1), ("b", 2)):
        base, tokenizer = load_model_and_tokenizer(str(saved_model))
        torch.manual_seed(seed)
        adapter = get_peft_model(base, LoraConfig(r=2, lora_alpha=4, target_modules="all-linear"))
        with torch.no_grad():  # LoRA's B starts at zero: give each adapter an update of its own
            for parameter_name, parameter in adapter.named_parameters():
                if "lora_B" in parameter_name:
                    parameter.normal_(std=0.5)
        adapter.save_pretrained(tmp_path / "adapters" / name)
        tokenizer.save_pretrained(tmp_path / "adapters" / name)
        merged = full_precision_folder(tmp_path / "adapters" / name, tmp_path / "adapters")
        model, _ = load_model_and_tokenizer(str(merged))
        merged_weights[name] = model.model.layers[0].self_attn.q_proj.weight.detach().clone()
        assert full_precision_folder(tmp_path / "adapters" / name, tmp_path / "adapters") == merged  # reused
    assert not torch.equal(merged_weights["a"], merged_weights["b"])


def test_a_damaged_merge_record_is_named(tmp_path):
    """Before: json.loads of a cut merged_from.json was a JSONDecodeError traceback."""
    from medunlearn.errors import FileContentError

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    merged = tmp_path / "work" / "merged-full-precision"
    merged.mkdir(parents=True)
    (merged / "config.json").write_text("{}")
    (merged / "merged_from.json").write_text('{"adapter_config.json": ')
    with pytest.raises(FileContentError, match=r"merged_from.json, line 1: invalid JSON at column 25"):
        full_precision_folder(adapter, tmp_path / "work")


def test_unknown_scheme_is_named():
    with pytest.raises(InputError, match="int3"):
        quantization_config("int3")
