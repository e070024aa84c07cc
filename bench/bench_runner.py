"""The evaluation runner vs a per-metric baseline (the way OpenUnlearning evaluates), same model, data, metrics.

Runner: ``evaluate_unlearning`` loads the model and the data once, tokenises once, runs one teacher-forced pass
and one length-sorted batched generation, and derives every metric from those outputs.

Baseline: for each metric on its own, load the model from disk, read the AMNESIA folder, tokenise, run the pass
that metric needs over its populations (batches in data order), then compute the metric. Metric set (both sides):
ROUGE-L (→ MU, AFE), LS, DS from generations; Prob, exact memorisation, extraction strength, token entropy and
four MIA scores (loss, zlib, min-k%, min-k%++) from teacher-forced log-probs. The kernels (forward pass,
``generate``) are the runner's own, so the ratio measures the organisation of the work, not the kernels.

Run: ``python bench/bench_runner.py`` (about a minute and a half on 2 CPU cores).
"""

from __future__ import annotations

import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PATIENTS = 60
FORGET_CONFIG = "forget_10"
MAX_RETAIN_PATIENTS = 8
BATCH_SIZE = 16
MAX_NEW_TOKENS = 24

# metric -> (pass it needs, populations it is computed on)
ALL = ("forget_seen", "forget_holdout", "retain_same_disease", "retain_out_of_disease")
FORGET = ("forget_seen", "forget_holdout")
BASELINE_METRICS = {
    "rouge_l": ("generation", ALL),
    "leakage": ("generation", FORGET),
    "degeneration": ("generation", ALL),
    "prob": ("teacher_forced", ALL),
    "exact_memorization": ("teacher_forced", ALL),
    "extraction_strength": ("teacher_forced", ALL),
    "token_entropy": ("teacher_forced", ALL),
    "mia_loss": ("teacher_forced", FORGET),
    "mia_zlib": ("teacher_forced", FORGET),
    "mia_min_k": ("teacher_forced", FORGET),
    "mia_min_k_plus_plus": ("teacher_forced", FORGET),
}


def baseline_metric(metric: str, model_dir: str, data_dir: str, population_config) -> float:
    """One metric, computed the per-metric way: load, read, tokenise, run, score. Returns its mean."""
    import numpy as np
    import pandas as pd

    from medunlearn.evaluation.populations import load_populations
    from medunlearn.evaluation.runner import (
        _eos_ids,
        answer_token_statistics,
        encode_examples,
        greedy_generate,
        plan_batches,
    )
    from medunlearn.evaluation.scoring import probability_statistics, text_statistics
    from medunlearn.models import load_model_and_tokenizer

    needed_pass, populations = BASELINE_METRICS[metric]
    model, tokenizer = load_model_and_tokenizer(model_dir)
    model.eval()
    examples = load_populations(data_dir, FORGET_CONFIG, population_config)
    examples = examples[examples["population"].isin(populations)].reset_index(drop=True)
    encoded = encode_examples(tokenizer, examples["question"].tolist(), examples["answer"].tolist())
    if needed_pass == "generation":
        texts = [""] * len(examples)
        eos = _eos_ids(tokenizer, model)
        for batch in plan_batches([len(p) for p in encoded.prompt_ids], BATCH_SIZE, sort_by_length=False):
            tokens = greedy_generate(model, [encoded.prompt_ids[i] for i in batch], tokenizer.pad_token_id, eos, MAX_NEW_TOKENS)
            for i, text in zip(batch, tokenizer.batch_decode(tokens, skip_special_tokens=True)):
                texts[i] = text
        values = text_statistics(examples, texts)
        column = {"rouge_l": "rouge_l_f1", "leakage": "leakage", "degeneration": "degenerate"}[metric]
        return float(np.nanmean(values[column].astype(float)))
    columns = {name: [None] * len(examples) for name in ("token_logprobs", "token_is_argmax", "token_mean_logprob", "token_std_logprob")}
    for batch in plan_batches([len(s) for s in encoded.full_ids], BATCH_SIZE, sort_by_length=False):
        stats = answer_token_statistics(
            model, [encoded.full_ids[i] for i in batch], encoded.answer_start[batch], encoded.answer_end[batch],
            tokenizer.pad_token_id,
        )
        for name, values in stats.items():
            for i, value in zip(batch, values):
                columns[name][i] = value
    stats = probability_statistics(pd.DataFrame(columns), examples["answer"])
    key = {"token_entropy": "answer_token_entropy"}.get(metric, metric)
    return float(np.mean(stats[key]))


