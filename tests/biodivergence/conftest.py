"""Fixtures for the BioDivergence tests: hand-made pairs, a small fictitious pool, a built folder."""

from __future__ import annotations

import pandas as pd
import pytest


def make_pair(
    pair_id: str,
    article_a: str,
    article_b: str,
    *,
    claim_a: str | None = None,
    claim_b: str | None = None,
    conflict_type: str = "contextual_contradiction",
    axes=("population",),
    confounder: str = "population",
    label_source: str = "llm",
    confidence: float = 0.9,
    domain: str = "oncology",
) -> dict:
    """One valid pool row; claims default to text unique to the article."""
    return {
        "pair_id": pair_id,
        "domain": domain,
        "claim_a": claim_a or f"Drug X lowers mortality in the cohort of article {article_a}.",
        "claim_b": claim_b or f"Drug X raises mortality in the cohort of article {article_b}.",
        "article_a": article_a,
        "article_b": article_b,
        "conflict_type": conflict_type,
        "axes": list(axes),
        "dominant_confounder": confounder,
        "reconciliation": "The cohorts differ in age.",
        "label_source": label_source,
        "confidence": confidence,
    }


@pytest.fixture()
def pair_factory():
    return make_pair


@pytest.fixture(scope="session")
def small_pool() -> pd.DataFrame:
    from medunlearn.biodivergence.schema import normalise_pool
    from medunlearn.biodivergence.synthetic import generate_pair_pool

    return normalise_pool(generate_pair_pool(n_pairs=600, seed=3), "small pool")


@pytest.fixture(scope="session")
def built_folder(tmp_path_factory, small_pool):
    from medunlearn.biodivergence.export import write_hub_folder
    from medunlearn.biodivergence.splits import build_splits

    configs, stats = build_splits(small_pool)
    return write_hub_folder(
        configs,
        stats,
        tmp_path_factory.mktemp("bd") / "folder",
        {"seed": 0, "min_confidence": 0.45, "source": "test pool"},
    )
