"""On one tiny model and one TOFU-format folder, every metric equals a direct computation from its definition.

The direct computation scores each (question, answer) alone: one unpadded forward pass, plain loops, the
reference's formulas written out (scipy's hmean and ks_2samp, sklearn's roc_auc_score, rouge_score).
"""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
import torch

from medunlearn.evaluation.runner import RunnerConfig
from medunlearn.tofu.conventions import preset
from medunlearn.tofu.data import load_tofu
from medunlearn.tofu.evaluate import evaluate_tofu, score_tofu
from medunlearn.tofu.scoring import REFERENCE_NAMES
from medunlearn.tofu.synthetic import build_tofu_configs, build_tofu_folder

FOLDER_ARGS = {"authors": 10, "qa_per_author": 3, "perturbed": 2, "options": 3, "seed": 1}
MAX_NEW_TOKENS = 10


def _texts():
    configs = build_tofu_configs(**FOLDER_ARGS)
    texts = []
    for rows in configs.values():
        for row in rows:
            texts += [row["question"], row["answer"], row.get("paraphrased_answer", "")]
            texts += list(row.get("perturbed_answer", []))
    return texts


def _train_briefly(model, tokenizer, texts, steps: int, seed: int):
    """A few optimiser steps on the QA texts, so generations and probabilities are not uniform noise."""
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    model.train()
    for _ in range(steps):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return model


@pytest.fixture(scope="module")
def tofu_data(tmp_path_factory):
    from medunlearn.models import train_bpe_tokenizer

    folder = build_tofu_folder(tmp_path_factory.mktemp("tofu") / "data", **FOLDER_ARGS)
    return folder, train_bpe_tokenizer(_texts(), vocab_size=300)


@pytest.fixture(scope="module")
def untrained_model(tofu_data):
    from medunlearn.models import build_tiny_llama

    torch.manual_seed(0)
    return build_tiny_llama(tofu_data[1])


@pytest.fixture(scope="module")
def tofu_setup(tofu_data):
    """A model trained a little on the evaluated QA in chat form, and a retain model that never saw the forget
    set."""
    from medunlearn.models import build_tiny_llama

    folder, tokenizer = tofu_data
    torch.manual_seed(0)
    configs = build_tofu_configs(**FOLDER_ARGS)
    system = [{"role": "system", "content": preset("open-unlearning").system_prompt}]
    seen = [  # rendered as both presets render (without and with the reference's system prompt)
        tokenizer.apply_chat_template(
            start
            + [{"role": "user", "content": r["question"]}, {"role": "assistant", "content": r["answer"]}],
            tokenize=False,
        )
        for name in ("forget10", "retain_perturbed", "real_authors", "world_facts")  # the evaluated rows only
        for r in configs[name]
        for start in ([], system)
    ]
    model = _train_briefly(build_tiny_llama(tokenizer), tokenizer, seen, steps=100, seed=0)
    retain = build_tiny_llama(tokenizer)  # never saw the forget set (nor anything else)
    return folder, model, retain, tokenizer


def _direct(model, tokenizer, conventions, question, answer, vocab_moments=False):
    """(token log-probs incl. the EOS, argmax flags) of one answer, and the prompt ids; with ``vocab_moments``
    also the mean and variance of log p under each position's next-token distribution."""
    chat = [{"role": "user", "content": question}]
    if conventions.system_prompt:
        chat = [{"role": "system", "content": conventions.system_prompt}, *chat]
    prompt = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    full_ids = tokenizer(prompt + answer + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([full_ids])).logits[0].double()
    start = len(prompt_ids)
    targets = torch.tensor(full_ids[start:])
    logprobs = logits.log_softmax(-1)[start - 1 : len(full_ids) - 1]
    token_logprobs = logprobs.gather(1, targets[:, None]).squeeze(1).numpy()
    is_argmax = (logprobs.argmax(-1) == targets).numpy()
    if vocab_moments:
        mu = (logprobs.exp() * logprobs).sum(-1)
        variance = (logprobs.exp() * logprobs.square()).sum(-1) - mu.square()
        return token_logprobs, is_argmax, mu.numpy(), variance.numpy()
    return token_logprobs, is_argmax, prompt_ids


