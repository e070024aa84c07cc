"""TOFU metrics from the runner's stored outputs: no model here, so any metric can be recomputed later.

Definitions [ref: Maini et al. 2024, TOFU; OpenUnlearning ``src/evals/metrics``], with ``ε`` the convention's
denominator guard (1e-10 in the reference, 0 in ours) and ``L(y)`` the mean answer-token NLL of ``y``:

* Prob = mean over questions of ``exp(−L(answer))``; ``PARA_Prob`` / ``PERT_Prob`` the same for the
  paraphrased answer / the mean over the perturbed answers.
* Normalised Prob (real authors, world facts) = mean of ``p(a) / (p(a) + Σ_j p(w_j) + ε)``, ``p = exp(−L)``.
* ROUGE = mean ROUGE-L recall (``rouge_score``, stemmer on) of the greedy answer against the gold answer.
* Truth ratio per question ``TR = exp(−mean_j L(w_j)) / (exp(−L(c)) + ε)`` (the geometric mean of the
  perturbed answers' length-normalised probabilities over the correct one's); ``c`` is the paraphrased answer
  on forget / retain and the plain answer on real authors / world facts. Aggregated as
  ``mean(min(TR, 1/(TR + ε)))`` on forget and ``mean(max(0, 1 − TR))`` elsewhere.
* Forget quality = KS-test p-value of the forget TRs against the retain model's (``scipy.stats.ks_2samp``).
* Model utility = harmonic mean of the nine retain / real-authors / world-facts Prob (normalised for the last
  two), ROUGE and truth-ratio scores.
* Extraction strength and exact memorisation on the forget answers (token conventions in
  :mod:`medunlearn.tofu.conventions`); min-k% (k = 0.4) MIA AUC between forget and holdout answers, privleak
  against the retain model's AUC (0.5 when no retain model is given, the reference's ``ref_value``).
* The other MIA AUCs of the reference's TOFU list, forget vs holdout answers, each score loss-like: LOSS
  ``L(answer)``; zlib ``L(answer) / len(zlib(answer text))``; min-k%++ (k = 0.4) minus the mean of the lowest
  ``(log p(y_t) − μ_t) / sqrt(max(σ_t², floor))``, μ_t and σ_t² the mean and variance of ``log p`` under the
  model's next-token distribution (tokens as min-k%).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from medunlearn.errors import FileContentError, InputError
from medunlearn.metrics import mia, probability
from medunlearn.metrics.forget_quality import forget_quality
from medunlearn.metrics.model_utility import harmonic_mean_utility
from medunlearn.metrics.rouge import rouge_l
from medunlearn.tofu.conventions import TofuConventions
from medunlearn.utils.user_files import json_type_name

MIN_K = 0.4
UTILITY_COMPONENTS = (
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
# OpenUnlearning's metric name -> ours (the summary carries both).
REFERENCE_NAMES = {
    "forget_Q_A_Prob": "forget_prob",
    "forget_Q_A_PARA_Prob": "forget_paraphrased_prob",
    "forget_Q_A_PERT_Prob": "forget_perturbed_prob",
    "forget_Q_A_ROUGE": "forget_rouge",
    "forget_truth_ratio": "forget_truth_ratio",
    "forget_quality": "forget_quality",
    "retain_Q_A_Prob": "retain_prob",
    "retain_Q_A_PARA_Prob": "retain_paraphrased_prob",
    "retain_Q_A_PERT_Prob": "retain_perturbed_prob",
    "retain_Q_A_ROUGE": "retain_rouge",
    "retain_Truth_Ratio": "retain_truth_ratio",
    "ra_Q_A_Prob": "real_authors_prob",
    "ra_Q_A_Prob_normalised": "real_authors_normalised_prob",
    "ra_Q_A_PERT_Prob": "real_authors_perturbed_prob",
    "ra_Q_A_ROUGE": "real_authors_rouge",
    "ra_Truth_Ratio": "real_authors_truth_ratio",
    "wf_Q_A_Prob": "world_facts_prob",
    "wf_Q_A_Prob_normalised": "world_facts_normalised_prob",
    "wf_Q_A_PERT_Prob": "world_facts_perturbed_prob",
    "wf_Q_A_ROUGE": "world_facts_rouge",
    "wf_Truth_Ratio": "world_facts_truth_ratio",
    "model_utility": "model_utility",
    "extraction_strength": "extraction_strength",
    "exact_memorization": "exact_memorization",
    "mia_min_k": "mia_min_k_auc",
    "mia_min_k_plus_plus": "mia_min_k_plus_plus_auc",
    "mia_loss": "mia_loss_auc",
    "mia_zlib": "mia_zlib_auc",
    "privleak": "privleak",
}


def _drop_last_token(mask: np.ndarray) -> np.ndarray:
    """The mask without each row's last answer token (rows of one token keep it: nothing else to score)."""
    lengths = mask.sum(axis=1)
    keep = np.maximum(lengths - 1, 1)
    return np.arange(mask.shape[1])[None, :] < keep[:, None]


