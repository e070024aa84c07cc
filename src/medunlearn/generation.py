"""Greedy generation for decoder-only models: the one loop the evaluation runner, the baselines and the
transformers LLM backend share.

Prompts are token ids, padded on the left *here* (decoder-only models continue from the last position), so no
caller's tokenizer is ever changed: a tokenizer's ``padding_side`` stays what its owner set.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def model_device(model):
    """The device of a model's first parameter (where its inputs must go)."""
    return next(model.parameters()).device


def pad_batch(sequences: Sequence[Sequence[int]], pad_token_id: int, side: str):
    """``(input_ids, attention_mask)`` of a batch of token-id lists padded on ``side`` ("left" or "right")."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    tensors = [torch.tensor(list(s), dtype=torch.long) for s in sequences]
    input_ids = pad_sequence(tensors, batch_first=True, padding_value=pad_token_id, padding_side=side)
    ones = [torch.ones(len(s), dtype=torch.long) for s in sequences]
    return input_ids, pad_sequence(ones, batch_first=True, padding_value=0, padding_side=side)


def greedy_generate(
    model,
    prompts: Sequence[Sequence[int]],
    pad_token_id: int,
    eos_token_ids: Iterable[int],
    max_new_tokens: int,
) -> list[list[int]]:
    """Greedy continuations (token ids) of a batch of prompts; each is cut before its first EOS."""
    import torch

    eos_token_ids = sorted(set(eos_token_ids))
    input_ids, attention_mask = pad_batch(prompts, pad_token_id, "left")
    width = input_ids.shape[1]
    device = model_device(model)
    with torch.inference_mode():
        output = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention_mask.to(device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=pad_token_id,
            eos_token_id=eos_token_ids,
        )
    new_tokens = output[:, width:].cpu().numpy()
    is_eos = np.isin(new_tokens, eos_token_ids)
    stops = np.where(is_eos.any(1), is_eos.argmax(1), new_tokens.shape[1])
    return [row[:stop].tolist() for row, stop in zip(new_tokens, stops)]


def eos_token_ids(tokenizer, model=None) -> set[int]:
    """Every token that ends a turn: the tokenizer's EOS and the model's generation-config EOS ids."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if configured is not None:
        ids |= set(configured) if isinstance(configured, (list, tuple)) else {configured}
    return ids


def generate_texts(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    batch_size: int = 8,
    max_prompt_tokens: int | None = None,
) -> list[str]:
    """Greedy completions of already-rendered prompt texts, decoded without special tokens.

    A prompt longer than ``max_prompt_tokens`` keeps its *last* tokens (where a chat template puts the
    generation prompt). The tokenizer is only read, never changed.
    """
    pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    stops = eos_token_ids(tokenizer, model)
    encoded = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    if max_prompt_tokens is not None:
        encoded = [ids[-max_prompt_tokens:] for ids in encoded]
    was_training = model.training
    model.eval()
    texts: list[str] = []
    try:
        for start in range(0, len(encoded), batch_size):
            tokens = greedy_generate(
                model, encoded[start : start + batch_size], pad_token_id, stops, max_new_tokens
            )
            texts += tokenizer.batch_decode(tokens, skip_special_tokens=True)
    finally:
        model.train(was_training)
    return texts