def _direct_generation(model, tokenizer, prompt_ids, max_new_tokens):
    with torch.no_grad():
        output = model.generate(
            torch.tensor([prompt_ids]),
            attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    return tokenizer.decode(output[0, len(prompt_ids) :], skip_special_tokens=True).strip()


def _direct_metrics(model, tokenizer, retain, folder, conventions):
    """Every TOFU metric, the reference's way: each metric on its own rows, one example at a time."""
    from rouge_score import rouge_scorer
    from scipy.stats import hmean, ks_2samp
    from sklearn.metrics import roc_auc_score

    eps = conventions.epsilon
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)

    def avg_loss(m, q, a):
        lp, _, _ = _direct(m, tokenizer, conventions, q, a)
        lp = lp if conventions.score_eos else lp[:-1]
        return -lp.mean()

    def tokenwise(m, q, a):
        lp, hit, _ = _direct(m, tokenizer, conventions, q, a)
        if not conventions.tokenwise_score_eos:
            lp, hit = lp[:-1], hit[:-1]
        n = len(lp)
        for k in range(n + 1):  # smallest k whose suffix is reproduced
            if hit[k:].all():
                break
        if conventions.extraction_strength == "reference":
            k = min(k, n - 1)
        count = max(1, int(n * 0.4)) if conventions.min_k_count == "floor" else int(np.ceil(n * 0.4))
        return 1 - k / n, hit.mean(), -np.sort(lp)[:count].mean()

    def truth_ratios(m, rows, correct_key):
        ratios = []
        for row in rows:
            correct = np.exp(-avg_loss(m, row["question"], row[correct_key]))
            wrong = np.exp(-np.mean([avg_loss(m, row["question"], w) for w in row["perturbed_answer"]]))
            ratios.append(wrong / (correct + eps))
        return np.array(ratios)

    out = {}
    sets = {
        "forget": "forget10_perturbed",
        "retain": "retain_perturbed",
        "real_authors": "real_authors_perturbed",
        "world_facts": "world_facts_perturbed",
    }
    tr = {}
    for name, config in sets.items():
        rows = load_tofu(folder, config).to_list()
        out[f"{name}_prob"] = np.mean([np.exp(-avg_loss(model, r["question"], r["answer"])) for r in rows])
        out[f"{name}_perturbed_prob"] = np.mean(
            [
                np.mean([np.exp(-avg_loss(model, r["question"], w)) for w in r["perturbed_answer"]])
                for r in rows
            ]
        )
        recalls = []
        for r in rows:
            _, _, prompt_ids = _direct(model, tokenizer, conventions, r["question"], r["answer"])
            generated = _direct_generation(model, tokenizer, prompt_ids, conventions.max_new_tokens)
            recalls.append(scorer.score(r["answer"], generated)["rougeL"].recall)
        out[f"{name}_rouge"] = np.mean(recalls)
        if "paraphrased_answer" in rows[0]:
            out[f"{name}_paraphrased_prob"] = np.mean(
                [np.exp(-avg_loss(model, r["question"], r["paraphrased_answer"])) for r in rows]
            )
            tr[name] = truth_ratios(model, rows, "paraphrased_answer")
        else:
            tr[name] = truth_ratios(model, rows, "answer")
            normalised = []
            for r in rows:
                correct = np.exp(-avg_loss(model, r["question"], r["answer"]))
                wrong = sum(np.exp(-avg_loss(model, r["question"], w)) for w in r["perturbed_answer"])
                normalised.append(correct / (correct + wrong + eps))
            out[f"{name}_normalised_prob"] = np.mean(normalised)
        if name == "forget":
            out["forget_truth_ratio"] = np.mean(np.minimum(tr[name], 1 / (tr[name] + eps)))
        else:
            out[f"{name}_truth_ratio"] = np.mean(np.maximum(0, 1 - tr[name]))
    out["model_utility"] = hmean(
        [
            out[k]
            for k in (
                "retain_prob",
                "retain_rouge",
                "retain_truth_ratio",
                "real_authors_normalised_prob",
                "real_authors_rouge",
                "real_authors_truth_ratio",
                "world_facts_normalised_prob",
                "world_facts_rouge",
                "world_facts_truth_ratio",
            )
        ]
    )
    forget_rows = load_tofu(folder, "forget10_perturbed").to_list()
    holdout_rows = load_tofu(folder, "holdout10").to_list()
    stats = np.array([tokenwise(model, r["question"], r["answer"]) for r in forget_rows])
    out["extraction_strength"], out["exact_memorization"] = stats[:, 0].mean(), stats[:, 1].mean()

    def auc(m, score=lambda m, r: tokenwise(m, r["question"], r["answer"])[2]):
        forget_scores = [score(m, r) for r in forget_rows]
        holdout_scores = [score(m, r) for r in holdout_rows]
        labels = [0] * len(forget_scores) + [1] * len(holdout_scores)
        return roc_auc_score(labels, forget_scores + holdout_scores)

    def min_k_plus_plus(m, r):
        lp, _, mu, variance = _direct(
            m, tokenizer, conventions, r["question"], r["answer"], vocab_moments=True
        )
        if not conventions.tokenwise_score_eos:
            lp, mu, variance = lp[:-1], mu[:-1], variance[:-1]
        z = (lp - mu) / np.sqrt(np.maximum(variance, conventions.variance_floor))
        count = (
            max(1, int(len(z) * 0.4)) if conventions.min_k_count == "floor" else int(np.ceil(len(z) * 0.4))
        )
        return -np.mean(np.sort(z)[:count])

    out["mia_min_k_auc"] = auc(model)
    out["mia_loss_auc"] = auc(model, lambda m, r: avg_loss(m, r["question"], r["answer"]))
    out["mia_zlib_auc"] = auc(
        model, lambda m, r: avg_loss(m, r["question"], r["answer"]) / len(zlib.compress(r["answer"].encode()))
    )
    out["mia_min_k_plus_plus_auc"] = auc(model, min_k_plus_plus)
    retain_auc = auc(retain)
    out["privleak"] = ((1 - out["mia_min_k_auc"]) - (1 - retain_auc)) / ((1 - retain_auc) + eps) * 100
    retain_tr = truth_ratios(retain, forget_rows, "paraphrased_answer")
    out["forget_quality"] = ks_2samp(1 / (tr["forget"] + 1e-10), 1 / (retain_tr + 1e-10)).pvalue
    return out


