"""TOFU metric set: the one-pass runner vs a re-creation of the reference's per-metric structure, same model
and data, one run.

**This is not OpenUnlearning.** The baseline re-creates the reference's structure with medunlearn's own
kernels; it does not run the reference, and its ratio (about 2x) overstates the lead over the reference
itself. Measured against OpenUnlearning at commit d3d7cf9, unmodified, run side by side, medunlearn's whole
evaluation is 1.16-1.47x faster and its metric stage 1.01-1.35x (docs/tofu.md, "Speed", has the figures and
how they were obtained).

Runner: ``evaluate_tofu`` reads the TOFU folder once, runs one teacher-forced pass over every (question,
answer variant) and one length-sorted greedy generation per question, and derives every metric from those
outputs.

Baseline (OpenUnlearning's structure, re-created): every metric of the TOFU list is computed on its own. Each
loads the configs it needs, tokenises them, runs the forward passes / generations it needs over its rows
(batches in data order), and recomputes its ``pre_compute`` metrics (truth ratio -> paraphrased and perturbed
Prob; model utility -> its nine components; forget quality -> the forget truth ratio of both models; privleak
-> the min-k% AUC of both models). The kernels (forward pass, ``generate``) are the runner's own, so the ratio
measures the organisation of the work. Both sides use the ``open-unlearning`` conventions; the script also
prints the largest difference between the two sides' metric values (float32 rounding under different batch
padding; an MIA AUC moves in steps of 1/(forget × holdout pairs) when near-tied scores swap order).

Run: ``python bench/bench_tofu.py`` (under a minute on 2 CPU cores).
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
PERTURBED = 3
BATCH_SIZE = 16
MAX_NEW_TOKENS = 24
FORGET = "forget10"


def _baseline_outputs(model, tokenizer, source, config, column, conventions, generate=False):
    """Load one config, tokenise one answer column (a list column is flattened), run one pass in data
    order."""
    import numpy as np
    import pandas as pd

    from medunlearn.evaluation.runner import (
        answer_token_statistics,
        encode_examples,
    )
    from medunlearn.generation import eos_token_ids, greedy_generate
    from medunlearn.tofu.conventions import ConventionTokenizer
    from medunlearn.tofu.data import load_tofu

    frame = load_tofu(source, config).to_pandas()
    rendering = ConventionTokenizer(tokenizer, conventions)
    if isinstance(frame[column].iloc[0], (list, np.ndarray)):
        counts = frame[column].map(len).to_numpy()
        questions = np.repeat(frame["question"].to_numpy(), counts).tolist()
        answers = np.concatenate(frame[column].map(list).to_numpy()).tolist()
        rows = np.repeat(np.arange(len(frame)), counts)
    else:
        questions, answers, rows = frame["question"].tolist(), frame[column].tolist(), np.arange(len(frame))
    encoded = encode_examples(rendering, questions, answers)
    pad = tokenizer.pad_token_id
    out = {"row": rows, "answer": answers}
    batches = [np.arange(i, min(i + BATCH_SIZE, len(answers))) for i in range(0, len(answers), BATCH_SIZE)]
    if generate:
        texts = []
        for index in batches:
            tokens = greedy_generate(
                model,
                [encoded.prompt_ids[i] for i in index],
                pad,
                eos_token_ids(tokenizer, model),
                conventions.max_new_tokens,
            )
            texts += tokenizer.batch_decode(tokens, skip_special_tokens=True)
        out["generated_text"] = texts
        return pd.DataFrame(out)
    columns = {"token_logprobs": [], "token_is_argmax": [], "token_mean_logprob": [], "token_std_logprob": []}
    for index in batches:
        stats = answer_token_statistics(
            model,
            [encoded.full_ids[i] for i in index],
            encoded.answer_start[index],
            encoded.answer_end[index],
            pad,
        )
        for name in columns:
            columns[name] += stats[name]
    out.update(columns)
    out["example_id"] = [f"{config}/{i}" for i in range(len(answers))]
    return pd.DataFrame(out)


def baseline_metrics(model, retain, tokenizer, source, conventions) -> dict:
    """Every metric computed on its own, the reference's way (see the module docstring)."""
    import numpy as np

    from medunlearn.metrics import mia
    from medunlearn.metrics.forget_quality import forget_quality
    from medunlearn.metrics.model_utility import harmonic_mean_utility
    from medunlearn.tofu import scoring
    from medunlearn.tofu.data import tofu_splits

    splits = tofu_splits(FORGET)
    eps = conventions.epsilon

    def losses(m, config, column):
        outputs = _baseline_outputs(m, tokenizer, source, config, column, conventions)
        return outputs["row"].to_numpy(), scoring.token_statistics(outputs, conventions, outputs["answer"])

    def prob(m, config, column):
        rows, stats = losses(m, config, column)
        per_row = np.bincount(rows, weights=np.exp(-stats["avg_loss"].to_numpy())) / np.bincount(rows)
        return float(per_row.mean())

    def rouge(config):
        outputs = _baseline_outputs(model, tokenizer, source, config, "answer", conventions, generate=True)
        texts = scoring.cut_at_stop_strings(outputs["generated_text"], conventions.stop_strings)
        return float(scoring.rouge_recall(texts, outputs["answer"]).mean())

    def truth_ratios(m, config, correct_column):
        _, correct = losses(m, config, correct_column)
        rows, wrong = losses(m, config, "perturbed_answer")
        return scoring.truth_ratio_per_question(correct["avg_loss"], wrong["avg_loss"], rows, eps)

    def normalised(config):
        _, correct = losses(model, config, "answer")
        rows, wrong = losses(model, config, "perturbed_answer")
        return float(scoring.normalised_probability(correct["avg_loss"], wrong["avg_loss"], rows, eps).mean())

    def auc(m, score="min_k"):
        _, forget = losses(m, splits.forget_perturbed, "answer")
        _, holdout = losses(m, splits.holdout, "answer")
        return mia.mia_auc(forget[score], holdout[score])

    forget_tr = lambda m: truth_ratios(m, splits.forget_perturbed, "paraphrased_answer")  # noqa: E731
    sets = {
        "forget": splits.forget_perturbed,
        "retain": "retain_perturbed",
        "real_authors": "real_authors_perturbed",
        "world_facts": "world_facts_perturbed",
    }
    metric_functions = {}
    for name, config in sets.items():
        metric_functions[f"{name}_prob"] = lambda c=config: prob(model, c, "answer")
        metric_functions[f"{name}_perturbed_prob"] = lambda c=config: prob(model, c, "perturbed_answer")
        metric_functions[f"{name}_rouge"] = lambda c=config: rouge(c)
        if name in ("forget", "retain"):
            metric_functions[f"{name}_paraphrased_prob"] = lambda c=config: prob(
                model, c, "paraphrased_answer"
            )
            mode = "closer_to_1_better" if name == "forget" else "true_better"
            metric_functions[f"{name}_truth_ratio"] = lambda c=config, mode=mode: (
                scoring.aggregate_truth_ratio(truth_ratios(model, c, "paraphrased_answer"), mode, eps)
            )
        else:
            metric_functions[f"{name}_normalised_prob"] = lambda c=config: normalised(c)
            metric_functions[f"{name}_truth_ratio"] = lambda c=config: scoring.aggregate_truth_ratio(
                truth_ratios(model, c, "answer"), "true_better", eps
            )
    components = dict(metric_functions)
    metric_functions["model_utility"] = lambda: harmonic_mean_utility(
        [components[name]() for name in scoring.UTILITY_COMPONENTS]
    )
    metric_functions["forget_quality"] = lambda: forget_quality(forget_tr(model), forget_tr(retain))[
        "forget_quality"
    ]
    metric_functions["extraction_strength"] = lambda: float(
        losses(model, splits.forget_perturbed, "answer")[1]["extraction_strength"].mean()
    )
    metric_functions["exact_memorization"] = lambda: float(
        losses(model, splits.forget_perturbed, "answer")[1]["exact_memorization"].mean()
    )
    metric_functions["mia_min_k_auc"] = lambda: auc(model)
    metric_functions["mia_loss_auc"] = lambda: auc(model, "avg_loss")
    metric_functions["mia_zlib_auc"] = lambda: auc(model, "zlib")
    metric_functions["mia_min_k_plus_plus_auc"] = lambda: auc(model, "min_k_plus_plus")

    def privleak():
        unlearned, retrained = 1 - auc(model), 1 - auc(retain)
        return (unlearned - retrained) / (retrained + eps) * 100

    metric_functions["privleak"] = privleak
    return {name: function() for name, function in metric_functions.items()}


