"""Write the Hub-ready BioDivergence folder: parquet per config/split, README.md (YAML ``configs:`` + card).

Layout (what ``load_dataset(DIR, "v1.0")`` reads offline and what ``upload_folder`` would publish)::

    DIR/README.md                    YAML configs + dataset card (split table, leakage audit,
                                     build parameters)
    DIR/build.json                   build parameters and statistics (sorted keys, no timestamps)
    DIR/v1.0/{train,dev,test}.parquet
    DIR/v1.0-pairlevel/{train,dev,test}.parquet

An empty split (a pool without LLM labels has empty dev and test) is neither written nor listed in
``configs:``: ``datasets`` cannot load a parquet split without rows ("BatchSize must be greater than 0", or
"corresponds to no data" for a file without row groups). ``build.json`` names the empty splits
(``empty_splits``), the card says so, and :func:`~medunlearn.biodivergence.audit.read_hub_folder` gives them
back as empty frames.

Files are byte-identical for the same pool and seed: rows are sorted by pair_id, parquet is written by
``pyarrow`` with fixed settings, and nothing time-dependent goes into the card. The folder is written in a
staging folder beside ``DIR`` and swapped in whole, so a failed build leaves nothing half-written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from medunlearn.biodivergence.schema import PAIR_COLUMNS, domain_order, pair_features
from medunlearn.biodivergence.splits import SPLITS, SplitStats
from medunlearn.ontology.biodivergence import CONFLICT_TYPES, DIVERGENCE_AXES
from medunlearn.utils.files import atomic_write_text, staged_folder

CONFIG_NAMES = ("v1.0", "v1.0-pairlevel")
PARQUET_SETTINGS = {
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    "write_statistics": False,
}

CITATION = """@article{biodivergence2026,
  title   = {BioDivergence: contextual contradictions in biomedical abstracts},
  journal = {arXiv preprint arXiv:2606.11208},
  year    = {2026}
}"""


def frame_to_table(frame: pd.DataFrame) -> pa.Table:
    """An Arrow table with the pair schema and the ``datasets`` features in its metadata."""
    features = pair_features()
    table = pa.Table.from_pandas(
        frame[list(PAIR_COLUMNS)], schema=features.arrow_schema, preserve_index=False
    )
    # Drop pandas' metadata (it records the pandas version); keep only the datasets features.
    return table.replace_schema_metadata(
        {"huggingface": json.dumps({"info": {"features": features.to_dict()}})}
    )


def write_parquet(frame: pd.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(frame_to_table(frame.sort_values("pair_id", kind="stable")), path, **PARQUET_SETTINGS)
    return path


def empty_splits(configs: dict) -> dict[str, list[str]]:
    """``{config: [split, ...]}`` of the splits without rows (not written; see the module docstring)."""
    empty = {name: [split for split in SPLITS if len(configs[name][split]) == 0] for name in CONFIG_NAMES}
    return {name: splits for name, splits in empty.items() if splits}


def configs_yaml(empty: dict[str, list[str]] | None = None) -> list[dict]:
    """The README ``configs:`` entries (v1.0 is the default config), without the ``empty`` splits."""
    empty = empty or {}
    return [
        {
            "config_name": name,
            **({"default": True} if name == "v1.0" else {}),
            "data_files": [
                {"split": split, "path": f"{name}/{split}.parquet"}
                for split in SPLITS
                if split not in empty.get(name, [])
            ],
        }
        for name in CONFIG_NAMES
    ]


def _markdown_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _empty_splits_note(empty: dict[str, list[str]]) -> str:
    if not empty:
        return ""
    listed = "; ".join(f"`{name}`: {', '.join(splits)}" for name, splits in empty.items())
    return (
        f"\n**Empty splits, not written** ({listed}): no pair of this pool could go there (dev and test take "
        "only LLM-labelled pairs). `datasets` cannot load a split without rows, so these splits are left out "
        "of the `configs:` block and `load_dataset(DIR, CONFIG)` returns only the others.\n"
    )


def _heuristic_eval_warning(configs: dict) -> str:
    """The card's warning for a build with ``eval_labels="heuristic"``: dev/test labels are rule-made."""
    counts = []
    for split in ("dev", "test"):
        frame = configs["v1.0"][split]
        counts.append(f"{split} {int((frame['label_source'] == 'heuristic').sum())} of {len(frame)}")
    return f"""
> **Dev and test hold heuristic labels** (built with `--eval-labels heuristic`; v1.0 heuristic labels in
> {", ".join(counts)} pairs). The paper's v1.0 takes only LLM labels for dev and test. These are medunlearn's
> rule-made silver labels (docs: biodivergence-construction.md): a score on them measures agreement with the
> rules, not with an LLM or a reader. Every row's `label_source` says which labeller made it.
"""


