"""v1.0 (article-disjoint) and v1.0-pairlevel (legacy) splits of a pair pool.

v1.0 [paper]: articles linked by any pair stay in one split; dev and test hold only LLM-labelled pairs; train
adds heuristic pairs with confidence >= 0.45; a pair_id present twice keeps the LLM-labelled copy.

``SplitConfig.eval_labels`` [ours]: ``"llm"`` (default) is the paper's rule; ``"heuristic"`` admits heuristic
labels (confidence >= 0.45 too) to dev and test as well, for builds without an LLM labeller. Below, "LLM pair"
means a pair whose label source dev/test admit (:func:`~medunlearn.biodivergence.schema.eval_label_sources`).

How we do it [ours]:

1. *Clean.* Duplicated pair_ids keep the LLM copy (then the most confident, then the first); then every
   pair with confidence < 0.45 is dropped, whatever its source. (Rows sharing a pair_id are copies of one
   pair: the pool reader refuses two different pairs under one id, ``schema.PAIR_IDENTITY``.)
2. *Components.* Each pair touches four keys: its two articles and its two (normalised) claim texts. The
   connected components of the pair–key graph are what union-find over "pair joins its keys" gives; we get
   them from ``scipy.sparse.csgraph.connected_components`` (linear time, no Python loop per pair). Keeping
   whole components in one split makes the splits article-, claim- and pair-disjoint at once.
3. *Percolation.* When a domain's small units cannot fill its dev+test (within 5%), the pool percolates: a few
   hub articles/claims join most pairs into one giant component. We then cut that domain's largest component
   rather than send it all to train, with two cutters and keep the cut that reaches the missing dev/test sizes
   with the fewest bridging pairs: (a) *hub peeling*: keep the 1, 2, 4, ... highest-degree keys in train, take
   the pieces that fall apart without them cheapest first (:func:`peel_component`); (b) *spectral sweep*:
   order the keys along the Fiedler vector of the key graph and cut the order twice (:func:`carve_component`),
   for pools without hubs. Pairs that straddle the cut are the *bridging pairs dropped*, counted in the build
   stats, audit and card. (Minimum balanced cuts are NP-hard; these are standard heuristics.)
4. *Assignment* (done before 3). Units (components) that may go to dev/test are those no larger than
   ``cap = max_unit_share × min(dev target, test target)``, keeping at least one LLM pair and losing at most
   ``max_drop_fraction`` of their pairs (heuristic pairs cannot enter dev/test). Per domain, they are ordered
   by drop fraction (cheapest first), ties in seeded random order; a cumulative sum of the pairs they keep
   picks units until the domain's dev+test target is reached (a unit is taken while the midpoint of its span
   is under the target), and a second seeded order splits those between dev and test in the published
   ratio. Everything else goes to train.

Pair-level [ours, after the paper's description]: de-duplicated by pair only, shuffled with the seed;
dev/test are drawn from LLM-labelled pairs in the 8,750 / 1,250 / 2,500 proportions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from medunlearn.biodivergence.schema import MIN_CONFIDENCE, domain_order, eval_label_sources, normalise_claim

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
    eval_labels: str = "llm"  # "llm" [paper] or "heuristic" [ours]: the label sources dev/test admit

    def eval_sources(self) -> tuple[str, ...]:
        return eval_label_sources(self.eval_labels)


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
    carved_component_pairs: int = 0
    bridging_pairs_dropped: int = 0
    heuristic_pairs_dropped_from_eval: int = 0
    split_sizes: dict = field(default_factory=dict)
    pairlevel_split_sizes: dict = field(default_factory=dict)
    eval_labels: str = "llm"
    eval_label_sources: dict = field(default_factory=dict)  # v1.0 {dev|test: {label source: pairs}}

    def to_dict(self) -> dict:
        return asdict(self)


def clean_pool(frame: pd.DataFrame, min_confidence: float = MIN_CONFIDENCE) -> tuple[pd.DataFrame, dict]:
    """Keep one row per pair_id (the LLM copy, then the most confident, then the first) and drop
    every row with confidence < ``min_confidence``. Returns the cleaned frame and the counts removed."""
    order = np.lexsort(
        (
            np.arange(len(frame)),
            -frame["confidence"].to_numpy(np.float64),
            (frame["label_source"] != "llm").to_numpy(),
            pd.factorize(frame["pair_id"], sort=True)[0],
        )
    )
    pair_ids = frame["pair_id"].to_numpy(object)[order]
    first_copy = np.r_[True, pair_ids[1:] != pair_ids[:-1]]
    confident = frame["confidence"].to_numpy(np.float64)[order] >= min_confidence
    counts = {
        "duplicate_rows_removed": int((~first_copy).sum()),
        "low_confidence_removed": int((first_copy & ~confident).sum()),
    }
    # ``order`` is sorted by pair_id already, so one take gives the cleaned frame in pair_id order.
    return frame.iloc[order[first_copy & confident]].reset_index(drop=True), counts


def pair_keys(frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Integer ids of each pair's four keys (article_a, article_b, claim_a, claim_b); returns (n × 4,
    n_keys)."""
    n = len(frame)
    article_codes, articles = pd.factorize(
        np.concatenate([frame["article_a"].to_numpy(object), frame["article_b"].to_numpy(object)])
    )
    # Normalise each distinct claim text once, then merge texts that normalise alike.
    raw_codes, raw_claims = pd.factorize(
        np.concatenate([frame["claim_a"].to_numpy(object), frame["claim_b"].to_numpy(object)])
    )
    normalised_codes, _ = pd.factorize(normalise_claim(pd.Series(raw_claims, dtype=object)).to_numpy(object))
    claim_codes = normalised_codes[raw_codes] + len(articles)
    keys = np.stack([article_codes[:n], article_codes[n:], claim_codes[:n], claim_codes[n:]], axis=1)
    return keys, int(keys.max()) + 1 if n else 0


