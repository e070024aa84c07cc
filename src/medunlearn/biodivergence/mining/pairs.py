"""Stage 5 of BioDivergence construction: candidate claim pairs per domain (docs/biodivergence.md).

The paper [paper] retrieves similar claims by sentence embeddings within each domain, ranks the candidates
by divergence-sensitive signals and keeps at most 10,000 per domain. Per domain, :func:`mine_pairs`:

1. embeds the claims (all-MiniLM-L6-v2, :mod:`~medunlearn.biodivergence.mining.embed`; each distinct text
   once) unless embeddings aligned with the claims' rows are given;
2. finds each claim's ``k`` nearest claims by cosine (:mod:`~medunlearn.biodivergence.mining.neighbours`:
   exact below ``exact_below`` claims, FAISS HNSW above);
3. makes candidate pairs from the neighbour lists, each unordered pair once;
4. drops every pair of two claims of the same article (``pmid``) — never kept, whatever the similarity;
5. keeps the pairs whose cosine is in ``[min_similarity, max_similarity]``: below, the claims are about
   different things; above, they are near-paraphrases (ours: 0.5 and 0.98);
6. scores the divergence signals (:mod:`~medunlearn.biodivergence.mining.signals`);
7. ranks by ``divergence_score`` desc, then ``similarity`` desc, then ``claim_a`` and ``claim_b`` (a total
   order: the result does not depend on the row order of the claims), and keeps the first
   ``cap_per_domain``.

Each pair is written in canonical order: ``claim_a`` is the smaller claim id (as a string), so
``pair_id = f"{claim_a}|{claim_b}"`` names the unordered pair. :func:`mine_pairs_with_counts` also returns
the funnel per domain (claims, candidates, same-article pairs dropped, pairs outside the similarity window,
pairs in it, pairs dropped by the cap, pairs kept).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from medunlearn.biodivergence.mining.neighbours import nearest_neighbours
from medunlearn.biodivergence.mining.signals import SignalWeights, divergence_signals
from medunlearn.errors import InputError

__all__ = [
    "COUNT_COLUMNS",
    "PAIR_COLUMNS",
    "MiningConfig",
    "mine_pairs",
    "mine_pairs_with_counts",
    "mining_counts",
]

REQUIRED_CLAIM_COLUMNS = ("claim_id", "pmid", "text", "domain")
PAIR_COLUMNS: tuple[str, ...] = (
    "pair_id",
    "claim_a",
    "claim_b",
    "text_a",
    "text_b",
    "article_a",
    "article_b",
    "section_a",
    "section_b",
    "year_a",
    "year_b",
    "domain",
    "similarity",
    "polarity_reversal",
    "negation_mismatch",
    "entity_mismatch",
    "context_cues",
    "context_families",
    "divergence_score",
    "stance_a",
    "stance_b",
    "shared_entities",
    "rank",
)
COUNT_COLUMNS: tuple[str, ...] = (
    "domain",
    "claims",
    "candidates",
    "same_article_dropped",
    "outside_window",
    "in_window",
    "capped",
    "kept",
)


@dataclass
class MiningConfig:
    """Settings of :func:`mine_pairs`.

    Parameters:
        k (`int`, defaults to `10`): neighbours retrieved per claim (ours).
        min_similarity (`float`, defaults to `0.5`): lowest cosine of a kept pair (ours).
        max_similarity (`float`, defaults to `0.98`): highest cosine of a kept pair; above it the two claims
            are near-paraphrases (ours).
        cap_per_domain (`int` or `None`, defaults to `10000`): most pairs kept per domain, the best ranked
            ([paper]: 10,000 per domain, 50,000 over five domains); `None` keeps all.
        exact_below (`int`, defaults to `20000`): a domain with fewer claims is searched exactly, a larger
            one with the FAISS ``index`` (ours).
        index (`str`, defaults to `"hnsw"`): the approximate index, ``"hnsw"`` or ``"ivf"``.
        seed (`int`, defaults to `0`): seed of the approximate index.
        batch_size (`int`, defaults to `64`): texts per embedding batch.
        model (`str` or `None`, defaults to `None`): a local sentence-transformers folder; `None` is the
            offline all-MiniLM-L6-v2.
        weights (`SignalWeights`): weights of the divergence score (see
            :class:`~medunlearn.biodivergence.mining.signals.SignalWeights`).
    """

    k: int = 10
    min_similarity: float = 0.5
    max_similarity: float = 0.98
    cap_per_domain: int | None = 10_000
    exact_below: int = 20_000
    index: Literal["hnsw", "ivf"] = field(default="hnsw", metadata={"choices": ("hnsw", "ivf")})
    seed: int = 0
    batch_size: int = 64
    model: str | None = None
    weights: SignalWeights = field(default_factory=SignalWeights)


def _check_claims(claims: pd.DataFrame, name: str = "claims") -> pd.DataFrame:
    if not isinstance(claims, pd.DataFrame):
        raise InputError(f"{name}: expected a pandas DataFrame, got {type(claims).__name__}")
    missing = [column for column in REQUIRED_CLAIM_COLUMNS if column not in claims.columns]
    if missing:
        raise InputError(f"{name}: missing column(s) {missing}; got {list(claims.columns)}")
    claims = claims.reset_index(drop=True)
    for column in REQUIRED_CLAIM_COLUMNS:
        empty = claims[column].isna()
        if column != "text":
            empty |= claims[column].astype(str).str.strip() == ""
        if empty.any():
            row = int(np.flatnonzero(empty.to_numpy())[0])
            raise InputError(f"{name}: row {row}, field `{column}`: empty")
    not_text = ~claims["text"].map(type).eq(str)
    if not_text.any():
        row = int(np.flatnonzero(not_text.to_numpy())[0])
        raise InputError(f"{name}: row {row}, field `text`: not a string")
    duplicated = claims["claim_id"].astype(str).duplicated()
    if duplicated.any():
        row = int(np.flatnonzero(duplicated.to_numpy())[0])
        raise InputError(f"{name}: row {row}, field `claim_id`: duplicate id {claims['claim_id'][row]!r}")
    return claims


def _embeddings(claims: pd.DataFrame, config: MiningConfig, embeddings) -> np.ndarray:
    if embeddings is None:
        from medunlearn.biodivergence.mining.embed import embed_texts

        # Duplicate claim texts (across articles) are embedded once.
        codes, unique = pd.factorize(claims["text"])
        vectors = embed_texts(list(unique), model=config.model, batch_size=config.batch_size)
        return vectors[codes]
    vectors = np.asarray(embeddings, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(claims):
        raise InputError(
            f"embeddings: shape {vectors.shape} does not match the {len(claims)} claims (one row per claim)"
        )
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if (norms == 0).any():
        raise InputError(f"embeddings: row {int(np.flatnonzero(norms.ravel() == 0)[0])} is all zeros")
    return vectors / norms


def _candidates(neighbours: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unordered pairs (i < j) from neighbour lists, each once, sorted by (i, j)."""
    m, k = neighbours.shape
    rows = np.repeat(np.arange(m, dtype=np.int64), k)
    cols = neighbours.ravel()
    valid = cols >= 0
    low, high = np.minimum(rows, cols)[valid], np.maximum(rows, cols)[valid]
    keys = np.unique(low * m + high)
    return keys // m, keys % m


