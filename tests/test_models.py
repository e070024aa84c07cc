import torch


def test_tiny_llama_forward_and_loss(tiny_model, tiny_tokenizer):
    batch = tiny_tokenizer(["Troponin I was 2.4 ng/mL."], return_tensors="pt")
    out = tiny_model(**batch, labels=batch["input_ids"])
    assert out.logits.shape == (1, batch["input_ids"].shape[1], len(tiny_tokenizer))
    # A random model over V tokens starts near log(V) nats per token.
    assert abs(out.loss.item() - torch.log(torch.tensor(float(len(tiny_tokenizer)))).item()) < 1.0


def test_chat_template_marks_assistant_tokens(tiny_tokenizer):
    messages = [
        {"role": "user", "content": "Which artery?"},
        {"role": "assistant", "content": "The right one."},
    ]
    enc = tiny_tokenizer.apply_chat_template(
        messages, tokenize=True, return_assistant_tokens_mask=True, return_dict=True
    )
    ids, mask = enc["input_ids"], enc["assistant_masks"]
    assistant_text = tiny_tokenizer.decode([i for i, m in zip(ids, mask) if m])
    assert assistant_text == "The right one.<|im_end|>"
    prompt = tiny_tokenizer.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")


def test_tokenizer_round_trips_text(tiny_tokenizer):
    text = "Coronary angiography revealed a 90% occlusion."
    assert tiny_tokenizer.decode(tiny_tokenizer(text)["input_ids"]) == text
