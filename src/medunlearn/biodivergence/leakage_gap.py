"""The leakage gap: each baseline trained and scored on both variants, and pair-level − v1.0 per metric.

One abstract yields many pairs, so on the legacy pair-level split most test pairs share an article with
train, and a model that memorises articles looks better there than on the article-disjoint v1.0 split. The
gap ``G_m = m(pair-level test) − m(v1.0 test)`` of every metric ``m`` (the ``contextual_contradiction``
scores) measures that; ``G_m > 0`` means the leaky split flatters the system.

Interval [ours] (docs/biodivergence.md, "The leakage gap"): pairs that share an article are not independent,
so the bootstrap resamples *articles*, not pairs. Each resample draws the A articles of both test sets
(their union: the two test sets may share articles, and one draw serves both) with replacement, giving
counts ``w_x``; a pair (a, b) enters with weight ``w_a · w_b`` (the vertex bootstrap for dyadic data,
Snijders & Borgatti 1999). Every metric is a ratio of sums over pairs, so each resample recomputes it from
``w``-weighted sums of per-pair counts (:func:`pair_components`, :func:`weighted_scores`), on both test
sets, and takes the difference. The interval is the percentile interval at ``level`` over ``n_resamples``
resamples from ``numpy.random.default_rng(seed)`` (2,000, 95%, seed 0 by default; resamples where a test set
gets no weight drop out). The verdict: **"the gap appears"** only when the whole interval lies above 0,
"opposite" when it lies below 0, else "not distinguishable at this size". The product weights make the
interval somewhat wider than a pair bootstrap would (conservative when articles have few pairs). The
interval is conditional on the trained models: it covers which pairs were tested, not the training seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from medunlearn.biodivergence.audit import pairlevel_leakage
from medunlearn.biodivergence.evaluate import references_of
from medunlearn.errors import InputError
from medunlearn.metrics.bootstrap import BootstrapConfig, resample_weights
from medunlearn.metrics.contextual_contradiction import (
    _UNPARSEABLE,
    SPAN_KEYS,
    _normalise_spans,
    check_inputs,
    parse_prediction,
    span_token_f1,
)
from medunlearn.metrics.rouge import rouge_l
from medunlearn.ontology.biodivergence import AXIS_IDS, CONFLICT_TYPE_IDS, CONTEXTUAL_CONTRADICTION

GAP_METRICS: tuple[str, ...] = (
    "accuracy",
    "macro_f1",
    "contextual_contradiction_f1",
    "axis_micro_f1",
    "axis_macro_f1",
    "confounder_accuracy",
    "reconciliation_rougeL",
    "evidence_f1",
    "evidence_exact_match",
)
VARIANTS = ("v1.0-pairlevel", "v1.0")
APPEARS, OPPOSITE, NOT_DISTINGUISHABLE = "the gap appears", "opposite", "not distinguishable at this size"
_C, _A = len(CONFLICT_TYPE_IDS), len(AXIS_IDS)
# Column blocks of the per-pair component matrix.
_BLOCKS = {
    "correct": (0, 1),
    "class_tp": (1, 1 + _C),
    "class_predicted": (1 + _C, 1 + 2 * _C),
    "class_gold": (1 + 2 * _C, 1 + 3 * _C),
    "axis_tp": (1 + 3 * _C, 1 + 3 * _C + _A),
    "axis_predicted": (1 + 3 * _C + _A, 1 + 3 * _C + 2 * _A),
    "axis_gold": (1 + 3 * _C + 2 * _A, 1 + 3 * _C + 3 * _A),
}
_TAIL = 1 + 3 * _C + 3 * _A
_BLOCKS |= {
    name: (_TAIL + i, _TAIL + i + 1)
    for i, name in enumerate(("confounder", "rouge", "evidence_f1", "evidence_exact", "count"))
}


def pair_components(predictions, references) -> np.ndarray:
    """Per pair, every count the ``contextual_contradiction`` scores sum (n × k; column blocks in
    ``_BLOCKS``), with the metric's own parsing, ROUGE-L and span F1."""
    predictions, gold = check_inputs(predictions, references)
    n = len(gold)
    pred = [(parse_prediction(p) or _UNPARSEABLE) if isinstance(p, str) else p for p in predictions]
    parsed = np.array([p is not _UNPARSEABLE for p in pred])
    out = np.zeros((n, _TAIL + 5))
    rows = np.arange(n)

    def block(name: str) -> np.ndarray:
        start, stop = _BLOCKS[name]
        return out[:, start:stop]

    class_index = {name: i for i, name in enumerate(CONFLICT_TYPE_IDS)}
    gold_class = np.array([class_index[g["conflict_type"]] for g in gold])
    pred_class = np.array([class_index.get(p["conflict_type"], -1) for p in pred])
    correct = pred_class == gold_class
    block("correct")[:, 0] = correct
    block("class_gold")[rows, gold_class] = 1
    block("class_predicted")[rows[pred_class >= 0], pred_class[pred_class >= 0]] = 1
    block("class_tp")[rows[correct], gold_class[correct]] = 1
    axis_index = {name: i for i, name in enumerate(AXIS_IDS)}
    for i, (p, g) in enumerate(zip(pred, gold)):
        block("axis_predicted")[i, [axis_index[a] for a in set(p["axes"])]] = 1
        block("axis_gold")[i, [axis_index[a] for a in set(g["axes"])]] = 1
    block("axis_tp")[:] = block("axis_predicted") * block("axis_gold")
    block("confounder")[:, 0] = [
        p["dominant_confounder"] == g["dominant_confounder"] for p, g in zip(pred, gold)
    ]
    block("rouge")[:, 0] = rouge_l([p["reconciliation"] for p in pred], [g["reconciliation"] for g in gold])[
        "f1"
    ]
    predicted_spans = [p[key] for key in SPAN_KEYS for p in pred]
    gold_spans = [g[key] for key in SPAN_KEYS for g in gold]
    span_f1 = span_token_f1(predicted_spans, gold_spans).reshape(len(SPAN_KEYS), n)
    exact = np.array(_normalise_spans(predicted_spans)) == np.array(_normalise_spans(gold_spans))
    block("evidence_f1")[:, 0] = np.where(parsed, span_f1.mean(axis=0), 0.0)
    block("evidence_exact")[:, 0] = (exact.reshape(len(SPAN_KEYS), n) & parsed).mean(axis=0)
    block("count")[:, 0] = 1.0
    return out


