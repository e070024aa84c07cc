"""v1.0 (article-disjoint) and v1.0-pairlevel (legacy) splits of a pair pool.

v1.0 [paper]: articles linked by any pair stay in one split; dev and test hold only LLM-labelled pairs; train
adds heuristic pairs with confidence >= 0.45; a pair_id present twice keeps the LLM-labelled copy.

How we do it [ours]:

1. *Clean.* Duplicated pair_ids keep the LLM copy (then the most confident, then the first); then every
   pair with confidence < 0.45 is dropped, whatever its source.
2. *Components.* Each pair touches four keys: its two articles and its two (normalised) claim texts. The
   connected components of the pair–key graph are what union-find over "pair joins its keys" gives; we get
   them from ``scipy.sparse.csgraph.connected_components`` (linear time, no Python loop per pair). Keeping
   whole components in one split makes the splits article-, claim- and pair-disjoint at once.
3. *Percolation.* A component larger than ``cap = max_unit_share × min(dev target, test target)`` can only go
   to train. When such components hold more pairs than the train target, the pool percolates (a few hub
   articles/claims join most pairs). We then take the highest-degree keys of those components as *hubs*
   (the fewest hubs, found by doubling then bisection, that bring the oversized total under the train
   target), recompute components without them, and keep hubs in train. A piece moved to dev/test loses its
   pairs that touch a hub: those are the *bridging pairs dropped*, counted in the build stats, audit and card.
4. *Assignment.* Units (components or pieces) that may go to dev/test are those no larger than ``cap``,
   keeping at least one LLM pair and losing at most ``max_drop_fraction`` of their pairs. Per domain, they are
   ordered by drop fraction (cheapest first), ties in seeded random order; a cumulative sum of the pairs they
   keep picks units until the dev+test target is reached (a unit is taken while the midpoint of its span is
   under the target), and a second seeded order splits those between dev and test in the published ratio.
   Heuristic pairs inside dev/test units are dropped (dev/test hold only LLM labels).

Pair-level [ours, after the paper's description]: de-duplicated by pair only, shuffled with the seed;
dev/test are drawn from LLM-labelled pairs in the 8,750 / 1,250 / 2,500 proportions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from medunlearn.biodivergence.schema import DOMAINS, MIN_CONFIDENCE

SPLITS = ("train", "dev", "test")
V1_PROPORTIONS = (10_183, 840, 842)  # [paper] v1.0 train / dev / test
PAIRLEVEL_PROPORTIONS = (8_750, 1_250, 2_500)  # [paper] v1.0-pairlevel train / dev / test


@dataclass
class SplitConfig:
    """Parameters of the split builder (defaults: the paper's proportions and threshold, the rest ours)."""

    seed: int = 0
    min_confidence: float = MIN_CONFIDENCE
    proportions: tuple[int, int, int] = V1_PROPORTIONS
    pairlevel_proportions: tuple[int, int, int] = PAIRLEVEL_PROPORTIONS
    max_unit_share: float = 0.25
    max_drop_fraction: float = 0.5


@dataclass
class SplitStats:
    """What the builder did; written to the folder, the audit and the dataset card."""

    pool_rows: int = 0
    duplicate_rows_removed: int = 0
    low_confidence_removed: int = 0
    pairs_after_cleaning: int = 0
    components: int = 0
    largest_component_pairs: int = 0
    percolating: bool = False
    hub_keys: int = 0
    bridging_pairs_dropped: int = 0
    heuristic_pairs_dropped_from_eval: int = 0
    split_sizes: dict = field(default_factory=dict)
    pairlevel_split_sizes: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def clean_pool(frame: pd.DataFrame, min_confidence: float = MIN_CONFIDENCE) -> tuple[pd.DataFrame, dict]:
    """Keep one row per pair_id (the LLM copy, then the most confident, then the first) and drop
    every row with confidence < ``min_confidence``. Returns the cleaned frame and the counts removed."""
    order = np.lexsort((
        np.arange(len(frame)),
        -frame["confidence"].to_numpy(np.float64),
        (frame["label_source"] != "llm").to_numpy(),
        pd.factorize(frame["pair_id"], sort=True)[0],
    ))
    ordered = frame.iloc[order]
    unique = ordered[~ordered["pair_id"].duplicated(keep="first")]
    confident = unique[unique["confidence"].to_numpy() >= min_confidence]
    counts = {"duplicate_rows_removed": len(frame) - len(unique), "low_confidence_removed": len(unique) - len(confident)}
    return confident.sort_values("pair_id", kind="stable").reset_index(drop=True), counts


def normalise_claim(texts: pd.Series) -> pd.Series:
    """Claim identity for disjointness: lower case, single spaces, no trailing punctuation."""
    return texts.str.lower().str.replace(r"\s+", " ", regex=True).str.strip().str.rstrip(".;:!? ")


def pair_keys(frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Integer ids of each pair's four keys (article_a, article_b, claim_a, claim_b); returns (n × 4, n_keys)."""
    keys = pd.concat([
        "article:" + frame["article_a"], "article:" + frame["article_b"],
        "claim:" + normalise_claim(frame["claim_a"]), "claim:" + normalise_claim(frame["claim_b"]),
    ], ignore_index=True)
    codes, uniques = pd.factorize(keys)
    return codes.reshape(4, len(frame)).T.copy(), len(uniques)


def key_components(keys: np.ndarray, n_keys: int, inactive: np.ndarray | None = None) -> np.ndarray:
    """Component label of every pair in the pair–key graph (pairs are nodes 0..n-1, keys n..n+n_keys-1).

    Keys flagged in ``inactive`` are left out, so a pair touching only inactive keys is its own component.
    """
    n = keys.shape[0]
    rows = np.repeat(np.arange(n), keys.shape[1])
    cols = keys.ravel() + n
    if inactive is not None:
        keep = ~inactive[keys.ravel()]
        rows, cols = rows[keep], cols[keep]
    graph = coo_matrix((np.ones(rows.size, np.int8), (rows, cols)), shape=(n + n_keys, n + n_keys)).tocsr()
    _, labels = connected_components(graph, directed=False)
    return pd.factorize(labels[:n])[0]


def naive_union_find_components(keys: np.ndarray) -> np.ndarray:
    """Reference implementation (Python union-find, one pair at a time); used by tests and the bench only."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for row in keys.tolist():
        root = find(row[0])
        for key in row[1:]:
            other = find(key)
            if other != root:
                parent[other] = root
    return pd.factorize(np.array([find(row[0]) for row in keys.tolist()]))[0]


def _targets(total: float, proportions) -> np.ndarray:
    weights = np.asarray(proportions, np.float64)
    return total * weights / weights.sum()


def _find_hubs(keys, n_keys, labels, sizes, cap, train_target) -> tuple[np.ndarray, np.ndarray]:
    """The fewest highest-degree keys of oversized components whose removal brings the pairs that can only
    go to train (oversized pieces + pairs touching only hubs) under ``train_target``. Returns (inactive, labels)."""
    oversized_pair = sizes[labels] > cap
    degree = np.bincount(keys[oversized_pair].ravel(), minlength=n_keys)
    ranked = np.lexsort((np.arange(n_keys), -degree))[: int((degree > 0).sum())]

    def attempt(k: int):
        inactive = np.zeros(n_keys, bool)
        inactive[ranked[:k]] = True
        new_labels = key_components(keys, n_keys, inactive)
        new_sizes = np.bincount(new_labels)
        core = inactive[keys].all(axis=1)
        forced = int(((new_sizes[new_labels] > cap) | core).sum())
        return forced <= train_target, inactive, new_labels

    low, high = 0, 1
    ok, inactive, new_labels = attempt(high)
    while not ok and high < ranked.size:
        low, high = high, min(2 * high, ranked.size)
        ok, inactive, new_labels = attempt(high)
    best = (inactive, new_labels)
    while high - low > 1:
        middle = (low + high) // 2
        ok, inactive, new_labels = attempt(middle)
        if ok:
            high, best = middle, (inactive, new_labels)
        else:
            low = middle
    return best


def _groupwise_cumsum(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Cumulative sum restarting at every change of ``groups`` (which must be sorted)."""
    total = np.cumsum(values)
    starts = np.r_[0, np.flatnonzero(np.diff(groups)) + 1]
    offsets = np.repeat(total[starts] - values[starts], np.diff(np.r_[starts, values.size]))
    return total - offsets


def article_disjoint_split(frame: pd.DataFrame, config: SplitConfig | None = None) -> tuple[np.ndarray, dict]:
    """Split label per row of a *cleaned* pool: "train", "dev", "test" or "" (dropped), and the stats."""
    config = config or SplitConfig()
    n = len(frame)
    stats = {"components": 0, "largest_component_pairs": 0, "percolating": False, "hub_keys": 0,
             "bridging_pairs_dropped": 0, "heuristic_pairs_dropped_from_eval": 0}
    if n == 0:
        return np.array([], dtype=object), stats
    rng = np.random.default_rng(config.seed)
    keys, n_keys = pair_keys(frame)
    labels = key_components(keys, n_keys)
    sizes = np.bincount(labels)
    stats["components"], stats["largest_component_pairs"] = int(sizes.size), int(sizes.max())

    train_target, dev_target, test_target = _targets(n, config.proportions)
    cap = max(1.0, config.max_unit_share * min(dev_target, test_target))
    inactive = np.zeros(n_keys, bool)
    if sizes[sizes > cap].sum() > train_target:
        stats["percolating"] = True
        inactive, labels = _find_hubs(keys, n_keys, labels, sizes, cap, train_target)
        sizes = np.bincount(labels)
        stats["hub_keys"] = int(inactive.sum())

    touches_hub = inactive[keys].any(axis=1)
    is_llm = (frame["label_source"] == "llm").to_numpy()
    keeps_if_moved = is_llm & ~touches_hub
    n_units = sizes.size
    kept = np.bincount(labels, weights=keeps_if_moved, minlength=n_units)
    drop_fraction = 1.0 - kept / sizes
    core_unit = np.zeros(n_units, bool)
    core_unit[labels[inactive[keys].all(axis=1)]] = True
    domain_codes = pd.Categorical(frame["domain"], categories=DOMAINS).codes.astype(np.int64)
    unit_domain = np.bincount(labels * len(DOMAINS) + domain_codes, minlength=n_units * len(DOMAINS))
    unit_domain = unit_domain.reshape(n_units, len(DOMAINS)).argmax(axis=1)
    candidate = (sizes <= cap) & (kept >= 1) & (drop_fraction <= config.max_drop_fraction) & ~core_unit

    # Stage 1: per domain, cheapest candidates first until the dev+test target of that domain is reached.
    domain_pairs = np.bincount(unit_domain, weights=sizes, minlength=len(DOMAINS))
    eval_target = domain_pairs * (dev_target + test_target) / n
    order = np.lexsort((rng.random(n_units), drop_fraction, unit_domain))
    order = order[candidate[order]]
    midpoint = _groupwise_cumsum(kept[order], unit_domain[order]) - kept[order] / 2
    chosen = order[midpoint < eval_target[unit_domain[order]]]
    # Stage 2: a fresh seeded order splits the chosen units between dev and test in the published ratio.
    order = chosen[np.lexsort((rng.random(chosen.size), unit_domain[chosen]))]
    chosen_kept = np.bincount(unit_domain[order], weights=kept[order], minlength=len(DOMAINS))
    dev_share = dev_target / (dev_target + test_target)
    midpoint = _groupwise_cumsum(kept[order], unit_domain[order]) - kept[order] / 2
    unit_split = np.full(n_units, "train", dtype=object)
    unit_split[order] = np.where(midpoint < chosen_kept[unit_domain[order]] * dev_share, "dev", "test")

    split = unit_split[labels]
    in_eval = split != "train"
    stats["bridging_pairs_dropped"] = int((in_eval & touches_hub).sum())
    stats["heuristic_pairs_dropped_from_eval"] = int((in_eval & ~touches_hub & ~is_llm).sum())
    split = np.where(in_eval & ~keeps_if_moved, "", split).astype(object)
    return split, stats


def pair_level_split(frame: pd.DataFrame, config: SplitConfig | None = None) -> np.ndarray:
    """Legacy split label per row of a cleaned pool: dev/test drawn at random from LLM pairs, the rest train."""
    config = config or SplitConfig()
    n = len(frame)
    rng = np.random.default_rng(config.seed + 1)
    _, dev_target, test_target = np.rint(_targets(n, config.pairlevel_proportions)).astype(int)
    llm_rows = np.flatnonzero((frame["label_source"] == "llm").to_numpy())
    llm_rows = rng.permutation(llm_rows)
    n_test = min(test_target, llm_rows.size)
    n_dev = min(dev_target, llm_rows.size - n_test)
    split = np.full(n, "train", dtype=object)
    split[llm_rows[:n_test]] = "test"
    split[llm_rows[n_test:n_test + n_dev]] = "dev"
    return split


def build_splits(pool: pd.DataFrame, config: SplitConfig | None = None) -> tuple[dict, SplitStats]:
    """Both configurations from a validated pool: ``{"v1.0": {split: frame}, "v1.0-pairlevel": {...}}``."""
    config = config or SplitConfig()
    cleaned, counts = clean_pool(pool, config.min_confidence)
    split, split_stats = article_disjoint_split(cleaned, config)
    legacy = pair_level_split(cleaned, config)
    configs = {
        "v1.0": {name: cleaned[split == name].reset_index(drop=True) for name in SPLITS},
        "v1.0-pairlevel": {name: cleaned[legacy == name].reset_index(drop=True) for name in SPLITS},
    }
    stats = SplitStats(pool_rows=len(pool), pairs_after_cleaning=len(cleaned), **counts, **split_stats)
    stats.split_sizes = {name: len(frame) for name, frame in configs["v1.0"].items()}
    stats.pairlevel_split_sizes = {name: len(frame) for name, frame in configs["v1.0-pairlevel"].items()}
    return configs, stats