def funnel_section(funnel: dict | None) -> str:
    """The card's construction funnel (abstracts → claims → pairs → labelled pairs), with the paper's
    figures beside ours; empty when the pool was not mined from abstracts. ``funnel`` rows are
    ``{"stage", "ours", "paper"}`` (see :func:`medunlearn.biodivergence.mining.pipeline.funnel_rows`)."""
    if not funnel:
        return ""
    rows = [[row["stage"], row["ours"], row.get("paper", "")] for row in funnel["rows"]]
    notes = "".join(f"\n- {note}" for note in funnel.get("notes", []))
    return f"""
## Construction funnel

From abstracts to labelled pairs ({funnel.get("title", "medunlearn biodivergence mine")}); the paper's figures
(arXiv 2606.11208) are beside ours for scale, not as a target:

{_markdown_table(["stage", "this build", "paper"], rows)}
{notes}
"""


def _card_header(build_params: dict, empty: dict, heuristic_eval: bool) -> dict:
    """The README's YAML header: Hub metadata and the ``configs:`` block ``load_dataset`` reads."""
    return {
        "license": build_params.get("license", "other"),
        "language": ["en"],
        "pretty_name": "BioDivergence (medunlearn build"
        + (", heuristic dev/test labels)" if heuristic_eval else ")"),
        "task_categories": ["text-classification"],
        "tags": ["biomedical", "contradiction", "claim-pairs", "medunlearn"]
        + (["heuristic-eval-labels"] if heuristic_eval else []),
        "configs": configs_yaml(empty),
    }


def _split_table(configs: dict) -> str:
    """Pairs per config and split, by label source, with the contextual contradictions among them."""
    columns = ["config", "split", "pairs", "LLM labels", "heuristic labels", "contextual contradictions"]
    rows = []
    for name in CONFIG_NAMES:
        for split in SPLITS:
            frame = configs[name][split]
            llm = int((frame["label_source"] == "llm").sum())
            contextual = int((frame["conflict_type"] == "contextual_contradiction").sum())
            rows.append([name, split, len(frame), llm, len(frame) - llm, contextual])
    return _markdown_table(columns, rows)


def _domain_table(configs: dict) -> str:
    """v1.0 pairs per domain and split, domains in the card's order."""
    domain_counts = (
        pd.concat([configs["v1.0"][split]["domain"].value_counts().rename(split) for split in SPLITS], axis=1)
        .reindex(list(domain_order(pd.concat([f["domain"] for f in configs["v1.0"].values()]))))
        .fillna(0)
        .astype(int)
    )
    rows = [[domain, *row] for domain, row in zip(domain_counts.index, domain_counts.to_numpy().tolist())]
    return _markdown_table(["domain", *SPLITS], rows)


def _labels_table() -> str:
    """The ontology: every conflict type and divergence axis with its definition."""
    rows = [["conflict type", label.id, label.definition] for label in CONFLICT_TYPES]
    rows += [
        ["axis" + ("" if label.primary else " (provisional)"), label.id, label.definition]
        for label in DIVERGENCE_AXES
    ]
    return _markdown_table(["kind", "id", "definition (ours)"], rows)


