"""BioDivergence: contextual contradictions between claims of biomedical abstracts (docs:
benchmarks/biodivergence.md).

Data flow: a pair pool (fictitious, PubMedQA-derived or your own file) → :func:`build_splits` (v1.0
article-disjoint and v1.0-pairlevel) → :func:`write_hub_folder` (parquet + README ``configs:`` + card) →
``datasets.load_dataset(DIR, "v1.0")``; :func:`audit_folder` checks the invariants; baselines and the
``contextual_contradiction`` metric score systems.
"""

from medunlearn.biodivergence.audit import AuditReport, audit_configs, audit_folder, read_hub_folder
from medunlearn.biodivergence.build import PoolSource, build_biodivergence
from medunlearn.biodivergence.evaluate import evaluate_biodivergence, read_predictions
from medunlearn.biodivergence.export import write_hub_folder
from medunlearn.biodivergence.pools import PubMedQAPoolConfig, pubmedqa_pool, read_pool, write_pool
from medunlearn.biodivergence.released import RELEASED_COLUMN_MAP, RELEASED_REPO, load_released
from medunlearn.biodivergence.schema import DOMAINS, PAIR_COLUMNS, normalise_pool, pair_features
from medunlearn.biodivergence.splits import SplitConfig, SplitStats, build_splits
from medunlearn.biodivergence.synthetic import SyntheticPoolConfig, generate_pair_pool
from medunlearn.ontology.biodivergence import AXIS_IDS, CONFLICT_TYPE_IDS, CONFLICT_TYPES, DIVERGENCE_AXES

__all__ = [
    "AXIS_IDS",
    "AuditReport",
    "CONFLICT_TYPES",
    "CONFLICT_TYPE_IDS",
    "DIVERGENCE_AXES",
    "DOMAINS",
    "PAIR_COLUMNS",
    "PubMedQAPoolConfig",
    "RELEASED_COLUMN_MAP",
    "RELEASED_REPO",
    "SplitConfig",
    "SplitStats",
    "SyntheticPoolConfig",
    "PoolSource",
    "audit_configs",
    "audit_folder",
    "build_biodivergence",
    "build_splits",
    "evaluate_biodivergence",
    "read_predictions",
    "generate_pair_pool",
    "load_released",
    "normalise_pool",
    "pair_features",
    "pubmedqa_pool",
    "read_hub_folder",
    "read_pool",
    "write_hub_folder",
    "write_pool",
]