def main() -> None:
    import datasets
    import torch

    from medunlearn.amnesia import build_amnesia_folder
    from medunlearn.evaluation.pipeline import evaluate_unlearning
    from medunlearn.evaluation.populations import PopulationConfig, load_populations
    from medunlearn.evaluation.runner import RunnerConfig
    from medunlearn.models import TinyLlamaConfig, build_tiny_llama, train_bpe_tokenizer

    torch.set_num_threads(1)
    datasets.disable_progress_bars()
    population_config = PopulationConfig(max_retain_patients=MAX_RETAIN_PATIENTS, seed=0)
    with tempfile.TemporaryDirectory() as workdir:
        data_dir = str(build_amnesia_folder(os.path.join(workdir, "amnesia"), patients=PATIENTS, seed=0))
        examples = load_populations(data_dir, FORGET_CONFIG, population_config)
        tokenizer = train_bpe_tokenizer((examples["question"] + " " + examples["answer"]).tolist(), vocab_size=1024)
        model = build_tiny_llama(tokenizer, TinyLlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=4))
        model_dir = os.path.join(workdir, "model")
        model.save_pretrained(model_dir, safe_serialization=True)
        tokenizer.save_pretrained(model_dir)
        counts = examples["population"].value_counts().to_dict()
        print(f"{len(examples)} QA ({counts}); tiny Llama 4×128; batch {BATCH_SIZE}, max_new_tokens {MAX_NEW_TOKENS}")

        # Warm-up outside the clock: first imports (rouge-score pulls in nltk) and first kernel calls are one-off.
        baseline_metric("rouge_l", model_dir, data_dir, population_config)

        started = time.perf_counter()
        summary = evaluate_unlearning(
            model_dir, data_dir, FORGET_CONFIG, os.path.join(workdir, "eval"),
            runner_config=RunnerConfig(batch_size=BATCH_SIZE, max_new_tokens=MAX_NEW_TOKENS, progress=False),
            population_config=population_config,
        )
        runner_seconds = time.perf_counter() - started
        print(f"runner   : {runner_seconds:6.2f}s  (one load, one tokenisation, 1 forward pass + 1 generation per QA)")

        started = time.perf_counter()
        baseline = {m: baseline_metric(m, model_dir, data_dir, population_config) for m in BASELINE_METRICS}
        baseline_seconds = time.perf_counter() - started
        print(f"baseline : {baseline_seconds:6.2f}s  ({len(BASELINE_METRICS)} metrics, each loading, tokenising and running on its own)")

    # Same numbers both ways (ROUGE-L over all populations, Prob over all): the comparison is like for like.
    import pandas as pd

    cells = pd.DataFrame(
        [(p, c["all"]["n"], c["all"]["rouge_l_f1"], c["all"]["prob"]) for p, c in summary["populations"].items()],
        columns=["population", "n", "rouge", "prob"],
    )
    runner_rouge = float((cells["rouge"] * cells["n"]).sum() / cells["n"].sum())
    runner_prob = float((cells["prob"] * cells["n"]).sum() / cells["n"].sum())
    print(f"check    : ROUGE-L {runner_rouge:.4f} vs {baseline['rouge_l']:.4f}; Prob {runner_prob:.6f} vs {baseline['prob']:.6f}")
    print(f"speed-up runner vs per-metric baseline: {baseline_seconds / runner_seconds:.2f}x")


if __name__ == "__main__":
    main()
