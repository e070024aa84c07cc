"""Greedy generation for decoder-only models: the one loop the evaluation runner, the baselines and the
transformers LLM backend share.

Prompts are token ids, padded on the left *here* (decoder-only models continue from the last position), so no
caller's tokenizer is ever changed: a tokenizer's ``padding_side`` stays what its owner set.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

from medunlearn.errors import InputError

DECODINGS = ("dynamic", "static", "compiled", "auto")
Decoding = Literal["dynamic", "static", "compiled", "auto"]
# A static cache's length is rounded up to a multiple of this, so batches of nearby widths share one cache
# shape (and, compiled, one graph) instead of recompiling for every prompt width.
STATIC_CACHE_BUCKET = 128


def resolve_decoding(decoding: Decoding, device) -> str:
    """The decoding a setting means on ``device``: ``"auto"`` is ``"compiled"`` on CUDA, else ``"dynamic"``.

    ``"compiled"`` without CUDA is refused: transformers compiles generation's forward only on accelerators,
    and compiling on CPU takes minutes for no gain.

    >>> resolve_decoding("auto", "cpu"), resolve_decoding("static", "cpu")
    ('dynamic', 'static')
    """
    import torch

    device_type = torch.device(device).type
    if decoding == "auto":
        return "compiled" if device_type == "cuda" else "dynamic"
    if decoding not in DECODINGS:
        raise InputError(f"unknown decoding {decoding!r}; choices: {', '.join(DECODINGS)}")
    if decoding == "compiled" and device_type != "cuda":
        raise InputError(
            f"decoding 'compiled' (static KV cache + torch.compile) needs a CUDA device, and the model is on "
            f"{device_type!r}; use 'static', 'dynamic' or 'auto' (compiled only when CUDA is present)"
        )
    return decoding


def decoding_options(decoding: str, device, max_length: int) -> dict:
    """``generate`` keyword arguments of a resolved decoding, for batches of up to ``max_length`` tokens.

    ``"static"`` sets ``disable_compile``: transformers otherwise compiles the forward by itself whenever a
    static cache is used on an accelerator.
    """
    decoding = resolve_decoding(decoding, device)
    if decoding == "dynamic":
        return {}
    from transformers import CompileConfig

    cache_len = -(-max_length // STATIC_CACHE_BUCKET) * STATIC_CACHE_BUCKET
    options = {"cache_implementation": "static", "max_cache_len": cache_len}
    if decoding == "static":
        return options | {"disable_compile": True}
    return options | {"compile_config": CompileConfig(mode="reduce-overhead", fullgraph=False)}


def context_length(model) -> int | None:
    """The most tokens ``model`` takes in one sequence (its config's ``max_position_embeddings``, GPT-2's
    ``n_positions``); ``None`` when its config says nothing."""
    config = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def check_new_tokens_fit(model, max_new_tokens: int, flag: str = "--max-new-tokens") -> None:
    """Refuse ``max_new_tokens`` past ``model``'s context (:func:`context_length`), before a batch is
    generated: no prompt and answer could fit, and a model past its positions generates noise or fails in
    its attention with a traceback. Called where a model is given its generation settings: the evaluation's
    engine (:func:`medunlearn.evaluation.engines.make_engine`) and :func:`generate_texts`."""
    context = context_length(model)
    if context is not None and max_new_tokens > context:
        name = getattr(getattr(model, "config", None), "name_or_path", "") or "the model"
        raise InputError(
            f"{flag} {max_new_tokens:,} is more than the {context:,} tokens of {name}'s context "
            "(max_position_embeddings in its config.json): lower it"
        )


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
    decoding: Decoding = "dynamic",
) -> list[list[int]]:
    """Greedy continuations (token ids) of a batch of prompts; each is cut before its first EOS.

    ``decoding`` (see :data:`DECODINGS`): ``"dynamic"`` (transformers' default growing KV cache),
    ``"static"`` (a preallocated KV cache, ``cache_implementation="static"``, not compiled) or ``"compiled"``
    (static cache and the decoding step under ``torch.compile``, mode ``"reduce-overhead"``: CUDA only).
    Resolve ``"auto"`` first with :func:`resolve_decoding`.
    """
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
            **decoding_options(decoding, device, width + max_new_tokens),
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
    decoding: Decoding = "dynamic",
) -> list[str]:
    """Greedy completions of already-rendered prompt texts, decoded without special tokens.

    A prompt longer than ``max_prompt_tokens`` keeps its *last* tokens (where a chat template puts the
    generation prompt). The tokenizer is only read, never changed. ``decoding``: see :func:`greedy_generate`
    (``"auto"`` is resolved here for the model's device).
    """
    check_new_tokens_fit(model, max_new_tokens)
    pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    stops = eos_token_ids(tokenizer, model)
    encoded = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    if max_prompt_tokens is not None:
        encoded = [ids[-max_prompt_tokens:] for ids in encoded]
    decoding = resolve_decoding(decoding, model_device(model))
    was_training = model.training
    model.eval()
    texts: list[str] = []
    try:
        for start in range(0, len(encoded), batch_size):
            tokens = greedy_generate(
                model, encoded[start : start + batch_size], pad_token_id, stops, max_new_tokens, decoding
            )
            texts += tokenizer.batch_decode(tokens, skip_special_tokens=True)
    finally:
        model.train(was_training)
    return texts
