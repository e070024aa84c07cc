"""From stored per-example outputs to metrics: no model involved, so any metric can be recomputed later.

``per_example_metrics`` turns the runner's outputs into one row of numbers per example; ``summarise`` averages
them per population × QA type. Definitions of the AMNESIA metrics are ours (docs/benchmarks/amnesia.md,
"Metric formulas"):

- similarity s(pred, gold) = ROUGE-L F1 of the greedy answer against the gold answer (optionally averaged with
  an embedding cosine, see ``text_statistics``);
- MU (retained populations) = mean s per QA type, then the mean over QA types (the ``all`` row);
- AFE (forget populations) = clip(1 − s_after / s_before, 0, 1) with s the population's mean similarity,
  s_before from the model before unlearning; 1 − s_after without one;
- LS (forget populations) = mean over examples of the share of the patient's disease keywords that the answer
  contains and the question does not; DS = share of degenerate answers, with its components.

The formulas live in :mod:`medunlearn.metrics`; this module only reshapes the stored outputs and aggregates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from medunlearn.evaluation.populations import FORGET_HOLDOUT, FORGET_POPULATIONS, FORGET_SEEN, POPULATIONS
from medunlearn.metrics import answer_forgetting as afe
from medunlearn.metrics import mia, probability
from medunlearn.metrics.degeneration import DegenerationConfig, degeneration_components
from medunlearn.metrics.disease_leakage import leakage_per_example
from medunlearn.metrics.forget_quality import forget_quality
from medunlearn.metrics.model_utility import model_utility
from medunlearn.metrics.rouge import rouge_l
from medunlearn.metrics.similarity import answer_similarity
from medunlearn.metrics.truth_ratio import truth_ratio, truth_ratio_score

QA_TYPES_ALL = ("factual", "reasoning", "all")
MIA_ATTACKS = ("loss", "zlib", "min_k", "min_k_plus_plus")
# Cell metrics that are plain means over the cell's examples; the degeneration columns become rates.
MEAN_COLUMNS = (
    "similarity",
    "rouge_l_f1",
    "rouge_l_recall",
    "embedding_cosine",
    "prob",
    "loss",
    "exact_memorization",
    "extraction_strength",
    "answer_token_entropy",
)
RATE_COLUMNS = {
    "degenerate": "degeneration_score",
    "ds_empty": "ds_empty_rate",
    "ds_repetition": "ds_repetition_rate",
    "ds_non_word": "ds_non_word_rate",
    "ds_low_entropy": "ds_low_entropy_rate",
    "leakage": "leakage_score",
}


def probability_statistics(outputs: pd.DataFrame, answers, min_k: float = 0.4) -> dict[str, np.ndarray]:
    """Every probability-based per-example statistic, from the stored teacher-forced token arrays.

    The ragged per-example arrays are padded once into ``(n, max_tokens)`` matrices, the convention of
    :mod:`medunlearn.metrics.probability` and :mod:`medunlearn.metrics.mia`. MIA scores are loss-like
    (higher = less likely a member).
    """
    logprobs, mask = probability.pad_token_values(outputs["token_logprobs"].tolist())
    is_argmax, _ = probability.pad_token_values(outputs["token_is_argmax"].tolist(), dtype=bool)
    mean_logprob, _ = probability.pad_token_values(outputs["token_mean_logprob"].tolist())
    std_logprob, _ = probability.pad_token_values(outputs["token_std_logprob"].tolist())
    # A one-hot next-token distribution (a perfectly memorised token) has sigma 0 in float32; min-k%++ is then
    # 0/0 for that token. A tiny floor makes it z = 0 there (the token is exactly as likely as expected).
    std_logprob = np.maximum(std_logprob, 1e-12)
    loss = probability.mean_nll(logprobs, mask)
    return {
        "num_answer_tokens": mask.sum(axis=1),
        "loss": loss,
        "prob": probability.answer_probability(logprobs, mask),
        "exact_memorization": probability.exact_memorization(is_argmax, mask),
        "extraction_strength": probability.extraction_strength(is_argmax, mask),
        "answer_token_entropy": probability.mean_token_entropy(np.maximum(-mean_logprob, 0.0), mask),
        "mia_loss": mia.loss_score(logprobs, mask),
        "mia_zlib": mia.zlib_score(logprobs, mask, list(answers)),
        "mia_min_k": mia.min_k_score(logprobs, mask, k=min_k),
        "mia_min_k_plus_plus": mia.min_k_plus_plus_score(logprobs, mask, mean_logprob, std_logprob, k=min_k),
    }


def text_statistics(
    examples: pd.DataFrame, predictions: list[str], *, use_embedding: bool = False
) -> dict[str, np.ndarray]:
    """Every text-based per-example statistic of the generated answers.

    similarity = :func:`medunlearn.metrics.similarity.answer_similarity` (ROUGE-L F1, and with
    ``use_embedding`` its mean with the offline MiniLM embedding cosine); ROUGE-L recall is TOFU's ROUGE;
    leakage is computed for forget-population rows only (NaN elsewhere); the degeneration flags are the
    components of :func:`medunlearn.metrics.degeneration.degeneration_components` against the thresholds of
    ``DegenerationConfig()``, so cell means are the rates ``degeneration()`` reports.
    """
    answers = examples["answer"].tolist()
    similarity = answer_similarity(predictions, answers, use_embedding=use_embedding)
    config = DegenerationConfig()
    parts = degeneration_components(predictions, config=config)
    columns = {
        "rouge_l_f1": similarity["rouge_l"],
        "rouge_l_recall": rouge_l(predictions, answers)["recall"],
        "similarity": similarity["similarity"],
        "degenerate": parts["degenerate"],
        "ds_empty": parts["empty"],
        "ds_repetition": parts["repetition"] >= config.repetition_threshold,
        "ds_non_word": parts["non_word"] >= config.non_word_threshold,
        "ds_low_entropy": parts["token_entropy"] < config.entropy_threshold,
    }
    is_forget = examples["population"].isin(FORGET_POPULATIONS).to_numpy()
    leakage = np.full(len(examples), np.nan)
    if is_forget.any():
        leakage[is_forget] = leakage_per_example(
            [p for p, keep in zip(predictions, is_forget) if keep],
            [list(k) for k in examples.loc[is_forget, "disease_keywords"]],
            examples.loc[is_forget, "question"].tolist(),
        )
    columns["leakage"] = leakage
    if use_embedding:
        columns["embedding_cosine"] = similarity["embedding_cosine"]
    return columns


def truth_ratios(variant_outputs: pd.DataFrame) -> pd.Series:
    """TOFU truth ratio per example that has a paraphrased and at least one perturbed answer (by example_id).

    Each answer's probability is TOFU's length-normalised ``answer_probability``; the perturbed probabilities
    of an example are averaged, as :func:`medunlearn.metrics.truth_ratio.truth_ratio` does.
    """
    if variant_outputs is None or variant_outputs.empty:
        return pd.Series(dtype=np.float64)
    logprobs, mask = probability.pad_token_values(variant_outputs["token_logprobs"].tolist())
    probs = pd.Series(probability.answer_probability(logprobs, mask), index=variant_outputs.index)
    variant = variant_outputs["variant"].astype(str)
    paraphrased = probs[variant == "paraphrased"].groupby(variant_outputs["example_id"]).mean()
    perturbed = probs[variant.str.startswith("perturbed_")].groupby(variant_outputs["example_id"]).mean()
    both = paraphrased.index.intersection(perturbed.index)
    if both.empty:
        return pd.Series(dtype=np.float64)
    ratios = truth_ratio(paraphrased[both].to_numpy(), perturbed[both].to_numpy()[:, None])
    return pd.Series(ratios, index=both)


def per_example_metrics(
    examples: pd.DataFrame,
    outputs: pd.DataFrame,
    variant_outputs: pd.DataFrame | None = None,
    *,
    use_embedding: bool = False,
) -> pd.DataFrame:
    """One row per example: the example's fields plus every per-example statistic.

    ``variant_outputs`` (``runner.read_answer_variants``) adds ``truth_ratio`` where an example has a
    paraphrased and perturbed answers. ``use_embedding`` adds the embedding cosine to the answer similarity
    (see ``text_statistics``).

    ``outputs`` must be ``runner.read_outputs(folder, examples["example_id"])`` (same order). Columns of a
    pass that was not run (the retain model runs no generation) are simply absent.
    """
    if not np.array_equal(examples["example_id"].to_numpy(), outputs["example_id"].to_numpy()):
        raise ValueError(
            "outputs are not aligned with examples (read them with read_outputs(dir, example_ids))"
        )
    table = examples.reset_index(drop=True).copy()
    if "token_logprobs" in outputs:
        for name, values in probability_statistics(outputs, table["answer"]).items():
            table[name] = values
    ratios = truth_ratios(variant_outputs)
    if not ratios.empty:
        table["truth_ratio"] = table["example_id"].map(ratios).astype(np.float64)
    if "generated_text" in outputs:
        predictions = outputs["generated_text"].fillna("").tolist()
        table["generated_text"] = predictions
        for name, values in text_statistics(table, predictions, use_embedding=use_embedding).items():
            table[name] = values
    return table


def _nanmean(values) -> float | None:
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0 or np.isnan(values).all():
        return None
    return float(np.nanmean(values))


def _cell(rows: pd.DataFrame) -> dict:
    cell = {"n": len(rows)}
    for column in MEAN_COLUMNS:
        if column in rows:
            cell[column] = _nanmean(rows[column])
    for column, name in RATE_COLUMNS.items():
        if column in rows:
            cell[name] = _nanmean(rows[column].astype(np.float64))
    return cell


def summarise(
    model: pd.DataFrame, before: pd.DataFrame | None = None, retain: pd.DataFrame | None = None
) -> dict:
    """Metrics per population × QA type, plus the membership-inference section.

    Args:
        model: ``per_example_metrics`` of the evaluated model.
        before: the same for the model before unlearning (forget populations), for AFE.
        retain: the same for a model trained without the forget patients (teacher-forced only), for privleak.
    """
    populations: dict[str, dict] = {}
    for population in POPULATIONS:
        rows = model[model["population"] == population]
        if rows.empty:
            continue
        cells = {qa_type: _cell(rows[rows["qa_type"] == qa_type]) for qa_type in QA_TYPES_ALL[:2]}
        cells = {k: v for k, v in cells.items() if v["n"]}
        cells["all"] = _cell(rows)
        if population in FORGET_POPULATIONS:
            _add_forgetting(cells, rows, before)
        else:
            _add_model_utility(cells, rows)
        _add_truth_ratio(cells, rows, population)
        populations[population] = cells
    return {
        "populations": populations,
        "membership_inference": _membership_inference(model, retain),
        "forget_quality": _forget_quality(model, retain),
    }


def _add_truth_ratio(cells: dict, rows: pd.DataFrame, population: str) -> None:
    """TOFU's truth-ratio score: ``closer_to_1_better`` on forget populations, ``true_better`` on retained
    ones."""
    if "truth_ratio" not in rows:
        return
    mode = "closer_to_1_better" if population in FORGET_POPULATIONS else "true_better"
    for qa_type, cell in cells.items():
        selected = rows if qa_type == "all" else rows[rows["qa_type"] == qa_type]
        values = selected["truth_ratio"].dropna().to_numpy()
        cell["truth_ratio"] = truth_ratio_score(values, mode) if len(values) else None


def _forget_quality(model: pd.DataFrame, retain: pd.DataFrame | None) -> dict | None:
    """TOFU forget quality: KS test of forget-seen truth ratios, evaluated model vs retain model (None
    without)."""
    if retain is None or "truth_ratio" not in model or "truth_ratio" not in retain:
        return None
    ours = model.loc[model["population"] == FORGET_SEEN, "truth_ratio"].dropna()
    theirs = retain.loc[retain["population"] == FORGET_SEEN, "truth_ratio"].dropna()
    if ours.empty or theirs.empty:
        return None
    return forget_quality(ours.to_numpy(), theirs.to_numpy())


def _add_model_utility(cells: dict, rows: pd.DataFrame) -> None:
    """MU per QA type (its mean similarity) and overall (the mean over QA types), see ``model_utility``."""
    if "similarity" not in rows:
        return
    result = model_utility(rows["similarity"].to_numpy(), rows["qa_type"].tolist())
    for qa_type, value in result["per_type"].items():
        if qa_type in cells:
            cells[qa_type]["model_utility"] = value
    cells["all"]["model_utility"] = result["model_utility"]


def _add_forgetting(cells: dict, rows: pd.DataFrame, before: pd.DataFrame | None) -> None:
    """AFE per cell (see ``answer_forgetting``); the before model's rows are the same examples, paired by
    id."""
    if "similarity" not in rows:
        return
    before_similarity = None
    if before is not None and "similarity" in before:
        before_similarity = before.set_index("example_id")["similarity"]
    for qa_type, cell in cells.items():
        selected = rows if qa_type == "all" else rows[rows["qa_type"] == qa_type]
        paired = (
            None if before_similarity is None else before_similarity.loc[selected["example_id"]].to_numpy()
        )
        result = afe.answer_forgetting(selected["similarity"].to_numpy(), paired)
        cell["answer_forgetting"] = result["answer_forgetting"]
        if paired is not None:
            cell["similarity_before"] = result["mean_before"]


def _membership_inference(model: pd.DataFrame, retain: pd.DataFrame | None) -> dict:
    """MIA AUC (forget seen = members vs forget holdout = non-members) and MUSE privleak against the retain
    model.

    AUC and privleak follow :mod:`medunlearn.metrics.mia` (AUC of telling non-members by a loss-like score;
    privleak 0 when the unlearned model is as ignorant of the forget patients as a model that never saw them).
    """
    section: dict = {}

    def aucs(table: pd.DataFrame) -> dict | None:
        seen, holdout = (
            table[table["population"] == FORGET_SEEN],
            table[table["population"] == FORGET_HOLDOUT],
        )
        if seen.empty or holdout.empty or "mia_loss" not in table:
            return None
        return {
            attack: mia.mia_auc(seen[f"mia_{attack}"], holdout[f"mia_{attack}"]) for attack in MIA_ATTACKS
        }

    model_auc = aucs(model)
    if model_auc is None:
        return section
    section["auc"] = model_auc
    retain_auc = aucs(retain) if retain is not None else None
    if retain_auc is not None:
        section["auc_retain_model"] = retain_auc
        section["privleak"] = {a: _privleak_or_none(model_auc[a], retain_auc[a]) for a in MIA_ATTACKS}
    return section


def _privleak_or_none(auc_model: float, auc_retain: float) -> float | None:
    try:
        return mia.privleak(auc_model, auc_retain)
    except ValueError:  # the retain model's AUC is 1: privleak is undefined
        return None