def _domain_pairs(
    claims: pd.DataFrame, rows: np.ndarray, vectors: np.ndarray, domain: str, config: MiningConfig
) -> tuple[pd.DataFrame, dict]:
    counts = dict.fromkeys(COUNT_COLUMNS, 0)
    counts.update(domain=domain, claims=len(rows))
    empty = pd.DataFrame({column: [] for column in PAIR_COLUMNS})
    if len(rows) < 2:
        return empty, counts
    neighbours, _ = nearest_neighbours(
        vectors[rows], k=config.k, exact_below=config.exact_below, seed=config.seed, index=config.index
    )
    first, second = _candidates(neighbours)
    counts["candidates"] = len(first)

    articles = claims["pmid"].astype(str).to_numpy()[rows]
    other_article = articles[first] != articles[second]
    counts["same_article_dropped"] = int((~other_article).sum())
    first, second = first[other_article], second[other_article]

    # The cosine of each kept pair is recomputed from the vectors: ANN distances and the two directions
    # of a pair could otherwise disagree in the last digits.
    local = vectors[rows]
    similarity = np.einsum("ij,ij->i", local[first], local[second]).astype(np.float64)
    inside = (similarity >= config.min_similarity) & (similarity <= config.max_similarity)
    counts["outside_window"] = int((~inside).sum())
    counts["in_window"] = int(inside.sum())
    first, second, similarity = first[inside], second[inside], similarity[inside]
    if not len(first):
        return empty, counts

    ids = claims["claim_id"].astype(str).to_numpy()[rows]
    swap = ids[first] > ids[second]
    a = np.where(swap, second, first)
    b = np.where(swap, first, second)
    picked = claims.iloc[rows]
    texts = picked["text"].to_numpy(dtype=object)
    signals = divergence_signals(texts[a], texts[b], weights=config.weights)

    # Rank: score desc, similarity desc, then (claim_a, claim_b) ascending — a total order, so the result
    # does not depend on the row order of the claims. Only the kept rows are then assembled.
    id_rank = np.empty(len(ids), dtype=np.int64)
    id_rank[np.argsort(ids, kind="stable")] = np.arange(len(ids))
    order = np.lexsort((id_rank[b], id_rank[a], -similarity, -signals["divergence_score"].to_numpy()))
    if config.cap_per_domain is not None and len(order) > config.cap_per_domain:
        counts["capped"] = len(order) - config.cap_per_domain
        order = order[: config.cap_per_domain]
    a, b, similarity = a[order], b[order], similarity[order]
    sections = picked["section"].to_numpy(dtype=object) if "section" in picked else np.full(len(rows), None)
    years = picked["year"].to_numpy(dtype=object) if "year" in picked else np.full(len(rows), None)
    frame = pd.DataFrame(
        {
            "pair_id": pd.Series(ids[a]) + "|" + pd.Series(ids[b]),
            "claim_a": ids[a],
            "claim_b": ids[b],
            "text_a": texts[a],
            "text_b": texts[b],
            "article_a": articles[a],
            "article_b": articles[b],
            "section_a": sections[a],
            "section_b": sections[b],
            "year_a": years[a],
            "year_b": years[b],
            "domain": domain,
            "similarity": similarity,
        }
    )
    frame = pd.concat([frame, signals.iloc[order].reset_index(drop=True)], axis=1)
    frame["rank"] = np.arange(1, len(frame) + 1, dtype=np.int64)
    counts["kept"] = len(frame)
    return frame, counts