def token_statistics(outputs: pd.DataFrame, conventions: TofuConventions, answers=None) -> pd.DataFrame:
    """Per example: ``avg_loss`` (Prob's NLL), ``extraction_strength``, ``exact_memorization``, ``min_k``,
    ``min_k_plus_plus`` and, given the ``answers`` texts (same order), ``zlib``.

    ``outputs`` are the runner's teacher-forced outputs (``token_logprobs``, ``token_is_argmax`` and, for
    min-k%++, ``token_mean_logprob`` / ``token_std_logprob`` per example).
    """
    logprobs, mask = probability.pad_token_values(outputs["token_logprobs"].tolist())
    is_argmax, _ = probability.pad_token_values(outputs["token_is_argmax"].tolist(), dtype=bool)
    loss_mask = mask if conventions.score_eos else _drop_last_token(mask)
    token_mask = mask if conventions.tokenwise_score_eos else _drop_last_token(mask)
    n_tokens = token_mask.sum(axis=1)
    strength = probability.extraction_strength(np.where(token_mask, is_argmax, False), token_mask)
    if conventions.extraction_strength == "reference":
        # The reference loops k over 0..n-1 and keeps k = n - 1 when no suffix matches: ES >= 1/n.
        strength = np.maximum(strength, 1.0 / n_tokens)
    statistics = pd.DataFrame(
        {
            "example_id": outputs["example_id"].to_numpy(),
            "avg_loss": probability.mean_nll(logprobs, loss_mask),
            "extraction_strength": strength,
            "exact_memorization": probability.exact_memorization(
                np.where(token_mask, is_argmax, False), token_mask
            ),
            "min_k": min_k_score(logprobs, token_mask, MIN_K, conventions.min_k_count),
        }
    )
    if "token_mean_logprob" in outputs:
        mean, _ = probability.pad_token_values(outputs["token_mean_logprob"].tolist())
        std, _ = probability.pad_token_values(outputs["token_std_logprob"].tolist())
        scale = np.sqrt(np.maximum(np.square(std), conventions.variance_floor))
        standardised = np.where(token_mask, (logprobs - mean) / scale, 0.0)
        statistics["min_k_plus_plus"] = min_k_score(standardised, token_mask, MIN_K, conventions.min_k_count)
    if answers is not None:
        statistics["zlib"] = statistics["avg_loss"].to_numpy() / _zlib_lengths(answers)
    return statistics


def _zlib_lengths(texts) -> np.ndarray:
    import zlib

    return np.fromiter((max(len(zlib.compress(str(t).encode("utf-8"))), 1) for t in texts), dtype=np.float64)


def min_k_score(token_logprobs, mask, k: float = MIN_K, count: str = "ceil") -> np.ndarray:
    """Min-k% score (loss-like): minus the mean of the lowest log-probs, ceil(k·n) or max(1, floor(k·n)) of
    them.

    >>> min_k_score([[-0.1, -3.0, -1.0, -0.2, -0.5]], [[True] * 5], k=0.4, count="floor").tolist()
    [2.0]
    """
    if count == "ceil":
        return mia.min_k_score(token_logprobs, mask, k=k)
    values, mask = probability.check_token_matrix("token_logprobs", token_logprobs, mask)
    taken = np.maximum(1, np.floor(k * mask.sum(axis=1) + 1e-9)).astype(np.int64)
    ordered = np.sort(np.where(mask, values, np.inf), axis=1)
    take = np.arange(values.shape[1])[None, :] < taken[:, None]
    return -np.where(take, ordered, 0.0).sum(axis=1) / taken