def _how_built_section(stats: SplitStats, build_params: dict) -> str:
    """What cleaning and the article-disjoint split removed, in the build's own counts."""
    return f"""## How it was built

Pool rows: {stats.pool_rows}; duplicate pair_id rows removed (LLM copy kept): {stats.duplicate_rows_removed};
pairs below confidence {build_params.get("min_confidence")} removed: {stats.low_confidence_removed}; \
pairs after cleaning:
{stats.pairs_after_cleaning}. Article/claim components: {stats.components} \
(largest: {stats.largest_component_pairs} pairs).
Largest component cut (percolating pool): {"yes" if stats.percolating else "no"}; \
**bridging pairs dropped: {stats.bridging_pairs_dropped}**;
heuristic pairs dropped from dev/test components: {stats.heuristic_pairs_dropped_from_eval}.
"""


def dataset_card(
    configs: dict,
    stats: SplitStats,
    audit_lines: list[str],
    build_params: dict,
    funnel: dict | None = None,
) -> str:
    """README.md text: YAML header then the card. Deterministic in its inputs."""
    empty = empty_splits(configs)
    heuristic_eval = build_params.get("eval_labels", "llm") == "heuristic"
    eval_pairs = (
        "LLM- and heuristic-labelled pairs (built with `--eval-labels heuristic`)"
        if heuristic_eval
        else "only LLM-labelled pairs"
    )
    header = _card_header(build_params, empty, heuristic_eval)
    body = f"""# BioDivergence claim pairs (built with medunlearn)

Pairs of claims from biomedical abstracts, each labelled with why they disagree: a conflict type (one of
six), the divergence axes on which their contexts differ (a subset of 13), the dominant confounder, a
reconciliation sentence and the evidence span of each claim (in v1.0 the claim text itself).

Source pool: {build_params.get("source", "unknown")}.
{_heuristic_eval_warning(configs) if heuristic_eval else ""}
## Configurations and splits

- `v1.0` (default): article-disjoint. Articles and claims linked by any pair stay in one split; dev and test
  hold {eval_pairs}; train adds heuristic pairs with confidence >= \
{build_params.get("min_confidence")}.
- `v1.0-pairlevel` (legacy): de-duplicated by pair only; articles leak between its splits (see the audit).

{_split_table(configs)}
{_empty_splits_note(empty)}
v1.0 pairs per domain (each domain approaches the published proportions on its own):

{_domain_table(configs)}

{_how_built_section(stats, build_params)}
{funnel_section(funnel)}
Build parameters (rebuild with the same pool and these to get identical files):

```json
{json.dumps(build_params, indent=2, sort_keys=True)}
```

## Leakage audit

```
{chr(10).join(audit_lines)}
```

## Labels

{_labels_table()}

Which four axes the paper calls provisional is not known; the flags above are this build's choice.

## Citation

```bibtex
{CITATION}
```
"""
    return "---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + body


def write_hub_folder(
    configs: dict,
    stats: SplitStats,
    out_dir: str | Path,
    build_params: dict,
    funnel: dict | None = None,
) -> Path:
    """Write every non-empty config/split as parquet, ``build.json`` and the README card (with the
    construction ``funnel`` when given); returns ``out_dir``. The folder is staged and swapped in whole."""
    from medunlearn.biodivergence.audit import audit_configs

    out_dir = Path(out_dir)
    empty = empty_splits(configs)
    report = audit_configs(configs, stats.to_dict(), build_params.get("eval_labels", "llm"))
    build = {"parameters": build_params, "stats": stats.to_dict(), "audit": report.to_dict()}
    if empty:
        build["empty_splits"] = empty
    if funnel:
        build["funnel"] = funnel
    with staged_folder(out_dir) as staging:
        for name in CONFIG_NAMES:
            for split in SPLITS:
                if split not in empty.get(name, []):
                    write_parquet(configs[name][split], staging / name / f"{split}.parquet")
        atomic_write_text(staging / "build.json", json.dumps(build, indent=2, sort_keys=True) + "\n")
        atomic_write_text(
            staging / "README.md", dataset_card(configs, stats, report.lines(), build_params, funnel)
        )
    return out_dir