def mine_pairs_with_counts(
    claims: pd.DataFrame, config: MiningConfig | None = None, embeddings=None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`mine_pairs` and the funnel per domain: a frame with :data:`COUNT_COLUMNS`, one row per domain
    (sorted by name), where ``candidates = same_article_dropped + outside_window + in_window`` and
    ``in_window = capped + kept``."""
    config = config or MiningConfig()
    if config.k < 1:
        raise InputError(f"MiningConfig.k must be at least 1, got {config.k}")
    if not -1 <= config.min_similarity <= config.max_similarity <= 1:
        raise InputError(
            "MiningConfig: need -1 <= min_similarity <= max_similarity <= 1 (cosines), got "
            f"{config.min_similarity} and {config.max_similarity}"
        )
    if config.cap_per_domain is not None and config.cap_per_domain < 0:
        raise InputError(f"MiningConfig.cap_per_domain must be >= 0 or None, got {config.cap_per_domain}")
    claims = _check_claims(claims)
    # Neighbour ties (equal cosines at the k-th place) are broken by row number: with the rows in claim-id
    # order first, which pairs are kept does not depend on the order the claims came in.
    by_id = np.argsort(claims["claim_id"].astype(str).to_numpy(), kind="stable")
    if embeddings is not None:
        vectors = _embeddings(claims, config, embeddings)[by_id]
    claims = claims.iloc[by_id].reset_index(drop=True)
    if embeddings is None:
        vectors = _embeddings(claims, config, None)
    domains = claims["domain"].astype(str).to_numpy()
    frames, counts = [], []
    for domain in sorted(set(domains)):
        frame, domain_counts = _domain_pairs(
            claims, np.flatnonzero(domains == domain), vectors, domain, config
        )
        frames.append(frame)
        counts.append(domain_counts)
    pairs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(PAIR_COLUMNS))
    pairs = pairs[list(PAIR_COLUMNS)]
    for column in ("rank", "polarity_reversal", "negation_mismatch", "context_cues", "shared_entities"):
        pairs[column] = pairs[column].astype(np.int64)
    for column in ("similarity", "entity_mismatch", "divergence_score"):
        pairs[column] = pairs[column].astype(np.float64)
    return pairs, pd.DataFrame(counts, columns=list(COUNT_COLUMNS))


def mine_pairs(claims: pd.DataFrame, config: MiningConfig | None = None, embeddings=None) -> pd.DataFrame:
    """Candidate pairs of ``claims`` per domain, ranked by divergence and capped (the steps are in the module
    docstring).

    ``claims`` needs ``claim_id`` (unique), ``pmid`` (the article), ``text`` and ``domain``; ``section`` and
    ``year`` are carried over when present (as written by ``claims.extract_claims``). ``embeddings``
    (optional) has one row per claim, in the claims' order; rows are L2-normalised here. Returns
    :data:`PAIR_COLUMNS`, sorted by domain then ``rank`` (1 = most divergent). No pair ever joins two
    claims of the same article.

    >>> claims = pd.DataFrame({
    ...     "claim_id": ["1:0", "1:1", "2:0"], "pmid": ["1", "1", "2"], "domain": "oncology",
    ...     "text": ["Drug X improved survival.", "Drug X improved survival in men.",
    ...              "Drug X did not improve survival."],
    ... })
    >>> vectors = np.array([[1.0, 0.0], [0.99, 0.14], [0.9, 0.44]])
    >>> mined = mine_pairs(claims, MiningConfig(k=2), embeddings=vectors)
    >>> mined[["pair_id", "context_families", "rank"]].values.tolist()  # 1:0|1:1 is one article: dropped
    [['1:1|2:0', 'population', 1], ['1:0|2:0', '', 2]]
    """
    return mine_pairs_with_counts(claims, config, embeddings)[0]


def mining_counts(counts: pd.DataFrame) -> dict:
    """The funnel for the report (from :func:`mine_pairs_with_counts`): summed over domains, and under
    ``per_domain`` each domain's own."""
    summed = {column: int(counts[column].sum()) for column in COUNT_COLUMNS if column != "domain"}
    per_domain = {row.pop("domain"): row for row in counts.to_dict("records")}
    return {**summed, "per_domain": per_domain}


class NoCandidatePairsError(InputError):
    """Mining found no candidate pair; the message names the abstracts, counts them and their claims, and says
    why (:func:`no_pairs_reason`)."""


def no_pairs_error(paths, abstracts: int, claims: pd.DataFrame, counts: dict, config: MiningConfig):
    """The error of a mining that found no pair: the abstracts files, how many abstracts were kept and how
    many claims they gave, and :func:`no_pairs_reason`."""
    counted = [f"{n} {what}{'s' * (n != 1)}" for n, what in ((abstracts, "abstract"), (len(claims), "claim"))]
    found = f"{', '.join(map(str, paths))}: {', '.join(counted)}, no candidate pair found"
    return NoCandidatePairsError(f"{found}: {no_pairs_reason(claims, counts, config)}")


def no_pairs_reason(claims: pd.DataFrame, counts: dict, config: MiningConfig) -> str:
    """Why mining kept no pair of ``claims`` (``pmid``, ``domain``), from the summed funnel ``counts``
    (:func:`mining_counts`): the first step of the funnel that left nothing, in funnel order.

    >>> claims = pd.DataFrame({"pmid": ["1", "1"], "domain": "oncology"})
    >>> no_pairs_reason(claims, {}, MiningConfig())
    'the claims come from 1 article, and a pair joins claims of two different articles'
    """
    if claims.empty:
        return "no claim was extracted from the abstracts, so there is nothing to pair"
    articles = claims["pmid"].astype(str).nunique()
    if articles < 2:
        return f"the claims come from {articles} article, and a pair joins claims of two different articles"
    per_domain = claims.groupby(claims["domain"].astype(str))["pmid"].nunique()
    if per_domain.max() < 2:
        return (
            f"the claims' {articles} articles fall in {len(per_domain)} domains, one article each, and pairs "
            "are mined within a domain"
        )
    if counts["outside_window"] == 0 and counts["in_window"] == 0:
        return (
            f"the {config.k} nearest neighbours of every claim are claims of its own article "
            f"({counts['same_article_dropped']} same-article pairs dropped)"
        )
    if counts["in_window"] == 0:
        return (
            f"no claim pair of two articles has a similarity within [{config.min_similarity}, "
            f"{config.max_similarity}] ({counts['outside_window']} candidate pairs outside it)"
        )
    return f"all {counts['in_window']} pairs were capped (cap_per_domain {config.cap_per_domain})"