def truth_ratio_per_question(correct_loss, wrong_loss, question_of_wrong, epsilon: float = 0.0) -> np.ndarray:
    """``exp(−mean_j L(w_j)) / (exp(−L(c)) + ε)`` per question; ``question_of_wrong`` maps each wrong answer
    to its question (0..n−1), so questions may have different numbers of wrong answers.

    >>> truth_ratio_per_question(np.log([2.0, 4.0]), np.log([4.0, 16.0, 8.0]), [0, 0, 1]).round(12).tolist()
    [0.25, 0.5]
    """
    correct_loss = np.asarray(correct_loss, dtype=np.float64)
    mean_wrong_loss = _mean_per_question(wrong_loss, question_of_wrong, len(correct_loss))
    return np.exp(-mean_wrong_loss) / (np.exp(-correct_loss) + epsilon)


def _mean_per_question(values, question, n: int) -> np.ndarray:
    question = np.asarray(question, dtype=np.int64)
    counts = np.bincount(question, minlength=n)
    if (counts == 0).any():
        raise InputError(f"question {int(np.flatnonzero(counts == 0)[0])} has no perturbed answer")
    return np.bincount(question, weights=np.asarray(values, dtype=np.float64), minlength=n) / counts


def aggregate_truth_ratio(ratios, mode: str, epsilon: float = 0.0) -> float:
    """``closer_to_1_better``: mean(min(TR, 1/(TR+ε))); ``true_better``: mean(max(0, 1 − TR)).

    >>> (
    ...     aggregate_truth_ratio([0.5, 2.0], "closer_to_1_better"),
    ...     aggregate_truth_ratio([0.5, 2.0], "true_better"),
    ... )
    (0.5, 0.25)
    """
    ratios = np.asarray(ratios, dtype=np.float64)
    if mode == "closer_to_1_better":
        return float(np.mean(np.minimum(ratios, 1.0 / (ratios + epsilon))))
    if mode == "true_better":
        return float(np.mean(np.maximum(0.0, 1.0 - ratios)))
    raise ValueError(f"mode must be 'closer_to_1_better' or 'true_better', got {mode!r}")


def normalised_probability(correct_loss, wrong_loss, question_of_wrong, epsilon: float = 0.0) -> np.ndarray:
    """``p(a) / (p(a) + Σ_j p(w_j) + ε)`` per question, ``p = exp(−L)``.

    >>> normalised_probability(-np.log([0.5]), -np.log([0.25, 0.25]), [0, 0]).tolist()
    [0.5]
    """
    correct = np.exp(-np.asarray(correct_loss, dtype=np.float64))
    question = np.asarray(question_of_wrong, dtype=np.int64)
    wrong = np.bincount(
        question, weights=np.exp(-np.asarray(wrong_loss, dtype=np.float64)), minlength=len(correct)
    )
    return correct / (correct + wrong + epsilon)


def cut_at_stop_strings(texts, stop_strings) -> list[str]:
    r"""Each text up to the first occurrence of any stop string, stripped (as the reference post-processes).

    >>> cut_at_stop_strings(["Paris.\n\nQuestion: next", " Rome "], ["\n\n", "Question:"])
    ['Paris.', 'Rome']
    """
    cut = pd.Series(list(texts), dtype=object).astype(str)
    for stop in stop_strings:
        if stop:
            cut = cut.str.split(stop, n=1, regex=False).str[0]
    return cut.str.strip().tolist()


def _set_rows(table: pd.DataFrame, set_name: str, variant: str) -> pd.DataFrame:
    rows = table[(table["set"] == set_name) & (table["variant"] == variant)]
    return rows.sort_values(["row", "variant_index"], kind="stable")