@pytest.mark.slow
@pytest.mark.parametrize("preset_name", ["open-unlearning", "medunlearn"])
def test_every_metric_equals_its_direct_computation(tofu_setup, tmp_path, preset_name):
    folder, model, retain, tokenizer = tofu_setup
    conventions = preset(preset_name).with_options(max_new_tokens=MAX_NEW_TOKENS)
    summary = evaluate_tofu(
        model,
        folder,
        "forget10",
        tmp_path / "eval",
        tokenizer=tokenizer,
        retain_model=(retain, tokenizer),
        conventions=conventions,
        runner_config=RunnerConfig(batch_size=7, progress=False),
    )
    expected = _direct_metrics(model, tokenizer, retain, folder, conventions)
    metrics = summary["metrics"]
    assert set(expected) <= set(metrics)
    for name, value in expected.items():
        assert metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
    # not a degenerate check: the model answers some questions and prefers some correct answers
    assert min(metrics[f"{name}_rouge"] for name in ("forget", "retain", "real_authors", "world_facts")) > 0
    assert 0 < metrics["model_utility"] < 1
    assert 0 < metrics["forget_truth_ratio"] < 1 and 0 < metrics["forget_quality"] <= 1
    for reference_name, ours in REFERENCE_NAMES.items():
        assert summary["open_unlearning"][reference_name] == metrics[ours]