def key_components(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """Component label of every pair in the pair–key graph (pairs are nodes 0..n-1, keys n..n+n_keys-1)."""
    n = keys.shape[0]
    rows = np.repeat(np.arange(n), keys.shape[1])
    cols = keys.ravel() + n
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


def spectral_key_order(keys: np.ndarray, n_keys: int, seed: int = 0, max_iterations: int = 100) -> np.ndarray:
    """Position of every key along the Fiedler direction of the key graph (keys joined by shared pairs).

    Keys that are close in this order are densely linked, so cutting the order at one point separates the
    graph with few crossing pairs (spectral sweep cut). The eigenvector comes from LOBPCG with a seeded start
    and a bounded number of iterations: an approximate vector still gives a valid order, only a worse cut.
    """
    import warnings

    from scipy.sparse import diags
    from scipy.sparse.linalg import lobpcg

    n = keys.shape[0]
    incidence = coo_matrix(
        (np.ones(keys.size), (np.repeat(np.arange(n), keys.shape[1]), keys.ravel())), shape=(n, n_keys)
    ).tocsr()
    adjacency = (incidence.T @ incidence).tocsr()
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    if n_keys < 3 or degree.min() <= 0:
        return np.arange(n_keys)
    root = np.sqrt(degree)
    normalised = diags(1 / root) @ adjacency @ diags(1 / root)
    if n_keys <= 500:  # small graphs: an exact dense eigendecomposition is cheap (and LOBPCG needs n >> k)
        _, vectors = np.linalg.eigh(normalised.toarray())
        return _rank(vectors[:, -2] / root)
    start = np.random.default_rng(seed).standard_normal((n_keys, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LOBPCG warns when it stops before full convergence; see docstring
        _, vectors = lobpcg(
            normalised,
            start,
            Y=(root / np.linalg.norm(root))[:, None],
            largest=True,
            maxiter=max_iterations,
            tol=1e-5,
        )
    return _rank(vectors[:, 0] / root)


def _rank(values: np.ndarray) -> np.ndarray:
    """Position of each value in ascending order (ties by index, so the order is deterministic)."""
    order = np.lexsort((np.arange(values.size), values))
    position = np.empty(values.size, np.int64)
    position[order] = np.arange(values.size)
    return position


def _best_cut(kept_before: np.ndarray, crossing: np.ndarray, need: float, low: int = 0) -> int:
    """The cut c >= low whose kept count is within 10% of ``need`` with the fewest crossing pairs
    (or, if none is that close, the one closest to ``need``)."""
    candidates = np.arange(low, kept_before.size)
    kept = kept_before[candidates]
    close = np.abs(kept - need) <= 0.1 * max(need, 1.0)
    if close.any():
        return int(candidates[close][np.argmin(crossing[candidates][close])])
    return int(candidates[np.argmin(np.abs(kept - need))])


def carve_component(
    keys: np.ndarray,
    is_llm: np.ndarray,
    position: np.ndarray,
    dev_need: float,
    test_need: float,
    test_at_end: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Sweep-cut one component along a key order into segments: dev [0, c1), test [c1, c2), train [c2, end)
    or, with ``test_at_end``, dev [0, c1), train [c1, c2), test [c2, end).

    A pair stays only if all its keys fall in one segment; pairs that straddle a cut are dropped (bridging),
    and heuristic pairs in dev/test are dropped. c1 is chosen so that dev keeps about ``dev_need`` LLM pairs
    with the fewest straddling pairs, then c2 likewise for test among the pairs beyond c1. Returns the
    split per pair ("" = dropped) and the mask of straddling (bridging) pairs.
    """
    low, high = position[keys].min(axis=1), position[keys].max(axis=1)
    size = int(position.max()) + 2
    kept_before = np.cumsum(np.bincount(high[is_llm] + 1, minlength=size))  # LLM pairs entirely before cut c
    crossing = np.cumsum(np.bincount(low + 1, minlength=size) - np.bincount(high + 1, minlength=size))
    c1 = _best_cut(kept_before, crossing, dev_need)
    after = low >= c1  # pairs straddling c1 are already lost; the second cut only counts the others
    if test_at_end:  # sweep the remaining pairs from the other end of the order
        low, high = int(position.max()) - high, int(position.max()) - low
        start = 0
    else:
        start = c1
    kept_after = np.cumsum(np.bincount(high[after & is_llm] + 1, minlength=size))
    crossing_after = np.cumsum(
        np.bincount(low[after] + 1, minlength=size) - np.bincount(high[after] + 1, minlength=size)
    )
    c2 = _best_cut(kept_after, crossing_after, test_need, low=start)
    split = np.full(keys.shape[0], "", dtype=object)
    first_segment = position[keys].max(axis=1) < c1
    split[first_segment] = "dev"
    split[after & (high < c2)] = "test"  # (low, high) are mirrored when the test segment is at the end
    split[after & (low >= c2)] = "train"
    straddling = split == ""
    split[(split != "train") & ~is_llm] = ""
    return split, straddling


def _groupwise_cumsum(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Cumulative sum restarting at every change of ``groups`` (which must be sorted)."""
    if values.size == 0:
        return values.astype(np.float64)
    total = np.cumsum(values)
    starts = np.r_[0, np.flatnonzero(np.diff(groups)) + 1]
    offsets = np.repeat(total[starts] - values[starts], np.diff(np.r_[starts, values.size]))
    return total - offsets


def peel_component(
    keys: np.ndarray,
    is_llm: np.ndarray,
    n_hubs: int,
    dev_need: float,
    test_need: float,
    cap: float,
    max_drop_fraction: float,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Cut one component by keeping its ``n_hubs`` highest-degree keys (hub articles/claims) in train.

    Without the hubs the component falls into pieces. A piece moved to dev/test loses its pairs that touch a
    hub (the bridging pairs); pieces are taken cheapest first (share of pairs lost), ties in seeded random
    order, until dev+test keep about ``dev_need + test_need`` LLM pairs, then split between dev and test in
    that ratio. Returns the split per pair ("" = dropped) and the mask of bridging pairs.
    """
    rng = np.random.default_rng(seed)
    n_keys = int(keys.max()) + 1
    degree = np.bincount(keys.ravel(), minlength=n_keys)
    hub = np.zeros(n_keys, bool)
    hub[np.lexsort((np.arange(n_keys), -degree))[:n_hubs]] = True
    touches_hub = hub[keys].any(axis=1)
    # A hub occurrence gets a fresh key of its own, so hubs no longer join anything.
    peeled = keys.copy()
    peeled[hub[keys]] = n_keys + np.arange(int(hub[keys].sum()))
    labels = key_components(peeled, int(peeled.max()) + 1)
    sizes = np.bincount(labels)
    keeps = is_llm & ~touches_hub
    kept = np.bincount(labels, weights=keeps, minlength=sizes.size)
    only_hubs = np.zeros(sizes.size, bool)
    only_hubs[labels[hub[keys].all(axis=1)]] = True
    drop_fraction = 1.0 - kept / sizes
    candidate = (sizes <= cap) & (kept >= 1) & (drop_fraction <= max_drop_fraction) & ~only_hubs
    order = np.lexsort((rng.random(sizes.size), drop_fraction))
    order = order[candidate[order]]
    midpoint = np.cumsum(kept[order]) - kept[order] / 2
    chosen = order[midpoint < dev_need + test_need]
    chosen = chosen[rng.permutation(chosen.size)]
    midpoint = np.cumsum(kept[chosen]) - kept[chosen] / 2
    unit_split = np.full(sizes.size, "train", dtype=object)
    unit_split[chosen] = np.where(
        midpoint < kept[chosen].sum() * dev_need / max(dev_need + test_need, 1e-9), "dev", "test"
    )
    split = unit_split[labels]
    in_eval = split != "train"
    bridging = in_eval & touches_hub
    split[in_eval & ~keeps] = ""
    return split, bridging


def _carve_largest(
    keys: np.ndarray, is_llm: np.ndarray, dev_need: float, test_need: float, cap: float, config: SplitConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Cut one oversized component with both cutters and several settings; keep the cut that reaches the
    dev/test needs (within 10%) with the fewest bridging pairs, else the one that keeps the most pairs."""
    codes, uniques = pd.factorize(keys.ravel())
    sub_keys = codes.reshape(keys.shape)
    position = spectral_key_order(sub_keys, len(uniques), seed=config.seed)
    options = [
        carve_component(sub_keys, is_llm, p, dev_need, test_need, test_at_end)
        for p in (position, position.max() - position)  # spectral sweep from either end
        for test_at_end in (False, True)
    ]
    n_hubs = 1
    while n_hubs <= max(1, len(uniques) // 10):
        # Pieces may be as large as half a split: here granularity matters less than keeping pairs.
        options.append(
            peel_component(
                sub_keys,
                is_llm,
                n_hubs,
                dev_need,
                test_need,
                max(cap, 0.5 * min(dev_need, test_need)),
                config.max_drop_fraction,
                config.seed,
            )
        )
        n_hubs *= 2
    need = dev_need + test_need

    def cost(option):
        kept_in_eval = int(np.isin(option[0], ["dev", "test"]).sum())
        enough = kept_in_eval >= 0.9 * need
        return (not enough, int(option[1].sum()) if enough else -kept_in_eval)

    return min(options, key=cost)


def article_disjoint_split(frame: pd.DataFrame, config: SplitConfig | None = None) -> tuple[np.ndarray, dict]:
    """Split label per row of a *cleaned* pool: "train", "dev", "test" or "" (dropped), and the stats."""
    config = config or SplitConfig()
    n = len(frame)
    stats = {
        "components": 0,
        "largest_component_pairs": 0,
        "percolating": False,
        "carved_component_pairs": 0,
        "bridging_pairs_dropped": 0,
        "heuristic_pairs_dropped_from_eval": 0,
    }
    if n == 0:
        return np.array([], dtype=object), stats
    rng = np.random.default_rng(config.seed)
    keys, n_keys = pair_keys(frame)
    labels = key_components(keys, n_keys)
    sizes = np.bincount(labels)
    stats["components"], stats["largest_component_pairs"] = int(sizes.size), int(sizes.max())

    train_target, dev_target, test_target = _targets(n, config.proportions)
    cap = max(1.0, config.max_unit_share * min(dev_target, test_target))
    is_llm = frame["label_source"].isin(config.eval_sources()).to_numpy()
    n_units = sizes.size
    kept = np.bincount(labels, weights=is_llm, minlength=n_units)
    drop_fraction = 1.0 - kept / sizes
    # The label set is open: the paper's five domains first, then any other domain of the pool.
    domains = domain_order(frame["domain"].unique())
    n_domains = len(domains)
    domain_codes = pd.Categorical(frame["domain"], categories=domains).codes.astype(np.int64)
    unit_domain = np.bincount(labels * n_domains + domain_codes, minlength=n_units * n_domains)
    unit_domain = unit_domain.reshape(n_units, n_domains).argmax(axis=1)
    candidate = (sizes <= cap) & (kept >= 1) & (drop_fraction <= config.max_drop_fraction)

    # Stage 1: per domain, cheapest candidates first until the dev+test target of that domain is reached.
    domain_pairs = np.bincount(unit_domain, weights=sizes, minlength=n_domains)
    eval_target = domain_pairs * (dev_target + test_target) / n
    order = np.lexsort((rng.random(n_units), drop_fraction, unit_domain))
    order = order[candidate[order]]
    midpoint = _groupwise_cumsum(kept[order], unit_domain[order]) - kept[order] / 2
    chosen = order[midpoint < eval_target[unit_domain[order]]]
    # Stage 2: a fresh seeded order splits the chosen units between dev and test in the published ratio.
    order = chosen[np.lexsort((rng.random(chosen.size), unit_domain[chosen]))]
    chosen_kept = np.bincount(unit_domain[order], weights=kept[order], minlength=n_domains)
    dev_share = dev_target / (dev_target + test_target)
    midpoint = _groupwise_cumsum(kept[order], unit_domain[order]) - kept[order] / 2
    unit_split = np.full(n_units, "train", dtype=object)
    unit_split[order] = np.where(midpoint < chosen_kept[unit_domain[order]] * dev_share, "dev", "test")
    split = unit_split[labels]
    stats["heuristic_pairs_dropped_from_eval"] = int(((split != "train") & ~is_llm).sum())
    split = np.where((split != "train") & ~is_llm, "", split).astype(object)

    # Stage 3 (percolation): per domain, what small units could not supply is carved out of the domain's
    # largest component.
    chosen_kept_by_split = {
        name: np.bincount(
            unit_domain[chosen], weights=kept[chosen] * (unit_split[chosen] == name), minlength=n_domains
        )
        for name in ("dev", "test")
    }
    for domain in range(n_domains):
        share = domain_pairs[domain] / n
        dev_need = max(0.0, dev_target * share - chosen_kept_by_split["dev"][domain])
        test_need = max(0.0, test_target * share - chosen_kept_by_split["test"][domain])
        in_domain = np.flatnonzero(unit_domain == domain)
        if in_domain.size == 0 or dev_need + test_need <= 0.05 * (dev_target + test_target) * share:
            continue
        largest = int(in_domain[np.argmax(sizes[in_domain])])
        if sizes[largest] <= cap:
            continue
        rows = np.flatnonzero(labels == largest)
        carved, straddling = _carve_largest(keys[rows], is_llm[rows], dev_need, test_need, cap, config)
        stats["percolating"] = True
        stats["bridging_pairs_dropped"] += int(straddling.sum())
        stats["heuristic_pairs_dropped_from_eval"] += int(((carved == "") & ~straddling).sum())
        stats["carved_component_pairs"] += int(rows.size)
        split[rows] = carved
    return split, stats


def pair_level_split(frame: pd.DataFrame, config: SplitConfig | None = None) -> np.ndarray:
    """Legacy split label per row of a cleaned pool: dev/test drawn at random from LLM pairs, the rest
    train."""
    config = config or SplitConfig()
    n = len(frame)
    rng = np.random.default_rng(config.seed + 1)
    _, dev_target, test_target = np.rint(_targets(n, config.pairlevel_proportions)).astype(int)
    llm_rows = np.flatnonzero(frame["label_source"].isin(config.eval_sources()).to_numpy())
    llm_rows = rng.permutation(llm_rows)
    n_test = min(test_target, llm_rows.size)
    n_dev = min(dev_target, llm_rows.size - n_test)
    split = np.full(n, "train", dtype=object)
    split[llm_rows[:n_test]] = "test"
    split[llm_rows[n_test : n_test + n_dev]] = "dev"
    return split


def build_splits(pool: pd.DataFrame, config: SplitConfig | None = None) -> tuple[dict, SplitStats]:
    """Both configurations from a validated pool: ``{"v1.0": {split: frame}, "v1.0-pairlevel": {...}}``."""
    config = config or SplitConfig()
    config.eval_sources()  # an unknown eval_labels is refused before any work
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
    stats.eval_labels = config.eval_labels
    stats.eval_label_sources = {
        name: {
            str(source): int(count)
            for source, count in configs["v1.0"][name]["label_source"].value_counts().sort_index().items()
        }
        for name in ("dev", "test")
    }
    return configs, stats
