"""``build_biodivergence``: a pair pool → v1.0 and v1.0-pairlevel splits → a Hub-ready folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from medunlearn.biodivergence.export import write_hub_folder
from medunlearn.biodivergence.pools import PubMedQAPoolConfig, pubmedqa_pool, read_pool, write_pool
from medunlearn.biodivergence.schema import normalise_pool
from medunlearn.biodivergence.splits import SplitConfig, SplitStats, build_splits
from medunlearn.biodivergence.synthetic import generate_pair_pool
from medunlearn.errors import InputError


@dataclass
class PoolSource:
    """Where the pair pool comes from: exactly one of a pool file, PubMedQA's ``ori_pqal.json``, or the
    fictitious generator (``synthetic``, ``pairs`` pairs).

    ``pubmedqa_label_source`` is what the PubMedQA rule labels are recorded as (``llm`` only to exercise
    dev/test).
    """

    pool: str | os.PathLike | None = None
    pubmedqa: str | os.PathLike | None = None
    synthetic: bool = False
    pairs: int = 2000
    pubmedqa_label_source: str = "heuristic"


def load_pool(source: PoolSource, seed: int):
    """``(pool, build parameters for the card)``."""
    chosen = [
        name
        for name, given in (
            ("pool", source.pool),
            ("pubmedqa", source.pubmedqa),
            ("synthetic", source.synthetic),
        )
        if given
    ]
    if len(chosen) != 1:
        raise InputError(
            f"give exactly one pool source (pool file, PubMedQA or synthetic), got {chosen or 'none'}"
        )
    if source.pool:
        return read_pool(source.pool), {"source": f"pool file {Path(source.pool).name}"}
    if source.pubmedqa:
        config = PubMedQAPoolConfig(seed=seed, label_source=source.pubmedqa_label_source)
        return pubmedqa_pool(source.pubmedqa, config), {
            "source": "PubMedQA PQA-L conclusions paired within MeSH terms (medunlearn rule labels)",
            "pubmedqa": config.__dict__,
            "license": "mit",
        }
    return normalise_pool(generate_pair_pool(n_pairs=source.pairs, seed=seed), "synthetic pool"), {
        "source": "fictitious pool (medunlearn.biodivergence.synthetic)",
        "pairs": source.pairs,
        "license": "cc0-1.0",
    }


def build_biodivergence(
    out: str | os.PathLike, source: PoolSource, *, seed: int = 0, save_pool: str | os.PathLike | None = None
) -> tuple[Path, SplitStats]:
    """Split the pool of ``source`` and write the folder ``out``; returns ``(folder, split statistics)``.

    >>> import tempfile
    >>> folder, stats = build_biodivergence(tempfile.mkdtemp() + "/bd", PoolSource(synthetic=True, pairs=300))
    >>> sorted(stats.split_sizes)
    ['dev', 'test', 'train']
    """
    pool, params = load_pool(source, seed)
    config = SplitConfig(seed=seed)
    configs, stats = build_splits(pool, config)
    params.update(
        {
            "seed": seed,
            "min_confidence": config.min_confidence,
            "proportions": list(config.proportions),
            "pairlevel_proportions": list(config.pairlevel_proportions),
            "max_unit_share": config.max_unit_share,
            "max_drop_fraction": config.max_drop_fraction,
        }
    )
    if save_pool:
        write_pool(pool, save_pool)
    folder = write_hub_folder(configs, stats, out, params)
    return Path(folder), stats