def test_scores_are_recomputed_from_the_stored_outputs_alone(tofu_data, untrained_model, tmp_path):
    (folder, tokenizer), model = tofu_data, untrained_model
    conventions = preset("open-unlearning").with_options(max_new_tokens=4)
    first = evaluate_tofu(
        model,
        folder,
        "forget10",
        tmp_path / "eval",
        tokenizer=tokenizer,
        conventions=conventions,
        runner_config=RunnerConfig(batch_size=16, progress=False),
    )
    (tmp_path / "eval" / "summary.json").unlink()
    again = score_tofu(tmp_path / "eval")
    assert again == json.loads(json.dumps(first))
    assert again["metrics"]["forget_quality"] is None  # no retain model: no forget quality
    assert again["conventions"]["system_prompt"] == "You are a helpful assistant."


def test_one_teacher_forced_row_per_answer_variant_and_one_generation_per_question(
    tofu_data, untrained_model, tmp_path
):
    import pandas as pd

    (folder, tokenizer), model = tofu_data, untrained_model
    evaluate_tofu(
        model,
        folder,
        "forget10",
        tmp_path / "eval",
        tokenizer=tokenizer,
        conventions=preset("medunlearn").with_options(max_new_tokens=2),
        runner_config=RunnerConfig(batch_size=64, progress=False),
    )
    examples = pd.read_parquet(tmp_path / "eval" / "examples.parquet")
    forget = load_tofu(folder, "forget10_perturbed").to_list()
    per_question = 1 + 1 + FOLDER_ARGS["perturbed"]
    assert (examples["set"] == "forget").sum() == len(forget) * per_question
    manifest = json.loads((tmp_path / "eval" / "outputs" / "model-questions" / "manifest.json").read_text())
    generated = sum(
        len(load_tofu(folder, c))
        for c in ("forget10_perturbed", "retain_perturbed", "real_authors_perturbed", "world_facts_perturbed")
    )
    assert manifest["batches"]["generation"] == int(np.ceil(generated / 64))


def test_an_interrupted_evaluation_resumes_to_the_same_summary(tofu_data, untrained_model, tmp_path):
    (folder, tokenizer), model = tofu_data, untrained_model
    conventions = preset("medunlearn").with_options(max_new_tokens=3)
    whole = evaluate_tofu(
        model,
        folder,
        "forget10",
        tmp_path / "whole",
        tokenizer=tokenizer,
        conventions=conventions,
        runner_config=RunnerConfig(batch_size=8, progress=False),
    )
    stopped = evaluate_tofu(
        model,
        folder,
        "forget10",
        tmp_path / "cut",
        tokenizer=tokenizer,
        conventions=conventions,
        runner_config=RunnerConfig(batch_size=8, progress=False, stop_after_batches=1),
    )
    assert stopped == {} and not json.loads((tmp_path / "cut" / "run.json").read_text())["complete"]
    resumed = evaluate_tofu(
        model,
        folder,
        "forget10",
        tmp_path / "cut",
        tokenizer=tokenizer,
        conventions=conventions,
        runner_config=RunnerConfig(batch_size=8, progress=False),
    )
    assert resumed["metrics"] == whole["metrics"]  # same batch plan, same kernels: bit for bit


def test_outputs_of_another_prompt_rendering_are_never_reused(tofu_data, untrained_model, tmp_path):
    from medunlearn.evaluation.runner import StaleOutputsError

    (folder, tokenizer), model = tofu_data, untrained_model
    quiet = RunnerConfig(batch_size=64, progress=False)
    ours = preset("medunlearn").with_options(max_new_tokens=2)
    evaluate_tofu(
        model,
        folder,
        "forget10",
        tmp_path / "eval",
        tokenizer=tokenizer,
        conventions=ours,
        runner_config=quiet,
    )
    reference_rendering = preset("open-unlearning").with_options(max_new_tokens=2)  # same runner settings
    with pytest.raises(StaleOutputsError):
        evaluate_tofu(
            model,
            folder,
            "forget10",
            tmp_path / "eval",
            tokenizer=tokenizer,
            conventions=reference_rendering,
            runner_config=quiet,
        )
    # scoring-only conventions reuse the outputs: a stop string is applied when scoring
    again = evaluate_tofu(
        model,
        folder,
        "forget10",
        tmp_path / "eval",
        tokenizer=tokenizer,
        conventions=ours.with_options(stop_strings=("\n",)),
        runner_config=quiet,
    )
    assert again["conventions"]["stop_strings"] == ["\n"]
