"""The BioDivergence construction pipeline: abstracts → claims → pairs → silver labels → a pair pool
(docs: biodivergence-construction.md).

:func:`mine_pool` runs the stages in order; each one reads its inputs from the files of the stage before and
writes files a person can open in ``out_dir``:

=========== =============================================================================================
stage       writes
=========== =============================================================================================
abstracts   ``abstracts.jsonl``: every record read (:mod:`.read`), ``duplicate`` true for the exact and
            near duplicates dropped (:mod:`.dedup`, hierarchical: exact hash, then MinHash LSH)
claims      ``claims.jsonl``: the rule-based claims of the kept abstracts (:mod:`.claims`), duplicate
            claims dropped (:func:`.dedup.deduplicate_claims`)
domains     ``domains.jsonl``: one domain per kept abstract (:mod:`.domains`: the input's, else keywords,
            else ``other``); its claims take it
pairs       ``pairs.jsonl``: candidate pairs per domain, ranked and capped (:mod:`.pairs`)
labels      ``labels.jsonl``: every silver label, heuristic and LLM (:mod:`.labels`); ``labels.json``: the
            labellers' report (failures, repairs, tokens)
pool        ``pool.jsonl``: the pool in the pair schema (one row per label), ``funnel.json`` and
            ``funnel.md``: the counts from abstracts to labelled pairs, beside the paper's
=========== =============================================================================================

**Resumable.** ``stages.json`` records, per finished stage, a fingerprint of its inputs and settings (the
input files' bytes for the first stage, the fingerprint of the stage before for the others), the SHA-256 of
each file it wrote and its counts. A stage whose entry matches and whose files are intact is skipped; anything
else is redone, with everything after it. Every file is written to a temporary name and renamed, and a
stage's entry is recorded only after its files, so a killed run leaves no half-written file and a rerun
continues where it stopped. The LLM stage resumes through the llm layer's SQLite cache (``llm-cache.sqlite``
by default): a rerun sends only the requests that never got an answer. ``timings.json`` holds the seconds of
each stage in the last run and its LLM calls (requests, cache hits, calls sent): the only file that differs
between two runs.

All files are JSON with sorted keys, rows in a fixed order, so two runs on the same input and settings write
identical bytes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medunlearn.biodivergence.mining.claims import PAPER_FUNNEL, claim_yield, extract_claims
from medunlearn.biodivergence.mining.dedup import deduplicate_abstracts, deduplicate_claims
from medunlearn.biodivergence.mining.domains import assign_domains, domain_counts
from medunlearn.biodivergence.mining.labels import LabelConfig, make_chat, pool_rows, silver_labels
from medunlearn.biodivergence.mining.pairs import (
    MiningConfig,
    mine_pairs_with_counts,
    mining_counts,
    no_pairs_error,
)
from medunlearn.biodivergence.mining.read import read_abstracts
from medunlearn.biodivergence.schema import domain_order
from medunlearn.errors import InputError, MissingInputError
from medunlearn.utils.files import atomic_write_text, file_fingerprint, fingerprint
from medunlearn.utils.user_files import not_a_file

__all__ = [
    "PAPER_PAIRS",
    "STAGES",
    "MineConfig",
    "MineResult",
    "format_funnel",
    "funnel_rows",
    "mine_pool",
    "read_jsonl",
    "write_jsonl",
]

STAGES: tuple[str, ...] = ("abstracts", "claims", "domains", "pairs", "labels", "pool")
# Bump when a stage's code changes what it writes: old outputs are then redone, not reused.
STAGE_VERSION = 2  # 2: stances and shared entities in the pairs; the labels that read them
MANIFEST = "stages.json"
TIMINGS = "timings.json"
# [paper] arXiv 2606.11208: pairs capped at 10,000 per domain (50,000 over five); v1.0 and its splits.
PAPER_PAIRS = {"cap_per_domain": 10_000, "pairs": 50_000, "v1.0": 11_865, "split": (10_183, 840, 842)}


@dataclass
class MineConfig:
    """Settings of :func:`mine_pool` (every default is ours unless marked [paper]).

    Parameters:
        mining (`MiningConfig`): pair mining (neighbours, similarity window, ``cap_per_domain`` [paper:
            10,000], index, embedding model).
        labels (`LabelConfig`): the silver labellers (``labeller`` spec, LLM cache, prompt, pairs per domain
            for the LLM).
        format (`str` or `None`, defaults to None): the abstracts' format for every file; None detects it.
        dedup_threshold (`float`, defaults to 0.8): MinHash Jaccard threshold of near-duplicate abstracts.
        keywords (`dict` or `None`, defaults to None): the domain classifier's ``{domain: [keyword, ...]}``;
            None: the paper's five domains' keywords.
        fallback_domain (`str`, defaults to ``"other"``): the domain of an abstract without a keyword.
        seed (`int`, defaults to 0): the seed of MinHash and of the ANN index.
    """

    mining: MiningConfig = field(default_factory=MiningConfig)
    labels: LabelConfig = field(default_factory=LabelConfig)
    format: str | None = None
    dedup_threshold: float = 0.8
    keywords: dict | None = None
    fallback_domain: str = "other"
    seed: int = 0


@dataclass
class MineResult:
    """What :func:`mine_pool` made: the pool frame, the funnel (rows and figures), seconds per stage, the
    stages skipped because their outputs were current, and the folder."""

    pool: pd.DataFrame
    funnel: dict
    seconds: dict[str, float]
    resumed: list[str]
    out_dir: Path
    label_report: dict = field(default_factory=dict)
    llm_calls: dict = field(default_factory=dict)  # this run: requests, cache hits, calls sent, failed


# ----------------------------------------------------------------------------------------------------------
# Files


def _plain(value: Any) -> Any:
    """JSON-ready: numpy scalars and arrays to Python, NaN to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def write_jsonl(frame: pd.DataFrame, path: str | os.PathLike, columns: Sequence[str] | None = None) -> Path:
    """``frame`` as JSON Lines (sorted keys, UTF-8), written atomically."""
    columns = list(columns or frame.columns)
    records = frame[columns].to_dict(orient="records")
    return atomic_write_text(
        path,
        "".join(json.dumps(_plain(r), ensure_ascii=False, sort_keys=True) + "\n" for r in records),
    )


