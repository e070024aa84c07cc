"""Loader for the released BioDivergence dataset (``EliasHossain/BioDivergence-Silver-v1.0``) or a local copy.

The released schema is not documented where this project could read it, so every rename lives in ONE
explicit table, :data:`RELEASED_COLUMN_MAP` (released column → our column), and label values go through
:func:`normalise_label` (display names such as "Contextual contradiction" → ``contextual_contradiction``).
A column already named as ours passes through unchanged. When the release turns out to use other names,
edit the table (or pass ``column_map=``) — nothing else changes.

Columns the release may lack get explicit defaults [ours]: ``label_source`` "llm" and ``confidence`` 1.0 (the
release is the silver, LLM-labelled set), ``domain`` "clinical_trials_epidemiology", empty abstracts and
reconciliation, confounder "none", evidence = the claim (the v1.0 claim-verbatim rule).
"""

from __future__ import annotations

import re

from medunlearn.biodivergence.schema import OPTIONAL_COLUMN_DEFAULTS, PAIR_COLUMNS, REQUIRED_COLUMNS
from medunlearn.data_loading import load_config
from medunlearn.errors import MedunlearnError
from medunlearn.ontology.biodivergence import AXIS_IDS, CONFLICT_TYPES, DIVERGENCE_AXES, NO_CONFOUNDER

RELEASED_REPO = "EliasHossain/BioDivergence-Silver-v1.0"

# released column -> our column. Our own names map to themselves implicitly.
RELEASED_COLUMN_MAP: dict[str, str] = {
    "id": "pair_id",
    "pair_uid": "pair_id",
    "claim_1": "claim_a",
    "claim_2": "claim_b",
    "claim1": "claim_a",
    "claim2": "claim_b",
    "pmid_a": "article_a",
    "pmid_b": "article_b",
    "pmid_1": "article_a",
    "pmid_2": "article_b",
    "abstract_1": "abstract_a",
    "abstract_2": "abstract_b",
    "conflict_label": "conflict_type",
    "label": "conflict_type",
    "divergence_axes": "axes",
    "confounder": "dominant_confounder",
    "reconciliation_explanation": "reconciliation",
    "explanation": "reconciliation",
    "evidence_span_a": "evidence_a",
    "evidence_span_b": "evidence_b",
    "evidence_1": "evidence_a",
    "evidence_2": "evidence_b",
    "source": "label_source",
    "annotation_source": "label_source",
    "label_confidence": "confidence",
}
RELEASED_SPLIT_MAP: dict[str, str] = {
    "validation": "dev",
    "valid": "dev",
    "dev": "dev",
    "train": "train",
    "test": "test",
}


class ReleasedSchemaError(MedunlearnError, ValueError):
    """The released data lacks a column we need, even after the column map."""


def normalise_label(value: str | None) -> str:
    """Lower-case, spaces/hyphens/slashes to underscores, display names to ids.

    >>> normalise_label("Contextual contradiction"), normalise_label("assay/detection protocol")
    ('contextual_contradiction', 'assay_protocol')
    """
    if value is None:
        return NO_CONFOUNDER
    key = re.sub(r"[\s/\-]+", "_", str(value).strip().lower())
    by_name = {
        re.sub(r"[\s/\-]+", "_", label.name): label.id for label in (*CONFLICT_TYPES, *DIVERGENCE_AXES)
    }
    return by_name.get(key, key) if key else NO_CONFOUNDER


def _map_batch(batch: dict) -> dict:
    batch["conflict_type"] = [normalise_label(v) for v in batch["conflict_type"]]
    batch["axes"] = [[normalise_label(a) for a in (axes or [])] for axes in batch["axes"]]
    if "dominant_confounder" in batch:
        batch["dominant_confounder"] = [normalise_label(v) for v in batch["dominant_confounder"]]
    return batch


def load_released(
    path_or_repo: str = RELEASED_REPO,
    config: str | None = None,
    *,
    column_map: dict[str, str] | None = None,
    split_map: dict[str, str] | None = None,
):
    """The released dataset as a ``DatasetDict`` in our schema (splits train/dev/test).

    ``path_or_repo`` is a Hub id or a local folder shaped like a Hub dataset (README ``configs:`` or plain
    data files). Offline, only a local folder or the Hub cache works.
    """
    from datasets import DatasetDict

    column_map = RELEASED_COLUMN_MAP if column_map is None else column_map
    split_map = RELEASED_SPLIT_MAP if split_map is None else split_map
    loaded = load_config(path_or_repo, config)
    out = {}
    for split_name, dataset in loaded.items():
        renames = {
            old: new
            for old, new in column_map.items()
            if old in dataset.column_names and new not in dataset.column_names
        }
        dataset = dataset.rename_columns(renames)
        missing = [
            name
            for name in REQUIRED_COLUMNS
            if name not in dataset.column_names and name not in ("label_source", "confidence", "domain")
        ]
        if missing:
            raise ReleasedSchemaError(
                f"{path_or_repo} split {split_name!r}: no column for {missing} after the column map; "
                f"columns are {dataset.column_names}. Add them to RELEASED_COLUMN_MAP or pass column_map="
            )
        defaults = {
            "label_source": "llm",
            "confidence": 1.0,
            "domain": "clinical_trials_epidemiology",
            **OPTIONAL_COLUMN_DEFAULTS,
        }
        for name, value in defaults.items():
            if name not in dataset.column_names:
                dataset = dataset.add_column(name, [value] * len(dataset))
        for side in ("a", "b"):
            if f"evidence_{side}" not in dataset.column_names:
                dataset = dataset.add_column(f"evidence_{side}", dataset[f"claim_{side}"])
        dataset = dataset.map(_map_batch, batched=True)
        unknown = sorted(set(dataset["conflict_type"]) - {label.id for label in CONFLICT_TYPES})
        if unknown:
            raise ReleasedSchemaError(
                f"{path_or_repo} split {split_name!r}: unknown conflict types {unknown}"
            )
        unknown_axes = sorted({a for axes in dataset["axes"] for a in axes} - set(AXIS_IDS))
        if unknown_axes:
            raise ReleasedSchemaError(f"{path_or_repo} split {split_name!r}: unknown axes {unknown_axes}")
        out[split_map.get(split_name, split_name)] = dataset.select_columns(list(PAIR_COLUMNS))
    return DatasetDict(out)