def set_scores(
    table: pd.DataFrame, set_name: str, conventions: TofuConventions, correct_variant: str
) -> dict:
    """Prob, paraphrased / perturbed Prob, normalised Prob and per-question truth ratios of one set."""
    eps = conventions.epsilon
    answer = _set_rows(table, set_name, "answer")
    n = len(answer)
    if n == 0:
        raise InputError(f"no examples of set {set_name!r}")
    perturbed = _set_rows(table, set_name, "perturbed")
    position = pd.Series(np.arange(n), index=answer["row"].to_numpy())
    question_of_wrong = position.loc[perturbed["row"].to_numpy()].to_numpy()
    correct = _set_rows(table, set_name, correct_variant)
    scores = {
        "prob": float(np.exp(-answer["avg_loss"].to_numpy()).mean()),
        "perturbed_prob": float(
            _mean_per_question(np.exp(-perturbed["avg_loss"].to_numpy()), question_of_wrong, n).mean()
        ),
        "truth_ratios": truth_ratio_per_question(
            correct["avg_loss"].to_numpy(), perturbed["avg_loss"].to_numpy(), question_of_wrong, eps
        ),
    }
    if correct_variant == "paraphrased":
        scores["paraphrased_prob"] = float(np.exp(-correct["avg_loss"].to_numpy()).mean())
    else:
        scores["normalised_prob"] = float(
            normalised_probability(
                answer["avg_loss"].to_numpy(), perturbed["avg_loss"].to_numpy(), question_of_wrong, eps
            ).mean()
        )
    return scores


def rouge_recall(predictions, references) -> np.ndarray:
    """ROUGE-L recall with the Porter stemmer, per pair."""
    return rouge_l(list(predictions), list(references), use_stemmer=True)["recall"]


def summarise_tofu(
    table: pd.DataFrame, conventions: TofuConventions, retain_table: pd.DataFrame | None = None
) -> dict:
    """Every TOFU metric (our names) from the per-example table of the evaluated model.

    ``table``: one row per (set, row, variant) with ``avg_loss``, ``extraction_strength``,
    ``exact_memorization``, ``min_k`` and, on ``answer`` rows of generated sets, ``rouge_recall``.
    ``retain_table``: the same statistics of the retain model (forget and holdout sets) for forget quality and
    privleak.
    """
    metrics: dict[str, float | None] = {}
    truth = {}
    for set_name, prefix, correct_variant, mode in (
        ("forget", "forget", "paraphrased", "closer_to_1_better"),
        ("retain", "retain", "paraphrased", "true_better"),
        ("real_authors", "real_authors", "answer", "true_better"),
        ("world_facts", "world_facts", "answer", "true_better"),
    ):
        scores = set_scores(table, set_name, conventions, correct_variant)
        truth[set_name] = scores.pop("truth_ratios")
        for key, value in scores.items():
            metrics[f"{prefix}_{key}"] = value
        metrics[f"{prefix}_truth_ratio"] = aggregate_truth_ratio(truth[set_name], mode, conventions.epsilon)
        answers = _set_rows(table, set_name, "answer")
        metrics[f"{prefix}_rouge"] = float(answers["rouge_recall"].mean())
    metrics["model_utility"] = harmonic_mean_utility([metrics[name] for name in UTILITY_COMPONENTS])
    forget_answers = _set_rows(table, "forget", "answer")
    metrics["extraction_strength"] = float(forget_answers["extraction_strength"].mean())
    metrics["exact_memorization"] = float(forget_answers["exact_memorization"].mean())
    holdout = _set_rows(table, "holdout", "answer")
    metrics["mia_min_k_auc"] = mia.mia_auc(forget_answers["min_k"], holdout["min_k"])
    for attack, column in (("loss", "avg_loss"), ("zlib", "zlib"), ("min_k_plus_plus", "min_k_plus_plus")):
        if column in table:
            metrics[f"mia_{attack}_auc"] = mia.mia_auc(forget_answers[column], holdout[column])
    reference_auc = 0.5
    metrics["forget_quality"] = None
    if retain_table is not None:
        # The reference tests 1/(TR + eps) of both models; KS is rank-based and that map strictly decreasing,
        # so the statistic and p-value are those of the TRs themselves.
        retain_forget = set_scores(retain_table, "forget", conventions, "paraphrased")
        metrics["forget_quality"] = forget_quality(truth["forget"], retain_forget["truth_ratios"])[
            "forget_quality"
        ]
        reference_auc = mia.mia_auc(
            _set_rows(retain_table, "forget", "answer")["min_k"],
            _set_rows(retain_table, "holdout", "answer")["min_k"],
        )
    metrics["retain_model_mia_min_k_auc"] = reference_auc if retain_table is not None else None
    # privleak with the convention's epsilon: (a - r) / (r + eps) * 100 with a = 1 - AUC, r = 1 - AUC_retain;
    # undefined (None) when the retain model's AUC is 1 and there is no epsilon.
    unlearned, retrained = 1.0 - metrics["mia_min_k_auc"], 1.0 - reference_auc
    denominator = retrained + conventions.epsilon
    metrics["privleak"] = float((unlearned - retrained) / denominator * 100.0) if denominator > 0 else None
    return metrics


