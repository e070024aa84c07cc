"""Greedy generation in length-sorted batches vs batches in data order (same model, prompts, batch size).

Sorting by prompt length does two things: less left padding in each batch, and (on AMNESIA, where reasoning
questions are longer than factual ones and have longer answers) batches whose answers end at about the same
step, so ``generate`` stops early instead of running until the longest answer of a mixed batch ends.
To show the second effect the tiny Llama is first trained briefly on the seen QA so that it answers in
the right length and stops at EOS. The outputs of both orders are compared as well (they must agree).

Run: ``python bench/bench_generation_sorting.py`` (about a minute on 2 CPU cores).
"""

from __future__ import annotations

import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BATCH_SIZE = 16
MAX_NEW_TOKENS = 48
TRAIN_STEPS = 150
BATCH_TRAIN = 16
REPEATS = 2


def train_briefly(model, tokenizer, questions, answers, steps: int, seed: int = 0):
    """A few AdamW steps on the answer tokens, so the model learns answer lengths and when to emit EOS."""
    import numpy as np
    import torch

    from medunlearn.evaluation.runner import encode_examples

    encoded = encode_examples(tokenizer, questions, answers)
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        index = rng.choice(len(questions), size=BATCH_TRAIN, replace=False)
        width = max(len(encoded.full_ids[i]) for i in index)
        input_ids = torch.full((len(index), width), tokenizer.pad_token_id)
        labels = torch.full((len(index), width), -100)
        for row, i in enumerate(index):
            ids = torch.tensor(encoded.full_ids[i])
            input_ids[row, : len(ids)] = ids
            start, end = encoded.answer_start[i], encoded.answer_end[i]
            labels[row, start:end] = ids[start:end]
        loss = model(input_ids=input_ids, attention_mask=(input_ids != tokenizer.pad_token_id).long(), labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return float(loss.detach())


def generate_all(model, tokenizer, prompt_ids, sort_by_length: bool):
    from medunlearn.evaluation.runner import _eos_ids, greedy_generate, plan_batches

    outputs = [None] * len(prompt_ids)
    eos = _eos_ids(tokenizer, model)
    for batch in plan_batches([len(p) for p in prompt_ids], BATCH_SIZE, sort_by_length):
        tokens = greedy_generate(model, [prompt_ids[i] for i in batch], tokenizer.pad_token_id, eos, MAX_NEW_TOKENS)
        for i, generated in zip(batch, tokens):
            outputs[i] = generated
    return outputs


def main() -> None:
    import datasets
    import torch

    from medunlearn.amnesia import build_amnesia_folder
    from medunlearn.evaluation.populations import read_local_configs
    from medunlearn.evaluation.runner import encode_examples
    from medunlearn.models import TinyLlamaConfig, build_tiny_llama, train_bpe_tokenizer

    torch.set_num_threads(1)
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory() as workdir:
        folder = build_amnesia_folder(os.path.join(workdir, "amnesia"), patients=100, seed=0)
        (full,) = read_local_configs(folder, ["full"])
    seen = full["train"]
    questions, answers = seen["question"], seen["answer"]
    tokenizer = train_bpe_tokenizer([f"{q} {a}" for q, a in zip(questions, answers)], vocab_size=1024)
    model = build_tiny_llama(tokenizer, TinyLlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2))
    started = time.perf_counter()
    loss = train_briefly(model, tokenizer, questions, answers, TRAIN_STEPS)
    print(f"trained {TRAIN_STEPS} steps in {time.perf_counter() - started:.1f}s (answer loss {loss:.2f})")

    prompt_ids = encode_examples(tokenizer, questions, answers).prompt_ids
    lengths = sorted(len(p) for p in prompt_ids)
    print(f"{len(prompt_ids)} prompts, {lengths[0]}-{lengths[-1]} tokens; batch {BATCH_SIZE}, max_new_tokens {MAX_NEW_TOKENS}")
    generate_all(model, tokenizer, prompt_ids[:BATCH_SIZE], True)  # warm-up
    # Alternate the two orders and keep each one's best time: the machine is shared, so single runs are noisy.
    timings, results = {False: float("inf"), True: float("inf")}, {}
    for _ in range(REPEATS):
        for sort_by_length in (False, True):
            started = time.perf_counter()
            results[sort_by_length] = generate_all(model, tokenizer, prompt_ids, sort_by_length)
            timings[sort_by_length] = min(timings[sort_by_length], time.perf_counter() - started)
    agree = sum(a == b for a, b in zip(results[False], results[True])) / len(prompt_ids)
    mean_answer = sum(len(t) for t in results[True]) / len(prompt_ids)
    print(f"best of {REPEATS} runs each")
    print(f"unsorted batches : {timings[False]:.2f}s")
    print(f"sorted batches   : {timings[True]:.2f}s  (mean answer {mean_answer:.1f} tokens)")
    print(f"identical outputs: {agree:.1%}")
    print(f"speed-up sorted vs unsorted: {timings[False] / timings[True]:.2f}x")


if __name__ == "__main__":
    main()
