"""Greedy generation in the runner's length-sorted batches vs batches in data order (same model, prompts,
batch).

The runner sorts generation batches by expected answer length (the gold answer's token count), then prompt
length: ``generate`` runs each batch until its longest answer ends, so grouping answers that end together
saves decoding steps, and sorting also trims left padding. The sort key is the gold answer length, so the gain
depends on how closely the model's answers follow the gold lengths: the tiny Llama is measured after 150
training steps on the seen QA (answer loss about 2: lengths only loosely learned) and again after 500 (answer
loss about 0.3, as a model fine-tuned on AMNESIA before unlearning, the case the evaluation serves). The
outputs of both orders are compared as well (they must agree).

Both wall-clock and CPU time (``time.process_time``, one torch thread) are printed: the machine this project
runs on is shared, so wall time there mostly measures the neighbours; CPU time measures the work.

Run: ``python bench/bench_generation_sorting.py`` (about a minute and a half on 2 CPU cores).
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
# The model is measured twice: briefly trained, then trained until it reproduces the answers (as a model
# fine-tuned on AMNESIA before unlearning does). Sorting by gold answer length pays off when generated lengths
# follow it.
TRAIN_STAGES = (150, 500)
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
        loss = model(
            input_ids=input_ids, attention_mask=(input_ids != tokenizer.pad_token_id).long(), labels=labels
        ).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return float(loss.detach())


def generate_all(model, tokenizer, prompt_ids, batches):
    from medunlearn.generation import eos_token_ids, greedy_generate

    outputs = [None] * len(prompt_ids)
    eos = eos_token_ids(tokenizer, model)
    for batch in batches:
        tokens = greedy_generate(
            model, [prompt_ids[i] for i in batch], tokenizer.pad_token_id, eos, MAX_NEW_TOKENS
        )
        for i, generated in zip(batch, tokens):
            outputs[i] = generated
    return outputs


def main() -> None:
    import datasets
    import torch

    from medunlearn.amnesia import build_amnesia_folder
    from medunlearn.data_loading import load_config
    from medunlearn.evaluation.runner import encode_examples
    from medunlearn.models import TinyLlamaConfig, build_tiny_llama, train_bpe_tokenizer

    torch.set_num_threads(1)
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory() as workdir:
        folder = build_amnesia_folder(os.path.join(workdir, "amnesia"), patients=100, seed=0)
        seen = load_config(folder, "full", "train")
    questions, answers = seen["question"], seen["answer"]
    tokenizer = train_bpe_tokenizer([f"{q} {a}" for q, a in zip(questions, answers)], vocab_size=1024)
    model = build_tiny_llama(
        tokenizer, TinyLlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2)
    )
    encoded = encode_examples(tokenizer, questions, answers)
    lengths = sorted(len(p) for p in encoded.prompt_ids)
    print(
        f"{len(questions)} prompts, {lengths[0]}-{lengths[-1]} tokens; batch {BATCH_SIZE}, "
        f"max_new_tokens {MAX_NEW_TOKENS}"
    )
    trained = 0
    for total_steps in TRAIN_STAGES:
        started = time.perf_counter()
        loss = train_briefly(model, tokenizer, questions, answers, total_steps - trained, seed=trained)
        trained = total_steps
        print(f"\n{trained} training steps ({time.perf_counter() - started:.1f}s; answer loss {loss:.2f})")
        compare_orders(model, tokenizer, encoded)


def compare_orders(model, tokenizer, encoded) -> None:
    """Time greedy generation of every prompt in data order and in the runner's order; print the
    comparison."""
    import time

    from medunlearn.evaluation.runner import generation_batches

    prompt_ids = encoded.prompt_ids
    plans = {order: generation_batches(encoded, BATCH_SIZE, order) for order in (False, True)}
    generate_all(model, tokenizer, prompt_ids, plans[True][:1])  # warm-up
    # Alternate the two orders and keep each one's best time: the machine is shared, so single runs are noisy.
    wall, cpu, results = (
        {False: float("inf"), True: float("inf")},
        {False: float("inf"), True: float("inf")},
        {},
    )
    for _ in range(REPEATS):
        for order in (False, True):
            started, started_cpu = time.perf_counter(), time.process_time()
            results[order] = generate_all(model, tokenizer, prompt_ids, plans[order])
            wall[order] = min(wall[order], time.perf_counter() - started)
            cpu[order] = min(cpu[order], time.process_time() - started_cpu)
    agree = sum(a == b for a, b in zip(results[False], results[True])) / len(prompt_ids)
    answer_lengths = [len(t) for t in results[True]]
    steps = {
        order: sum(max(answer_lengths[i] for i in batch) for batch in plans[order]) for order in (False, True)
    }
    padding = {
        order: sum(
            max(len(prompt_ids[i]) for i in b) * len(b) - sum(len(prompt_ids[i]) for i in b)
            for b in plans[order]
        )
        for order in (False, True)
    }
    print(f"best of {REPEATS} runs each; mean answer {sum(answer_lengths) / len(answer_lengths):.1f} tokens")
    for order, name in ((False, "data order"), (True, "runner order")):
        print(
            f"{name:<13}: wall {wall[order]:6.2f}s  cpu {cpu[order]:6.2f}s  "
            f"decoding steps {steps[order]:5d}  prompt padding {padding[order]:5d} tokens"
        )
    print(f"identical outputs: {agree:.1%}")
    print(
        f"speed-up sorted vs unsorted: {wall[False] / wall[True]:.2f}x wall, "
        f"{cpu[False] / cpu[True]:.2f}x cpu"
    )


if __name__ == "__main__":
    main()