def reference_summary(metrics: dict) -> dict:
    """The metrics under OpenUnlearning's names (its ``*_SUMMARY.json`` shape: name -> value)."""
    return {reference: metrics.get(ours) for reference, ours in REFERENCE_NAMES.items()}


def compare_summaries(
    ours: dict, reference: dict, sources: tuple[str, str] = ("ours", "reference")
) -> list[dict]:
    """Metric-by-metric comparison with a reference ``TOFU_SUMMARY.json`` (name -> value, or name ->
    ``{"agg_value": value}``). ``ours`` is our summary (or its ``open_unlearning`` part). One row per metric
    present in both: ``{"metric", "ours", "reference", "abs_difference"}``; metrics missing on one side are
    listed with ``None``. A value that is neither a number nor null is a :class:`FileContentError` naming
    its file (``sources``: the two files' names) and key.

    >>> compare_summaries({"forget_Q_A_Prob": 0.5}, {"forget_Q_A_Prob": {"agg_value": 0.25}, "privleak": 1.0})
    [{'metric': 'forget_Q_A_Prob', 'ours': 0.5, 'reference': 0.25, 'abs_difference': 0.25}, \
{'metric': 'privleak', 'ours': None, 'reference': 1.0, 'abs_difference': None}]
    """
    prefix = "open_unlearning." if isinstance(ours.get("open_unlearning"), dict) else ""
    ours = ours.get("open_unlearning", ours)
    rows = []
    for name in list(REFERENCE_NAMES) + sorted(set(reference) - set(REFERENCE_NAMES)):
        if name not in ours and name not in reference:
            continue
        theirs, key = reference.get(name), name
        if isinstance(theirs, dict):
            theirs, key = theirs.get("agg_value"), f"{name}.agg_value"
        theirs = _metric_value(theirs, sources[1], key)
        mine = _metric_value(ours.get(name), sources[0], prefix + name)
        difference = abs(mine - theirs) if mine is not None and theirs is not None else None
        rows.append({"metric": name, "ours": mine, "reference": theirs, "abs_difference": difference})
    return rows


def _metric_value(value, source: str, key: str) -> float | int | None:
    """A summary's metric: a finite number or null; else the file and key are named (a string "0.5" or a
    list was subtracted from a number: a TypeError)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FileContentError(source, None, key, f"expected a number or null, got {json_type_name(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # a whole number past any float (and its repr may be too long to print)
        raise FileContentError(source, None, key, "expected a number, got one past any float") from None
    if not finite:  # from Python; read_json refuses NaN and Infinity
        raise FileContentError(source, None, key, f"expected a finite number, got {value}")
    return value


__all__ = [
    "REFERENCE_NAMES",
    "compare_summaries",
    "UTILITY_COMPONENTS",
    "aggregate_truth_ratio",
    "cut_at_stop_strings",
    "min_k_score",
    "normalised_probability",
    "reference_summary",
    "rouge_recall",
    "set_scores",
    "summarise_tofu",
    "token_statistics",
    "truth_ratio_per_question",
]
