"""BioDivergence construction: from abstracts to a silver-labelled pair pool (docs:
biodivergence-construction.md).

Stages, each a module with small pure functions, and :func:`mine_pool` running them all, resumably:
read (:func:`read_abstracts`) → dedup (:func:`deduplicate_abstracts`, :func:`deduplicate_claims`) → claims
(:func:`extract_claims`) → domains (:func:`assign_domains`) → pairs (:func:`mine_pairs`) → silver labels
(:func:`silver_labels`) → pool (:func:`pool_rows`). The pool goes to the existing split builders
(:func:`medunlearn.biodivergence.build_biodivergence` with ``PoolSource(abstracts=[...])``).

Heavy imports (sentence-transformers, FAISS, datasketch, pysbd) happen inside the functions that need them.
"""

from medunlearn.biodivergence.mining.labels import (
    LABEL_COLUMNS,
    LabelConfig,
    LabellingIncompleteError,
    heuristic_labels,
    label_prompt,
    label_schema,
    llm_labels,
    pool_rows,
    repair_llm_label,
    silver_labels,
)
from medunlearn.biodivergence.mining.pipeline import (
    STAGES,
    MineConfig,
    MineResult,
    format_funnel,
    funnel_rows,
    mine_pool,
)

__all__ = [
    "LABEL_COLUMNS",
    "STAGES",
    "LabelConfig",
    "LabellingIncompleteError",
    "MineConfig",
    "MineResult",
    "format_funnel",
    "funnel_rows",
    "heuristic_labels",
    "label_prompt",
    "label_schema",
    "llm_labels",
    "mine_pool",
    "pool_rows",
    "repair_llm_label",
    "silver_labels",
]