def main() -> None:
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    from medunlearn.evaluation.runner import RunnerConfig
    from medunlearn.models import build_tiny_llama
    from medunlearn.tofu import build_tofu_folder, evaluate_tofu, preset, tofu_examples

    work = tempfile.mkdtemp(prefix="bench-tofu-")
    source = build_tofu_folder(
        f"{work}/data", authors=AUTHORS, qa_per_author=QA_PER_AUTHOR, perturbed=PERTURBED
    )
    examples = tofu_examples(source, FORGET)
    from medunlearn.models import train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(
        examples["question"].tolist() + examples["answer"].tolist(), vocab_size=600
    )
    torch.manual_seed(0)
    model, retain = build_tiny_llama(tokenizer), build_tiny_llama(tokenizer)
    conventions = preset("open-unlearning").with_options(max_new_tokens=MAX_NEW_TOKENS)
    print(
        f"TOFU folder: {AUTHORS} authors x {QA_PER_AUTHOR} QA, {PERTURBED} perturbed answers; "
        f"{len(examples)} (question, answer variant) examples; max_new_tokens={MAX_NEW_TOKENS}"
    )

    start = time.perf_counter()
    summary = evaluate_tofu(
        model,
        source,
        FORGET,
        f"{work}/eval",
        tokenizer=tokenizer,
        retain_model=(retain, tokenizer),
        conventions=conventions,
        runner_config=RunnerConfig(batch_size=BATCH_SIZE, progress=False),
    )
    runner_seconds = time.perf_counter() - start

    start = time.perf_counter()
    baseline = baseline_metrics(model, retain, tokenizer, source, conventions)
    baseline_seconds = time.perf_counter() - start

    differences = {name: abs(value - summary["metrics"][name]) for name, value in baseline.items()}
    worst = max(differences, key=differences.get)
    print(f"runner (one pass):        {runner_seconds:7.1f} s for {len(baseline)} metrics")
    print(f"per-metric (re-created):  {baseline_seconds:7.1f} s")
    print(f"speed-up over the re-created structure: {baseline_seconds / runner_seconds:.1f}x")
    print(
        "note: the baseline re-creates OpenUnlearning's per-metric structure with medunlearn's kernels; "
        "it is not the reference.\nAgainst OpenUnlearning d3d7cf9 itself, run side by side: whole evaluation "
        "1.16-1.47x, metric stage 1.01-1.35x (docs/tofu.md, Speed)."
    )
    print(f"largest metric difference between the two: {differences[worst]:.2e} ({worst})")
    pairs = int(
        ((examples["set"] == "forget") & (examples["variant"] == "answer")).sum()
        * ((examples["set"] == "holdout") & (examples["variant"] == "answer")).sum()
    )
    # The two sides batch and pad differently, so float32 rounding differs; an MIA AUC moves by 1/pairs when
    # the order of one (forget, holdout) pair of near-tied scores flips.
    print(f"(one flipped forget/holdout pair moves an MIA AUC by 1/{pairs} = {1 / pairs:.2e})")


if __name__ == "__main__":
    main()
