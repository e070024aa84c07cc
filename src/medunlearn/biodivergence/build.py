"""``build_biodivergence``: a pair pool → v1.0 and v1.0-pairlevel splits → a Hub-ready folder.

The pool comes from a pool file, PubMedQA, the fictitious generator, or abstracts mined by the construction
pipeline (:func:`medunlearn.biodivergence.mining.mine_pool`, docs: biodivergence-construction.md); for
abstracts, the card carries the construction funnel beside the paper's figures."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medunlearn.biodivergence.export import write_hub_folder
from medunlearn.biodivergence.pools import PubMedQAPoolConfig, pubmedqa_pool, read_pool, write_pool
from medunlearn.biodivergence.schema import eval_label_sources, normalise_pool
from medunlearn.biodivergence.splits import SplitConfig, SplitStats, build_splits
from medunlearn.biodivergence.synthetic import generate_pair_pool
from medunlearn.errors import InputError


class NoEvaluationLabelsError(InputError):
    """``build --abstracts`` without an LLM labeller, and without ``eval_labels="heuristic"``: v1.0 would have
    no dev or test split. The message names both ways out."""


@dataclass
class PoolSource:
    """Where the pair pool comes from: exactly one of a pool file, PubMedQA's ``ori_pqal.json``, the
    fictitious generator (``synthetic``, ``pairs`` pairs), or ``abstracts`` files mined into a pool.

    ``pubmedqa_label_source`` is what the PubMedQA rule labels are recorded as (``llm`` only to exercise
    dev/test). For ``abstracts``: ``mine`` holds the construction settings (a
    :class:`~medunlearn.biodivergence.mining.MineConfig`; its ``labels.labeller`` is the LLM spec) and
    ``mine_dir`` the folder of the stage files (default: ``OUT-mining`` beside the output folder), which a
    rerun resumes from.
    """

    pool: str | os.PathLike | None = None
    pubmedqa: str | os.PathLike | None = None
    synthetic: bool = False
    pairs: int = 2000
    pubmedqa_label_source: str = "heuristic"
    abstracts: Sequence[str | os.PathLike] | None = None
    mine: Any = None
    mine_dir: str | os.PathLike | None = None


def mine_dir_for(out: str | os.PathLike, source: PoolSource) -> Path:
    """The folder of the construction stage files: ``source.mine_dir``, else ``OUT-mining`` beside ``out``."""
    if source.mine_dir is not None:
        return Path(source.mine_dir)
    out = Path(out)
    return out.with_name(out.name + "-mining")


def _mined_pool(source: PoolSource, seed: int, mine_dir: Path, llm, show_progress: bool, on_stage=None):
    from medunlearn.biodivergence.mining.pipeline import MineConfig, mine_pool

    config = source.mine or MineConfig(seed=seed)
    result = mine_pool(
        source.abstracts, mine_dir, config, llm=llm, show_progress=show_progress, on_stage=on_stage
    )
    labels = result.label_report
    params = {
        "source": "abstracts mined by medunlearn biodivergence mine: "
        + ", ".join(Path(p).name for p in source.abstracts),
        "mining": {
            "cap_per_domain": config.mining.cap_per_domain,
            "k": config.mining.k,
            "similarity_window": [config.mining.min_similarity, config.mining.max_similarity],
            "dedup_threshold": config.dedup_threshold,
            "labeller": labels.get("llm", {}).get("labeller", "none (heuristic labels only)"),
            "label_prompt": labels.get("llm", {}).get("prompt", {}).get("version", "none"),
            "llm_pairs_per_domain": config.labels.llm_pairs_per_domain,
        },
    }
    return result.pool, params, result


def check_evaluation_labels(source: PoolSource, eval_labels: str, llm=None) -> None:
    """Refuse, before anything is written, a build from abstracts whose v1.0 could have no dev or test split.

    v1.0 admits only LLM labels to dev and test [paper]; abstracts mined without an LLM labeller have
    heuristic labels only. Such a folder cannot be evaluated on, so the build asks for an LLM labeller or for
    ``eval_labels="heuristic"`` (heuristic labels admitted to dev/test, and said so everywhere) [ours]."""
    admitted = eval_label_sources(eval_labels)
    labeller = llm is not None or bool(source.mine is not None and source.mine.labels.labeller)
    if source.abstracts and not labeller and "heuristic" not in admitted:
        raise NoEvaluationLabelsError(
            "build --abstracts without an LLM labeller would write a v1.0 without dev and test splits "
            "(v1.0 admits heuristic labels to train only), so nothing was written. Either give an LLM "
            "labeller (--labeller BACKEND:MODEL, e.g. openai:MODEL@http://127.0.0.1:8000/v1; llm= in "
            "Python), or admit the heuristic labels to dev and test with --eval-labels heuristic "
            '(eval_labels="heuristic"; every row, the card and the audit then say so).'
        )


def load_pool(
    source: PoolSource,
    seed: int,
    *,
    mine_dir: str | os.PathLike | None = None,
    llm=None,
    show_progress: bool = True,
):
    """``(pool, build parameters for the card)``; for ``abstracts``, the mining runs in ``mine_dir``."""
    chosen = [
        name
        for name, given in (
            ("pool", source.pool),
            ("pubmedqa", source.pubmedqa),
            ("synthetic", source.synthetic),
            ("abstracts", source.abstracts),
        )
        if given
    ]
    if len(chosen) != 1:
        raise InputError(
            "give exactly one pool source (pool file, PubMedQA, synthetic or abstracts), got "
            f"{chosen or 'none'}"
        )
    if source.abstracts:
        pool, params, _ = _mined_pool(
            source, seed, Path(mine_dir or mine_dir_for("biodivergence", source)), llm, show_progress
        )
        return pool, params
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
    out: str | os.PathLike,
    source: PoolSource,
    *,
    seed: int = 0,
    save_pool: str | os.PathLike | None = None,
    llm=None,
    show_progress: bool = True,
    on_stage=None,
    eval_labels: str = "llm",
) -> tuple[Path, SplitStats]:
    """Split the pool of ``source`` and write the folder ``out``; returns ``(folder, split statistics)``.

    For ``source.abstracts`` the construction pipeline runs first (resumable, in
    :func:`mine_dir_for`), ``llm`` (a spec or a :class:`~medunlearn.llm.BulkChat`) labels the pairs, and
    the card carries the funnel; ``on_stage(stage, "done" | "skipped", seconds)`` is called after each
    mining stage. The folder is written whole or not at all.

    ``eval_labels``: the label sources v1.0's dev and test admit, ``"llm"`` (the paper's rule) or
    ``"heuristic"`` (heuristic labels too; the card and the audit warn). From abstracts without an LLM
    labeller, ``"llm"`` is refused (:class:`NoEvaluationLabelsError`) before anything is written.

    >>> import tempfile
    >>> folder, stats = build_biodivergence(tempfile.mkdtemp() + "/bd", PoolSource(synthetic=True, pairs=300))
    >>> sorted(stats.split_sizes)
    ['dev', 'test', 'train']
    """
    check_evaluation_labels(source, eval_labels, llm)
    funnel = None
    if source.abstracts:
        pool, params, mined = _mined_pool(
            source, seed, mine_dir_for(out, source), llm, show_progress, on_stage
        )
        funnel = mined.funnel
    else:
        pool, params = load_pool(source, seed)
    config = SplitConfig(seed=seed, eval_labels=eval_labels)
    configs, stats = build_splits(pool, config)
    params.update(
        {
            "seed": seed,
            "eval_labels": eval_labels,
            "min_confidence": config.min_confidence,
            "proportions": list(config.proportions),
            "pairlevel_proportions": list(config.pairlevel_proportions),
            "max_unit_share": config.max_unit_share,
            "max_drop_fraction": config.max_drop_fraction,
        }
    )
    if save_pool:
        write_pool(pool, save_pool)
    if funnel is not None:
        funnel = _with_splits(funnel, stats)
    folder = write_hub_folder(configs, stats, out, params, funnel=funnel)
    return Path(folder), stats


def _with_splits(funnel: dict, stats: SplitStats) -> dict:
    """The funnel's last rows: what the split builder kept, beside the paper's v1.0 (11,865 pairs)."""
    from medunlearn.biodivergence.mining.pipeline import PAPER_PAIRS

    sizes = stats.split_sizes
    rows = [
        *funnel["rows"],
        {
            "stage": "pairs after cleaning (one per pair_id, confidence ≥ 0.45)",
            "ours": stats.pairs_after_cleaning,
            "paper": "",
        },
        {
            "stage": "share of pairs kept with a usable label",
            "ours": f"{usable_share(funnel, stats):.1%}",
            "paper": "",
        },
        {
            "stage": "v1.0 pairs (train / dev / test)",
            "ours": f"{sum(sizes.values())} = {sizes['train']} / {sizes['dev']} / {sizes['test']}",
            "paper": "{:,} = {:,} / {:,} / {:,}".format(PAPER_PAIRS["v1.0"], *PAPER_PAIRS["split"]),
        },
    ]
    return {**funnel, "rows": rows}


def usable_share(funnel: dict, stats: SplitStats) -> float:
    """[ours] pairs with a usable label / pairs mined: a usable label is one the split builder keeps (an LLM
    label, or a heuristic one with confidence ≥ 0.45), so the numerator is ``pairs_after_cleaning``."""
    mined = funnel.get("counts", {}).get("pairs", {}).get("kept") or 0
    return stats.pairs_after_cleaning / mined if mined else 0.0
