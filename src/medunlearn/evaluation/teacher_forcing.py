"""The model's math of the teacher-forced pass: per answer token, its log-probability, whether it was the
argmax, and the mean and standard deviation of the log-probability under the model's next-token
distribution (every probability-based statistic derives from these)."""

from __future__ import annotations

import numpy as np

from medunlearn.generation import model_device, pad_batch


def answer_token_statistics(
    model, sequences: list[list[int]], answer_start, answer_end, pad_token_id: int
) -> dict:
    """Teacher-forced statistics of the answer tokens of a batch (right padding, so no position moves).

    Returns a dict of lists (one numpy array per sequence, one value per answer token):
    ``token_logprobs`` log p(y_t | y_<t), ``token_is_argmax`` y_t == argmax p(· | y_<t),
    ``token_mean_logprob`` E_{v~p}[log p(v)] (the negative entropy) and ``token_std_logprob``
    sqrt(Var_{v~p}[log p(v)]) — the two moments min-k%++ normalises by.
    """
    import torch

    input_ids, attention_mask = pad_batch(sequences, pad_token_id, "right")
    width = input_ids.shape[1]
    positions = torch.arange(width - 1)
    # Logits at position t predict token t + 1: the answer token j is scored by the logits at j - 1.
    start = torch.as_tensor(np.asarray(answer_start)) - 1
    end = torch.as_tensor(np.asarray(answer_end)) - 1
    scored = (positions[None, :] >= start[:, None]) & (positions[None, :] < end[:, None])
    device = model_device(model)
    with torch.inference_mode():
        logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)).logits
        logits = logits[:, :-1][scored.to(device)]
        targets = input_ids[:, 1:][scored].to(device)
        return _token_statistics(logits, targets, scored.sum(1).tolist())


def _token_statistics(logits, targets, counts: list[int]) -> dict:
    """The four per-token columns from the logits that predict each answer token (rows in sequence order,
    ``counts[i]`` of them for sequence ``i``)."""
    logits = logits.float()
    logprobs = logits.log_softmax(-1)
    token_logprobs = logprobs.gather(1, targets[:, None]).squeeze(1)
    is_argmax = logits.argmax(-1) == targets
    probs = logprobs.exp()
    mean = (probs * logprobs).sum(-1)
    # E[(log p - mean)^2], not E[(log p)^2] - mean^2: the difference of two near-equal float32 sums loses the
    # variance of a peaked distribution to rounding (and its square root amplifies the error).
    variance = (probs * (logprobs - mean[:, None]).square()).sum(-1)
    std = variance.sqrt()
    columns = {
        "token_logprobs": token_logprobs,
        "token_is_argmax": is_argmax,
        "token_mean_logprob": mean,
        "token_std_logprob": std,
    }
    return {
        name: list(np.split(values.cpu().numpy(), np.cumsum(counts)[:-1])) for name, values in columns.items()
    }


def shared_prompt_statistics(
    model, sequences: list[list[int]], answer_start, answer_end, pad_token_id: int
) -> dict:
    """:func:`answer_token_statistics` with each distinct prompt run through the model once.

    The batch's distinct prompts (``sequence[:answer_start]``) go through one forward pass, left padded with
    position ids counted from each prompt's first real token, keeping the KV cache and only the last
    position's logits (which predict the first answer token). The cache is gathered over the sequences
    (``Cache.batch_select_indices``: row i gets its prompt's keys and values), and one more pass runs
    every sequence's answer tokens but the last, right padded, at positions ``len(prompt) + j``, attending to
    its prompt (the prompt's padding masked). Each answer token is thus scored from the same context as in
    the whole-sequence pass; the values agree within float rounding. Tokens after ``answer_end`` (what the
    template writes after the end-of-turn token) are never run: nothing reads their logits.
    """
    import torch

    answer_start = np.asarray(answer_start, dtype=np.int64)
    answer_end = np.asarray(answer_end, dtype=np.int64)
    prompts: dict[tuple[int, ...], int] = {}
    prompt_of = np.fromiter(
        (prompts.setdefault(tuple(s[:start]), len(prompts)) for s, start in zip(sequences, answer_start)),
        dtype=np.int64,
        count=len(sequences),
    )
    prompt_ids, prompt_mask = pad_batch(list(prompts), pad_token_id, "left")
    counts = answer_end - answer_start
    device = model_device(model)
    with torch.inference_mode():
        prompt_positions = (prompt_mask.cumsum(1) - 1).clamp_min(0)
        output = model(
            input_ids=prompt_ids.to(device),
            attention_mask=prompt_mask.to(device),
            position_ids=prompt_positions.to(device),
            use_cache=True,
            logits_to_keep=1,
        )
        rows = torch.as_tensor(prompt_of, device=device)
        first = output.logits[:, -1][rows]  # predicts answer token 0 of every sequence
        continuations = [s[start : end - 1] for s, start, end in zip(sequences, answer_start, answer_end)]
        width = max((len(c) for c in continuations), default=0)
        if width:
            cache = output["cache"]  # transformers 5.24: `cache` (was `past_key_values`)
            cache.batch_select_indices(rows)
            input_ids, answer_mask = pad_batch(continuations, pad_token_id, "right")
            positions = torch.as_tensor(answer_start)[:, None] + torch.arange(width)[None, :]
            attention_mask = torch.cat([prompt_mask[torch.as_tensor(prompt_of)], answer_mask], dim=1)
            rest = model(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                position_ids=positions.to(device),
                cache=cache,
                use_cache=False,
            ).logits
            logits = torch.cat([first[:, None], rest], dim=1)
        else:
            logits = first[:, None]
        scored = torch.arange(logits.shape[1])[None, :] < torch.as_tensor(counts)[:, None]
        # The mask picks each row's first counts[i] positions, row by row: the answers' tokens concatenated.
        targets = torch.tensor(
            [t for s, a, b in zip(sequences, answer_start, answer_end) for t in s[a:b]], dtype=torch.long
        )
        return _token_statistics(logits[scored.to(device)], targets.to(device), counts.tolist())
