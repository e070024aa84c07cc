"""The leakage gap: weighted scores against the metric, article-bootstrap weights, a planted leak whose gap
interval excludes 0, a null pool whose interval includes it, and the `compare` CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from medunlearn.biodivergence.audit import pairlevel_leakage, read_hub_folder
from medunlearn.biodivergence.evaluate import references_of
from medunlearn.biodivergence.leakage_gap import (
    APPEARS,
    GAP_METRICS,
    NOT_DISTINGUISHABLE,
    ScoredVariant,
    article_pair_weights,
    compare_baselines,
    pair_components,
    weighted_scores,
)
from medunlearn.biodivergence.schema import normalise_pool
from medunlearn.biodivergence.splits import SplitConfig, build_splits
from medunlearn.metrics.bootstrap import BootstrapConfig, resample_weights
from medunlearn.metrics.contextual_contradiction import contextual_contradiction


def grouped_pool(n_groups: int, seed: int, leaky: bool) -> pd.DataFrame:
    """Groups of 4 fictitious articles, all 6 pairs within a group; every claim names its article.

    leaky: the label is the group's (so memorising an article's name predicts its pairs); otherwise each
    pair's label is random and a cue word in claim B agrees with it 80% of the time (nothing to memorise).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for group in range(n_groups):
        group_label = bool(rng.integers(2))
        articles = [f"g{group:03d}x{k}" for k in range(4)]
        for i in range(4):
            for j in range(i + 1, 4):
                label = group_label if leaky else bool(rng.integers(2))
                cue = label if rng.random() < 0.8 else not label
                rows.append(
                    {
                        "pair_id": f"{articles[i]}-{articles[j]}",
                        "domain": "oncology",
                        "claim_a": f"Study {articles[i]} reports the outcome.",
                        "claim_b": f"Study {articles[j]} reports the outcome"
                        + ("" if leaky else (" cueyes." if cue else " cueno.")),
                        "article_a": articles[i],
                        "article_b": articles[j],
                        "conflict_type": "contextual_contradiction" if label else "no_conflict",
                        "axes": ["population"] if label else [],
                        "dominant_confounder": "population" if label else "none",
                        "reconciliation": "ages differ" if label else "they agree",
                        "label_source": "llm",
                        "confidence": 0.9,
                    }
                )
    return normalise_pool(pd.DataFrame(rows), "grouped pool")


def splits_of(pool: pd.DataFrame) -> dict:
    config = SplitConfig(seed=0, proportions=(60, 20, 20), pairlevel_proportions=(60, 20, 20))
    return build_splits(pool, config)[0]


def test_weighted_scores_at_unit_weights_equal_the_metric(built_folder):
    """Every gap metric, recomputed from per-pair counts, equals contextual_contradiction's own value
    (the gold records of the next pair, an unparseable string, a wrong-axes record and a raw JSON answer
    mixed)."""
    gold = read_hub_folder(built_folder)["v1.0"]["test"]
    references = references_of(gold)
    predictions = references[1:] + references[:1]  # mostly wrong, sometimes right by coincidence
    predictions[0] = "not JSON at all"
    predictions[1] = dict(predictions[1], axes=["geography", "time_period"], dominant_confounder="geography")
    predictions[2] = json.dumps(dict(predictions[2], evidence_a="", reconciliation="other words"))
    expected = contextual_contradiction(predictions, references_of(gold))
    components = pair_components(predictions, references_of(gold))
    scores = weighted_scores(components, np.ones(len(gold)))
    for name in GAP_METRICS:
        assert scores[name][0] == pytest.approx(expected[name], abs=1e-12), name
    doubled = weighted_scores(components, np.r_[2.0, np.ones(len(gold) - 1)])
    by_repeat = contextual_contradiction(
        [predictions[0], *predictions], references_of(pd.concat([gold.iloc[:1], gold]))
    )
    for name in GAP_METRICS:  # a weight of 2 is the pair counted twice
        assert doubled[name][0] == pytest.approx(by_repeat[name], abs=1e-12), name


def test_a_pair_weighs_the_product_of_its_articles_draw_counts(pair_factory):
    frame = normalise_pool(
        pd.DataFrame(
            [pair_factory("p1", "x", "y"), pair_factory("p2", "x", "z"), pair_factory("p3", "w", "z")]
        )
    )
    config = BootstrapConfig(n_resamples=40, seed=3)
    variant = ScoredVariant(frame, np.zeros((3, 1)))
    (weights,) = article_pair_weights([variant], config)
    # Articles numbered as first seen in article_a, then in article_b: x, w, y, z.
    x, w, y, z = resample_weights(4, config, np.random.default_rng(3)).T
    np.testing.assert_array_equal(weights[:, 0], x * y)
    np.testing.assert_array_equal(weights[:, 1], x * z)
    np.testing.assert_array_equal(weights[:, 2], w * z)


def test_a_planted_article_leak_shows_a_gap_whose_interval_excludes_zero():
    """Labels are per article group: the lexical model memorises article names, which the pair-level test
    shares with train and the v1.0 test does not."""
    configs = splits_of(grouped_pool(150, seed=0, leaky=True))
    result = compare_baselines(configs, ["lexical"], bootstrap=BootstrapConfig(n_resamples=500))
    gap = result["baselines"]["lexical"]["gap"]["accuracy"]
    assert gap["pairlevel"] > 0.9 and gap["gap"] > 0.25
    assert gap["low"] > 0 and gap["verdict"] == APPEARS
    leakage = result["leakage"]
    assert leakage == pairlevel_leakage(configs["v1.0-pairlevel"])
    assert leakage["eval_share_sharing_article_with_train"] > 0.9


def test_no_leak_gives_an_interval_that_includes_zero():
    """Labels random per pair with an 80%-reliable cue word: nothing to memorise, both splits score ~0.8."""
    configs = splits_of(grouped_pool(150, seed=1, leaky=False))
    result = compare_baselines(configs, ["lexical"], bootstrap=BootstrapConfig(n_resamples=500))
    gap = result["baselines"]["lexical"]["gap"]["accuracy"]
    assert 0.65 < gap["pairlevel"] < 0.95 and 0.65 < gap["v1.0"] < 0.95
    assert gap["low"] <= 0 <= gap["high"] and gap["verdict"] == NOT_DISTINGUISHABLE
    assert gap["high"] - gap["low"] < 0.35


def test_cli_compare_prints_the_gap_and_the_leakage(built_folder, tmp_path, capsys):
    from medunlearn.cli import main

    out = tmp_path / "compare"
    code = main(
        ["biodivergence", "compare", "--data", str(built_folder), "--baselines", "majority",
         "--resamples", "200", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "v1.0-pairlevel leakage:" in printed and "contextual_contradiction_f1" in printed
    result = json.loads((out / "compare.json").read_text())
    assert set(result["baselines"]) == {"majority"}
    assert result["bootstrap"]["n_resamples"] == 200
    majority = result["baselines"]["majority"]["gap"]["accuracy"]
    assert majority["low"] <= majority["gap"] <= majority["high"]