def _f1(tp, predicted, gold):
    denominator = predicted + gold
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, 2.0 * tp / np.where(denominator > 0, denominator, 1.0), 0.0)


def weighted_scores(components: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Every gap metric under each row of pair ``weights`` (resamples × pairs); all ones gives the
    metric's own values. A row with no weight gives NaN."""
    sums = np.atleast_2d(weights) @ components

    def total(name: str) -> np.ndarray:
        start, stop = _BLOCKS[name]
        return sums[:, start:stop]

    with np.errstate(invalid="ignore", divide="ignore"):
        count = np.where(total("count")[:, 0] > 0, total("count")[:, 0], np.nan)
        class_f1 = _f1(total("class_tp"), total("class_predicted"), total("class_gold"))
        present = total("class_gold") > 0
        axis_f1 = _f1(total("axis_tp"), total("axis_predicted"), total("axis_gold"))
        axes_present = total("axis_gold") > 0
        axis_macro = np.where(
            axes_present.any(axis=1), (axis_f1 * axes_present).sum(1) / axes_present.sum(1), 0.0
        )
        scores = {
            "accuracy": total("correct")[:, 0] / count,
            "macro_f1": (class_f1 * present).sum(1) / present.sum(1),
            "contextual_contradiction_f1": class_f1[:, CONFLICT_TYPE_IDS.index(CONTEXTUAL_CONTRADICTION)],
            "axis_micro_f1": _f1(
                total("axis_tp").sum(1), total("axis_predicted").sum(1), total("axis_gold").sum(1)
            ),
            "axis_macro_f1": axis_macro,
            "confounder_accuracy": total("confounder")[:, 0] / count,
            "reconciliation_rougeL": total("rouge")[:, 0] / count,
            "evidence_f1": total("evidence_f1")[:, 0] / count,
            "evidence_exact_match": total("evidence_exact")[:, 0] / count,
        }
    undefined = np.isnan(count)
    return {name: np.where(undefined, np.nan, values) for name, values in scores.items()}


@dataclass
class ScoredVariant:
    """One baseline's test predictions on one variant: the gold rows and the per-pair components."""

    gold: pd.DataFrame
    components: np.ndarray

    @classmethod
    def of(cls, predictions, gold: pd.DataFrame) -> ScoredVariant:
        gold = gold.reset_index(drop=True)
        return cls(gold, pair_components(predictions, references_of(gold)))


def article_pair_weights(variants: list[ScoredVariant], config: BootstrapConfig) -> list[np.ndarray]:
    """Per variant, the (resamples × pairs) weights ``w_a · w_b`` of one shared draw of articles."""
    articles = pd.Index(
        pd.unique(np.concatenate([v.gold[f"article_{s}"].to_numpy(object) for v in variants for s in "ab"]))
    )
    counts = resample_weights(len(articles), config, np.random.default_rng(config.seed))
    return [
        counts[:, articles.get_indexer(v.gold["article_a"])]
        * counts[:, articles.get_indexer(v.gold["article_b"])]
        for v in variants
    ]


def _verdict(low: float, high: float) -> str:
    if low > 0:
        return APPEARS
    if high < 0:
        return OPPOSITE
    return NOT_DISTINGUISHABLE


def leakage_gap(pairlevel: ScoredVariant, v1: ScoredVariant, config: BootstrapConfig | None = None) -> dict:
    """Per metric: the pair-level and v1.0 scores, the gap, its article-bootstrap interval and verdict
    (module docstring)."""
    config = config or BootstrapConfig()
    weights = article_pair_weights([pairlevel, v1], config)
    draws = [weighted_scores(v.components, w) for v, w in zip((pairlevel, v1), weights)]
    point = [weighted_scores(v.components, np.ones(len(v.gold))) for v in (pairlevel, v1)]
    tail = (1 - config.level) / 2 * 100
    result = {}
    for name in GAP_METRICS:
        difference = draws[0][name] - draws[1][name]
        finite = difference[np.isfinite(difference)]
        low, high = np.percentile(finite, [tail, 100 - tail]) if finite.size else (np.nan, np.nan)
        gap = float(point[0][name][0] - point[1][name][0])
        result[name] = {
            "pairlevel": float(point[0][name][0]),
            "v1.0": float(point[1][name][0]),
            "gap": gap,
            "low": float(low),
            "high": float(high),
            "verdict": _verdict(float(low), float(high)),
        }
    return result


def bootstrap_record(config: BootstrapConfig, n_articles: int) -> dict:
    return {
        "n_resamples": config.n_resamples,
        "level": config.level,
        "seed": config.seed,
        "clusters": "articles (pair weight = product of its two articles' draw counts)",
        "n_articles": n_articles,
    }


COMPARED_BASELINES = ("majority", "lexical", "finetuned")


def score_variant(name: str, splits: dict, finetuned=None) -> tuple[ScoredVariant, dict | None]:
    """Baseline ``name`` fit on one variant's train (and dev, for the fine-tuned one), scored on its test;
    with the fine-tuned run's training record."""
    from medunlearn.biodivergence.baselines import fit_baseline, make_baseline

    options = {"config": finetuned} if name == "finetuned" else {}
    fitted = fit_baseline(make_baseline(name, **options), splits)
    scored = ScoredVariant.of(fitted.predict(splits["test"]), splits["test"])
    return scored, getattr(fitted, "training", None)


def compare_baselines(
    configs: dict,
    baselines=COMPARED_BASELINES,
    finetuned=None,
    bootstrap: BootstrapConfig | None = None,
    on_baseline=None,
) -> dict:
    """Train and score each baseline on both variants and report the gap of every metric.

    ``configs``: ``{"v1.0": {split: frame}, "v1.0-pairlevel": {...}}`` (``read_hub_folder`` or
    ``build_splits``); ``finetuned``: a ``FinetunedConfig``; ``on_baseline(name, result)`` is called as each
    baseline finishes. Returns ``{"leakage": the builder's pair-level article overlap, "bootstrap": ...,
    "baselines": {name: {"n": {...}, "gap": {metric: {...}}, "training": {...}}}}``.
    """
    for variant in VARIANTS:
        if variant not in configs or configs[variant]["test"].empty:
            raise InputError(f"compare: the {variant} test split is empty or missing; nothing to score")
    bootstrap = bootstrap or BootstrapConfig()
    results: dict = {}
    for name in baselines:
        scored, training = {}, {}
        for variant in VARIANTS:
            scored[variant], training[variant] = score_variant(name, configs[variant], finetuned)
        results[name] = {
            "n": {variant: len(scored[variant].gold) for variant in VARIANTS},
            "gap": leakage_gap(scored["v1.0-pairlevel"], scored["v1.0"], bootstrap),
        }
        if any(training.values()):
            results[name]["training"] = training
        if on_baseline:
            on_baseline(name, results[name])
    tests = [configs[variant]["test"] for variant in VARIANTS]
    n_articles = len(pd.unique(pd.concat([t[f"article_{s}"] for t in tests for s in "ab"])))
    return {
        "leakage": pairlevel_leakage(configs["v1.0-pairlevel"]),
        "bootstrap": bootstrap_record(bootstrap, n_articles),
        "baselines": results,
    }


def gap_lines(name: str, gap: dict, metrics=GAP_METRICS) -> list[str]:
    """A text table of one baseline's gap: pair-level, v1.0, gap [interval], verdict."""
    lines = [f"{name}: {'metric':<30}{'pair-level':>11}{'v1.0':>8}{'gap [95% interval]':>28}  verdict"]
    for metric in metrics:
        row = gap[metric]
        interval = f"{row['gap']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"
        lines.append(
            f"{'':<{len(name) + 2}}{metric:<30}{row['pairlevel']:>11.3f}{row['v1.0']:>8.3f}{interval:>28}"
            f"  {row['verdict']}"
        )
    return lines


def leakage_line(leakage: dict) -> str:
    """The builder's count of the pair-level split's article overlap, in words."""
    leaking, pairs = leakage["eval_pairs_sharing_article_with_train"], leakage["eval_pairs"]
    share = leakage["eval_share_sharing_article_with_train"]
    return (
        f"v1.0-pairlevel leakage: {leaking} of {pairs} dev/test pairs ({share:.1%}) share an article with "
        f"train; {leakage['articles_shared_with_train']} articles and "
        f"{leakage['claims_shared_with_train']} claims shared"
    )
