"""The teacher-forced pass with and without prompt sharing (``RunnerConfig.share_prompts``), same model and
TOFU-format workload, one run.

TOFU scores every question's answer, its paraphrase and its perturbed answers: without sharing, each is one
full sequence ``chat(question) + answer`` and the prompt runs through the model once per variant; with
sharing, the prompt runs once (left padded, its KV cache kept) and every variant's answer tokens continue from
it. The workload is the fictitious TOFU folder (40 authors × 5 QA, 5 perturbed answers each, as TOFU's
``*_perturbed`` configs), every example of a ``forget10`` evaluation, rendered with the ``open-unlearning``
conventions (its system prompt makes prompts long, as in the reference), and a 26M-parameter tiny Llama
(near the 28M of the side-by-side comparison with the reference in docs/tofu.md).

Printed, for both paths: the token positions run through the model (padding included, from the batch plan),
wall-clock and CPU time (``time.process_time``, one torch thread; best of ``REPEATS`` interleaved runs: the
machine is shared), and the ratios; then the largest difference between the two paths' per-token values
(log-probs, next-token mean and std) and how many argmax flags differ. Nothing is asserted on times.

Run: ``python bench/bench_prompt_sharing.py`` (about two minutes on 2 CPU cores).
"""

from __future__ import annotations

import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

AUTHORS = 40
QA_PER_AUTHOR = 5
PERTURBED = 5
BATCH_SIZE = 16
REPEATS = 2
COLUMNS = ("token_logprobs", "token_mean_logprob", "token_std_logprob")


def main() -> None:
    import numpy as np
    import torch

    from medunlearn.evaluation.runner import (
        RunnerConfig,
        answer_variants,
        encode_examples,
        padded_tokens,
        read_outputs,
        teacher_forced_batches,
    )
    from medunlearn.models import TinyLlamaConfig, build_tiny_llama, train_bpe_tokenizer
    from medunlearn.tofu.conventions import ConventionTokenizer, preset
    from medunlearn.tofu.evaluate import run_tofu_model, tofu_examples
    from medunlearn.tofu.synthetic import build_tofu_folder

    torch.set_num_threads(1)
    conventions = preset("open-unlearning")
    with tempfile.TemporaryDirectory() as workdir:
        folder = build_tofu_folder(
            os.path.join(workdir, "tofu"), authors=AUTHORS, qa_per_author=QA_PER_AUTHOR, perturbed=PERTURBED
        )
        examples = tofu_examples(folder, "forget10")
        tokenizer = train_bpe_tokenizer(
            examples["question"].tolist() + examples["answer"].tolist(), vocab_size=1024
        )
        torch.manual_seed(0)
        model = build_tiny_llama(
            tokenizer,
            TinyLlamaConfig(
                hidden_size=512,
                intermediate_size=1536,
                num_hidden_layers=8,
                num_attention_heads=8,
                num_key_value_heads=4,
            ),
        ).eval()
        parameters = sum(p.numel() for p in model.parameters())
        rendering = ConventionTokenizer(tokenizer, conventions)
        encoded = encode_examples(
            rendering, examples["question"], examples["answer"], answer_variants(examples)
        )
        tokens = {
            share: padded_tokens(encoded, teacher_forced_batches(encoded, BATCH_SIZE, True, share), share)
            for share in (False, True)
        }
        prompts = len({tuple(p) for p in encoded.prompt_ids})
        print(
            f"{len(examples)} scored sequences ({prompts} distinct prompts), "
            f"{parameters / 1e6:.1f}M-parameter tiny Llama, batch {BATCH_SIZE}, open-unlearning conventions"
        )
        wall = {False: float("inf"), True: float("inf")}
        cpu = {False: float("inf"), True: float("inf")}
        outputs = {}
        for _ in range(REPEATS):
            for share in (False, True):
                config = RunnerConfig(batch_size=BATCH_SIZE, progress=False, share_prompts=share)
                out = os.path.join(workdir, f"outputs-{share}")
                started, started_cpu = time.perf_counter(), time.process_time()
                run_tofu_model(
                    model,
                    tokenizer,
                    examples,
                    out,
                    "model",
                    conventions,
                    config,
                    generate=False,
                    overwrite=True,
                )
                wall[share] = min(wall[share], time.perf_counter() - started)
                cpu[share] = min(cpu[share], time.process_time() - started_cpu)
                outputs[share] = read_outputs(os.path.join(out, "model-answers"), examples["example_id"])
    largest = {
        column: max(
            float(np.abs(np.asarray(a) - np.asarray(b)).max(initial=0.0))
            for a, b in zip(outputs[True][column], outputs[False][column])
        )
        for column in COLUMNS
    }
    flips = sum(
        int((np.asarray(a) != np.asarray(b)).sum())
        for a, b in zip(outputs[True]["token_is_argmax"], outputs[False]["token_is_argmax"])
    )
    scored = sum(len(v) for v in outputs[True]["token_logprobs"])
    print(f"best of {REPEATS} interleaved runs each; {scored} answer tokens scored")
    for share, name in ((False, "whole sequences"), (True, "prompt sharing")):
        print(
            f"{name:<16}: {tokens[share]:8,d} token positions  "
            f"wall {wall[share]:6.2f}s  cpu {cpu[share]:6.2f}s"
        )
    print(
        f"prompt sharing vs whole sequences: {tokens[False] / tokens[True]:.2f}x fewer token positions, "
        f"{wall[False] / wall[True]:.2f}x wall, {cpu[False] / cpu[True]:.2f}x cpu"
    )
    print(
        "largest difference: "
        + ", ".join(f"{column} {value:.1e}" for column, value in largest.items())
        + f"; argmax flags differing: {flips}"
    )


if __name__ == "__main__":
    main()