def read_jsonl(path: str | os.PathLike, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A JSON Lines file as a frame of Python objects (ints stay ints beside None, lists stay lists)."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]
    names = list(columns) if columns is not None else (sorted(rows[0]) if rows else [])
    return pd.DataFrame({name: pd.Series([row.get(name) for row in rows], dtype=object) for name in names})


def _write_json(path: Path, value: Any) -> Path:
    return atomic_write_text(
        path, json.dumps(_plain(value), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    )


class _Stages:
    """The manifest of finished stages (``stages.json``): fingerprint, file digests and counts per stage."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        path = out_dir / MANIFEST
        try:
            self.entries: dict = json.loads(path.read_text()) if path.is_file() else {}
        except json.JSONDecodeError:
            self.entries = {}  # an unreadable manifest (edited by hand): every stage is redone

    def current(self, stage: str, key: str) -> dict | None:
        entry = self.entries.get(stage)
        if not entry or entry.get("fingerprint") != key:
            return None
        for name, digest in entry.get("files", {}).items():
            path = self.out_dir / name
            if not path.is_file() or file_fingerprint(path) != digest:
                return None
        return entry

    def record(self, stage: str, key: str, files: Sequence[str], counts: dict) -> dict:
        entry = {
            "fingerprint": key,
            "files": {name: file_fingerprint(self.out_dir / name) for name in files},
            "counts": _plain(counts),
        }
        self.entries[stage] = entry
        # a later stage's entry was made from the old outputs of this one: it is stale now
        for later in STAGES[STAGES.index(stage) + 1 :]:
            self.entries.pop(later, None)
        _write_json(self.out_dir / MANIFEST, self.entries)
        return entry


# ----------------------------------------------------------------------------------------------------------
# Stages (each reads its inputs from files, so a resumed run computes exactly what an uninterrupted one does)


def _stage_abstracts(paths: list[Path], out: Path, config: MineConfig) -> tuple[list[str], dict]:
    frame = read_abstracts(paths, format=config.format).reset_index(drop=True)
    if frame.empty:
        raise InputError(f"no abstract in {', '.join(map(str, paths))}")
    kept, counts = deduplicate_abstracts(frame, threshold=config.dedup_threshold, seed=config.seed)
    frame["duplicate"] = ~frame.index.isin(kept.index)
    frame["source"] = frame["source"].map(lambda s: Path(str(s)).name)  # no machine's paths in the files
    write_jsonl(frame, out / "abstracts.jsonl")
    return ["abstracts.jsonl"], {**counts, "files": [p.name for p in paths]}


def _kept_abstracts(out: Path) -> pd.DataFrame:
    frame = read_jsonl(out / "abstracts.jsonl")
    return frame[~frame["duplicate"].astype(bool)].reset_index(drop=True)


def _stage_claims(out: Path) -> tuple[list[str], dict]:
    abstracts = _kept_abstracts(out)
    claims = extract_claims(abstracts)
    figures = claim_yield(abstracts, claims)
    kept, dropped = deduplicate_claims(claims)
    kept = kept.reset_index(drop=True)
    write_jsonl(kept, out / "claims.jsonl")
    counts = {
        "abstracts": figures["abstracts"],
        "abstracts_with_claims": figures["abstracts_with_claims"],
        "claims": figures["claims"],
        "yield": figures["yield"],
        "claims_per_abstract": figures["claims_per_abstract"],
        "duplicate_claims": dropped,
        "claims_after_dedup": len(kept),
    }
    return ["claims.jsonl"], counts


def _stage_domains(out: Path, config: MineConfig) -> tuple[list[str], dict]:
    abstracts = _kept_abstracts(out)
    assigned = assign_domains(
        abstracts[["pmid", "title", "abstract", "domain"]], config.keywords, config.fallback_domain
    )
    write_jsonl(assigned, out / "domains.jsonl", ["pmid", "domain", "domain_source"])
    claims = read_jsonl(out / "claims.jsonl")
    lookup = dict(zip(assigned["pmid"].astype(str), assigned["domain"]))
    claim_domains = claims["pmid"].astype(str).map(lookup) if len(claims) else pd.Series([], dtype=object)
    counts = {
        "abstracts_per_domain": domain_counts(assigned),
        "domain_sources": {
            k: int(v) for k, v in assigned["domain_source"].value_counts().sort_index().items()
        },
        "claims_per_domain": domain_counts(pd.DataFrame({"domain": claim_domains})) if len(claims) else {},
    }
    return ["domains.jsonl"], counts


def _stage_pairs(paths: list[Path], out: Path, config: MineConfig) -> tuple[list[str], dict]:
    claims = read_jsonl(out / "claims.jsonl")
    domains = read_jsonl(out / "domains.jsonl")
    if claims.empty:  # said before pairs.jsonl is written: the stage stays unrecorded, a rerun resumes here
        raise no_pairs_error(paths, len(domains), claims, {}, config.mining)
    claims["domain"] = (
        claims["pmid"].astype(str).map(dict(zip(domains["pmid"].astype(str), domains["domain"])))
    )
    pairs, per_domain = mine_pairs_with_counts(claims, config.mining)
    counts = mining_counts(per_domain)
    if pairs.empty:
        raise no_pairs_error(paths, len(domains), claims, counts, config.mining)
    write_jsonl(pairs, out / "pairs.jsonl")
    return ["pairs.jsonl"], counts


def _stage_labels(out: Path, config: MineConfig, chat, show_progress: bool) -> tuple[list[str], dict]:
    pairs = read_jsonl(out / "pairs.jsonl")
    labels, report = silver_labels(pairs, config.labels, chat=chat, show_progress=show_progress)
    write_jsonl(labels, out / "labels.jsonl")
    _write_json(out / "labels.json", report)
    counts = {
        "pairs": len(pairs),
        "labels": len(labels),
        "by_source": {k: int(v) for k, v in labels["label_source"].value_counts().sort_index().items()},
        "heuristic_at_or_above_min_confidence": report["heuristic"]["at_or_above_min_confidence"],
        "min_confidence": config.labels.min_confidence,
        "llm_requests": report.get("llm", {}).get("requests", 0),
        "llm_failed": report.get("llm", {}).get("failed", 0),
    }
    return ["labels.jsonl", "labels.json"], counts


def _stage_pool(out: Path, entries: dict) -> tuple[list[str], dict]:
    from medunlearn.biodivergence.schema import PAIR_COLUMNS

    pairs = read_jsonl(out / "pairs.jsonl")
    labels = read_jsonl(out / "labels.jsonl")
    abstracts = _kept_abstracts(out)
    pool = pool_rows(pairs, labels, abstracts).sort_values(["pair_id", "label_source"], kind="stable")
    write_jsonl(pool, out / "pool.jsonl", PAIR_COLUMNS)
    counts = {
        "pool_rows": len(pool),
        "pairs": int(pool["pair_id"].nunique()),
        "pairs_with_llm_label": int(pool.loc[pool["label_source"] == "llm", "pair_id"].nunique()),
    }
    # from the counts as stored (sorted keys), so a resumed run's funnel is the uninterrupted one's
    stored = json.loads(json.dumps(_plain({k: v["counts"] for k, v in entries.items()}), sort_keys=True))
    funnel = build_funnel({**stored, "pool": counts})
    _write_json(out / "funnel.json", funnel)
    atomic_write_text(out / "funnel.md", format_funnel(funnel, markdown=True) + "\n")
    return ["pool.jsonl", "funnel.json", "funnel.md"], counts


# ----------------------------------------------------------------------------------------------------------
# Funnel


def _share(value: float) -> str:
    return f"{100 * value:.1f}%"


def funnel_rows(counts: dict) -> list[dict]:
    """The funnel as rows ``{"stage", "ours", "paper"}`` from the stages' counts (``stages.json``)."""
    a, c, d, p, lab, pool = (counts.get(stage, {}) for stage in STAGES)
    rows = [
        ("abstracts read", a.get("abstracts"), ""),
        ("exact duplicates", a.get("exact_duplicates"), ""),
        ("near duplicates (MinHash LSH)", a.get("near_duplicates"), ""),
        ("unique abstracts kept", a.get("kept"), f"{PAPER_FUNNEL['abstracts']:,}"),
        (
            "abstracts with a claim",
            c.get("abstracts_with_claims"),
            f"{PAPER_FUNNEL['abstracts_with_claims']:,}",
        ),
        ("claims extracted", c.get("claims"), f"{PAPER_FUNNEL['claims']:,}"),
        ("claim yield (abstracts with a claim)", _share(c.get("yield", 0.0)), _share(PAPER_FUNNEL["yield"])),
        (
            "claims per abstract",
            f"{c.get('claims_per_abstract', 0.0):.2f}",
            f"{PAPER_FUNNEL['claims_per_abstract']:.2f}",
        ),
        ("duplicate claims dropped", c.get("duplicate_claims"), ""),
        ("claims after dedup", c.get("claims_after_dedup"), ""),
    ]
    claims_per_domain = d.get("claims_per_domain", {})
    for domain in domain_order(claims_per_domain):
        if domain in claims_per_domain:
            rows.append((f"claims: {domain}", claims_per_domain[domain], ""))
    rows += [
        ("candidate pairs (neighbours)", p.get("candidates"), ""),
        ("same-article pairs dropped", p.get("same_article_dropped"), ""),
        ("pairs outside the similarity window", p.get("outside_window"), ""),
        ("pairs dropped by the cap", p.get("capped"), ""),
        (
            "pairs kept",
            p.get("kept"),
            f"{PAPER_PAIRS['pairs']:,} (≤ {PAPER_PAIRS['cap_per_domain']:,} per domain)",
        ),
    ]
    per_domain = p.get("per_domain", {})
    for domain in domain_order(per_domain):
        if domain in per_domain:
            rows.append((f"pairs: {domain}", per_domain[domain].get("kept"), ""))
    by_source = lab.get("by_source", {})
    rows += [
        ("LLM label requests", lab.get("llm_requests"), ""),
        ("LLM labels (schema-valid, repaired)", by_source.get("llm", 0), ""),
        ("LLM requests failed", lab.get("llm_failed"), ""),
        ("heuristic labels", by_source.get("heuristic", 0), ""),
        (
            f"heuristic labels with confidence ≥ {lab.get('min_confidence', 0.45)}",
            lab.get("heuristic_at_or_above_min_confidence"),
            "",
        ),
        ("pool rows (one per label)", pool.get("pool_rows"), ""),
        ("pairs in the pool", pool.get("pairs"), ""),
    ]
    return [
        {"stage": stage, "ours": "" if ours is None else ours, "paper": paper} for stage, ours, paper in rows
    ]


def build_funnel(counts: dict) -> dict:
    """``{"rows", "counts", "notes"}``: what ``funnel.json`` holds and the dataset card shows."""
    return {
        "rows": funnel_rows(counts),
        "counts": counts,
        "notes": [
            "The paper's figures are for 202,180 PubMed and Europe PMC abstracts in five domains; ours are "
            "for the abstracts given here, with medunlearn's rules (docs: biodivergence-construction.md).",
            "Claim yield and claims per abstract are over the unique abstracts, as the paper counts "
            "(527,907 / 202,180 = 2.61).",
        ],
        "title": "medunlearn biodivergence mine",
    }


def format_funnel(funnel: dict, seconds: dict | None = None, markdown: bool = False) -> str:
    """The funnel as a readable table (plain text, or markdown for ``funnel.md``), with the seconds per
    stage when given."""
    rows = [
        [row["stage"], f"{row['ours']:,}" if isinstance(row["ours"], int) else str(row["ours"]), row["paper"]]
        for row in funnel["rows"]
    ]
    header = ["stage", "ours", "paper"]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(3)]
        lines = [
            "  ".join(
                str(cell).ljust(widths[i]) if i == 0 else str(cell).rjust(widths[i])
                for i, cell in enumerate(r)
            )
            for r in [header, *rows]
        ]
    if seconds:
        ordered = [name for name in STAGES if name in seconds] + [n for n in seconds if n not in STAGES]
        lines.append("")
        lines.append(
            "seconds per stage: "
            + ", ".join(f"{name} {seconds[name]:.1f}" for name in ordered)
            + f" (total {sum(seconds.values()):.1f})"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------
# The pipeline


def _settings(config: MineConfig) -> dict:
    mining = dataclasses.asdict(config.mining)
    labels = dataclasses.asdict(config.labels)
    labels.pop("cache", None)  # where answers are kept does not change them
    labels.pop("concurrency", None)
    if labels.get("labeller"):
        from medunlearn.llm import parse_spec

        spec = parse_spec(labels["labeller"])
        labels["labeller"] = f"{spec.kind}:{spec.model}"  # the server URL is a machine's, not the build's
    if labels.get("prompt"):
        labels["prompt"] = file_fingerprint(labels["prompt"])
    return {
        "mining": mining,
        "labels": labels,
        "format": config.format,
        "dedup_threshold": config.dedup_threshold,
        "keywords": config.keywords,
        "fallback_domain": config.fallback_domain,
        "seed": config.seed,
    }


def _stage_keys(paths: list[Path], config: MineConfig, chat) -> dict[str, str]:
    settings = _settings(config)
    inputs = [{"name": path.name, "sha256": file_fingerprint(path)} for path in paths]
    from medunlearn.biodivergence.mining.labels import label_prompt

    prompt = label_prompt(config.labels.prompt)
    identity = dataclasses.asdict(chat.backend.identity) if chat is not None else None
    parts = {
        "abstracts": {
            "inputs": inputs,
            "format": settings["format"],
            "dedup": settings["dedup_threshold"],
            "seed": config.seed,
        },
        "claims": {},
        "domains": {"keywords": settings["keywords"], "fallback": settings["fallback_domain"]},
        "pairs": {"mining": settings["mining"], "seed": config.seed},
        "labels": {
            "labels": settings["labels"],
            "prompt": prompt.describe() | {"source": ""},
            "backend": identity,
        },
        "pool": {},
    }
    keys, previous = {}, ""
    for stage in STAGES:
        previous = fingerprint({"stage": stage, "version": STAGE_VERSION, "after": previous, **parts[stage]})
        keys[stage] = previous
    return keys


def _prepare(
    abstract_paths, out_dir, config: MineConfig | None, llm
) -> tuple[list[Path], Path, MineConfig, Any]:
    """The checked input files, the made ``out_dir``, a private copy of ``config`` with the labeller and its
    cache filled in, and the given :class:`~medunlearn.llm.BulkChat` (None when given a spec or nothing)."""
    from medunlearn.llm import BulkChat

    config = dataclasses.replace(config or MineConfig())
    config.labels = dataclasses.replace(config.labels)
    if isinstance(abstract_paths, (str, os.PathLike)):
        abstract_paths = [abstract_paths]
    paths = [Path(p) for p in abstract_paths]
    if not paths:
        raise InputError("give at least one abstracts file")
    for path in (path for path in paths if not path.is_file()):
        raise MissingInputError(f"abstracts file {path} {not_a_file(path)}")
    chat = llm if isinstance(llm, BulkChat) else None
    if isinstance(llm, str):
        config.labels.labeller = llm
    elif llm is not None and chat is None:
        raise InputError(f"llm must be a BACKEND:MODEL spec or a BulkChat, got {type(llm).__name__}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if config.labels.labeller and config.labels.cache is None:
        config.labels.cache = out / "llm-cache.sqlite"
    config.labels.check()
    return paths, out, config, chat


def _run_stage(stage: str, paths, out: Path, config: MineConfig, chat, manifest, show_progress: bool):
    """Run one stage on the files of the stages before it; returns its ``(files, counts)``."""
    if stage == "abstracts":
        return _stage_abstracts(paths, out, config)
    if stage == "claims":
        return _stage_claims(out)
    if stage == "domains":
        return _stage_domains(out, config)
    if stage == "pairs":
        return _stage_pairs(paths, out, config)
    if stage == "labels":
        return _stage_labels(out, config, chat, show_progress)
    return _stage_pool(out, manifest.entries)


def mine_pool(
    abstract_paths: Sequence[str | os.PathLike] | str | os.PathLike,
    out_dir: str | os.PathLike,
    config: MineConfig | None = None,
    llm=None,
    *,
    show_progress: bool = True,
    on_stage: Callable[[str, str, float], None] | None = None,
) -> MineResult:
    """Run the construction pipeline from abstracts to a pair pool in ``out_dir`` (module docstring).

    Parameters:
        abstract_paths: files of abstracts (PubMed XML, JSON Lines, CSV, PubMedQA JSON, NCBI Disease).
        out_dir: the folder of the stage files; a rerun skips every stage whose outputs are current.
        config (`MineConfig`): the settings; defaults throughout.
        llm: the LLM labeller: a ``BACKEND:MODEL`` spec (it replaces ``config.labels.labeller``), a
            :class:`~medunlearn.llm.BulkChat`, or None (``config.labels.labeller``, which may be None:
            heuristic labels only).
        show_progress (`bool`): tqdm bars (stages, LLM requests).
        on_stage: called as ``on_stage(stage, "done" | "skipped", seconds)`` after each stage.

    Returns a :class:`MineResult`. Raises a :class:`~medunlearn.errors.MedunlearnError` naming the file, row
    and field of a bad input, before anything of that stage is written.
    """
    from tqdm.auto import tqdm

    paths, out, config, chat = _prepare(abstract_paths, out_dir, config, llm)
    keys = _stage_keys(paths, config, chat)
    manifest = _Stages(out)
    seconds: dict[str, float] = {}
    resumed: list[str] = []
    owned_chat = None
    bar = tqdm(total=len(STAGES), desc="biodivergence mine", unit="stage", disable=not show_progress)
    try:
        for stage in STAGES:
            bar.set_postfix_str(stage)
            if manifest.current(stage, keys[stage]) is not None:
                seconds[stage] = 0.0
                resumed.append(stage)
                if on_stage:
                    on_stage(stage, "skipped", 0.0)
                bar.update(1)
                continue
            started = time.perf_counter()
            if stage == "labels" and chat is None and config.labels.labeller:
                chat = owned_chat = make_chat(config.labels, show_progress)
            files, counts = _run_stage(stage, paths, out, config, chat, manifest, show_progress)
            manifest.record(stage, keys[stage], files, counts)
            seconds[stage] = round(time.perf_counter() - started, 3)
            if on_stage:
                on_stage(stage, "done", seconds[stage])
            bar.update(1)
    finally:
        bar.close()
        if owned_chat is not None:
            owned_chat.close()
    llm_calls = dataclasses.asdict(chat.stats) if chat is not None and "labels" not in resumed else {}
    _write_json(out / TIMINGS, {"seconds": seconds, "resumed": resumed, "llm_calls": llm_calls})
    from medunlearn.biodivergence.pools import read_pool

    return MineResult(
        pool=read_pool(out / "pool.jsonl"),
        funnel=json.loads((out / "funnel.json").read_text()),
        seconds=seconds,
        resumed=resumed,
        out_dir=out,
        label_report=json.loads((out / "labels.json").read_text()),
        llm_calls=llm_calls,
    )
