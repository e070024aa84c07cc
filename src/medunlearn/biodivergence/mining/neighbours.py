"""Top-k cosine neighbours of claim embeddings, exact below a size threshold and approximate above it
(stage 5 of the construction pipeline, docs/biodivergence.md).

* **Exact** (fewer than ``exact_below`` rows): blocks of rows times the whole matrix (one BLAS matmul per
  block), ``argpartition`` for the top k, then a sort by (similarity desc, index asc). ``argpartition`` picks
  arbitrarily among candidates tied with the k-th similarity, so a row with such ties takes the strictly
  better candidates and then the tied ones in index order; and bitwise-identical rows are scored once (a
  matmul may round two copies' cosines differently, depending on the block). So ties are broken by the lower
  index and the result does not depend on the block size (tested on duplicated vectors against a
  brute-force stable sort); only distinct vectors whose cosines differ by float32 rounding may still order
  by the rounding.
* **Approximate** (``exact_below`` rows or more), from FAISS (``faiss-cpu``, the ``mining`` extra):
  ``index="hnsw"`` (default) is ``IndexHNSWFlat`` over inner products, M = 32, efConstruction = 64,
  efSearch = 64 (ours: recall@10 against exact search is at least 0.95 on MiniLM claim embeddings and on
  clustered random data; ``bench/bench_mining.py`` measures it). ``index="ivf"`` is ``IndexIVFFlat`` with
  about 4·√n lists, k-means seeded by ``seed``, and nprobe = 16.

Determinism: the HNSW level generator is seeded by ``seed`` and the graph is built on one thread (FAISS
builds it in a thread-dependent order otherwise); searching uses ``threads`` threads, default what
``torch`` uses (2 on the project machine), and is deterministic per query.

The rows must be L2-normalised (as :func:`medunlearn.biodivergence.mining.embed.embed_texts` returns them),
so that the inner product is the cosine. A row is never its own neighbour, even when it has exact
duplicates.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Literal

import numpy as np

from medunlearn.errors import InputError

__all__ = [
    "HNSW_EF_CONSTRUCTION",
    "HNSW_EF_SEARCH",
    "HNSW_M",
    "IVF_NPROBE",
    "default_threads",
    "nearest_neighbours",
    "recall_at_k",
]

HNSW_M = 32
HNSW_EF_CONSTRUCTION = 64
HNSW_EF_SEARCH = 64
IVF_NPROBE = 16
_EXACT_BLOCK_ROWS = 1024
_EXACT_BLOCK_CELLS = 1 << 24


def _check_embeddings(embeddings) -> np.ndarray:
    array = np.asarray(embeddings)
    if array.ndim != 2:
        raise InputError(f"nearest_neighbours: embeddings must be a 2-d array, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.floating):
        raise InputError(f"nearest_neighbours: embeddings must be floating point, got {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(array).all():
        raise InputError("nearest_neighbours: embeddings hold NaN or infinite values")
    return array


def default_threads() -> int:
    """Threads for FAISS search: what torch uses if it is installed, else the CPU count."""
    try:
        import torch

        return max(1, torch.get_num_threads())
    except ImportError:
        return max(1, os.cpu_count() or 1)


def _drop_self(indices: np.ndarray, similarities: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` columns that are not the row itself (searched with k + 1 columns)."""
    rows = np.arange(len(indices))[:, None]
    is_self = (indices == rows) | (indices < 0)
    # A stable argsort of the mask moves self (and FAISS's -1 fillers) to the end and keeps the order.
    order = np.argsort(is_self, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(indices, order, axis=1), np.take_along_axis(similarities, order, axis=1)


def _smallest_k_lower_index_on_ties(distance: np.ndarray, k: int) -> np.ndarray:
    """Column indices of each row's ``k`` smallest values (unordered); among values tied with the k-th
    smallest, the lower column indices are taken."""
    top = np.argpartition(distance, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(distance, top[:, k - 1 :], axis=1)  # argpartition puts the k-th at k - 1
    # Only rows with more than k candidates at or below the k-th value are ambiguous; fix those alone.
    ambiguous = np.flatnonzero(np.count_nonzero(distance <= kth, axis=1) > k)
    if ambiguous.size:
        rows, kth = distance[ambiguous], kth[ambiguous]
        better, tied = rows < kth, rows == kth
        room = k - np.count_nonzero(better, axis=1)[:, None]  # at least 1: fewer than k are strictly better
        chosen = better | (tied & (np.cumsum(tied, axis=1) <= room))
        top[ambiguous] = np.nonzero(chosen)[1].reshape(-1, k)  # exactly k per row, in row order
    return top


def _distinct_rows(embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The bitwise-distinct rows and, for each row, its distinct row's number (``None`` when all differ)."""
    if embeddings.shape[1] == 0:
        return embeddings[:1], np.zeros(len(embeddings), dtype=np.int64)
    # One opaque bytes value per row: np.unique on it is a 1-d sort (about 3x faster than axis=0).
    as_bytes = embeddings.view(np.dtype((np.void, embeddings.dtype.itemsize * embeddings.shape[1]))).ravel()
    _, first, column_of = np.unique(as_bytes, return_index=True, return_inverse=True)
    if len(first) == len(embeddings):
        return embeddings, None
    return embeddings[first], column_of.reshape(-1)


def _exact(embeddings: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(embeddings)
    indices = np.empty((n, k), dtype=np.int64)
    similarities = np.empty((n, k), dtype=np.float32)
    # Copies of one vector must score alike, but a matmul rounds a column's cosine by where it falls in the
    # kernel's tiles (so by the block size): score each distinct vector once and copy its column.
    # Adding +0.0 turns -0.0 into +0.0, so vectors equal in value are bitwise equal and dedupe as one.
    embeddings = embeddings + embeddings.dtype.type(0.0)
    distinct, column_of = _distinct_rows(embeddings)
    # Blocks of about 16M similarities (64 MB, plus 128 MB of argpartition indices) whatever n is.
    block_rows = max(1, min(_EXACT_BLOCK_ROWS, _EXACT_BLOCK_CELLS // n))
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        distance = embeddings[start:stop] @ distinct.T
        distance = (
            distance if column_of is None else np.take(distance, column_of, axis=1)
        )  # 4x fancy indexing
        np.negative(distance, out=distance)  # ascending order = highest similarity first, no copy
        distance[np.arange(stop - start), np.arange(start, stop)] = np.inf
        top = _smallest_k_lower_index_on_ties(distance, k)
        top_distance = np.take_along_axis(distance, top, axis=1)
        # Sort the k by similarity desc, then index asc (np.lexsort sorts by the last key first).
        order = np.lexsort((top, top_distance), axis=1)
        indices[start:stop] = np.take_along_axis(top, order, axis=1)
        similarities[start:stop] = -np.take_along_axis(top_distance, order, axis=1)
    return indices, similarities


@contextmanager
def _faiss_threads(faiss, threads: int):
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


def _import_faiss():
    try:
        import faiss
    except ImportError as error:
        raise ImportError(
            "approximate neighbours need FAISS: pip install 'medunlearn[mining]' (faiss-cpu)"
        ) from error
    return faiss


def _approximate(
    embeddings: np.ndarray, k: int, seed: int, index: str, threads: int
) -> tuple[np.ndarray, np.ndarray]:
    faiss = _import_faiss()
    n, dim = embeddings.shape
    if index == "hnsw":
        ann = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        ann.hnsw.rng = faiss.RandomGenerator(int(seed))
        ann.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        with _faiss_threads(faiss, 1):
            ann.add(embeddings)
        ann.hnsw.efSearch = max(HNSW_EF_SEARCH, k + 1)
    else:
        n_lists = max(1, min(int(4 * np.sqrt(n)), n // 39))  # FAISS wants about 39 points per centroid
        quantizer = faiss.IndexFlatIP(dim)
        ann = faiss.IndexIVFFlat(quantizer, dim, n_lists, faiss.METRIC_INNER_PRODUCT)
        ann.cp.seed = int(seed)
        with _faiss_threads(faiss, 1):
            ann.train(embeddings)
            ann.add(embeddings)
        ann.nprobe = min(IVF_NPROBE, n_lists)
    with _faiss_threads(faiss, threads):
        similarities, indices = ann.search(embeddings, k + 1)
    return _drop_self(indices.astype(np.int64), similarities, k)


def nearest_neighbours(
    embeddings,
    k: int = 10,
    exact_below: int = 20_000,
    seed: int = 0,
    index: Literal["hnsw", "ivf"] = "hnsw",
    *,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest rows of every row by cosine, excluding the row itself.

    Returns ``(indices, similarities)``, both ``(n, min(k, n - 1))``: int64 row numbers and float32 cosines,
    each row sorted by similarity, highest first. Exact below ``exact_below`` rows, FAISS ``index`` at or
    above it (see the module docstring); an approximate row may hold -1 (with similarity -inf) where the
    index found fewer than k others, which happens only on degenerate data.

    >>> vectors = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], dtype=np.float32)
    >>> vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    >>> indices, similarities = nearest_neighbours(vectors, k=1)
    >>> indices[:, 0].tolist()
    [1, 0, 3, 2]
    """
    if index not in ("hnsw", "ivf"):
        raise InputError(f"nearest_neighbours: index must be 'hnsw' or 'ivf', got {index!r}")
    if k < 1:
        raise InputError(f"nearest_neighbours: k must be at least 1, got {k}")
    embeddings = _check_embeddings(embeddings)
    n = len(embeddings)
    k = min(k, n - 1)
    if k <= 0:
        return np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0), dtype=np.float32)
    if n < exact_below:
        return _exact(embeddings, k)
    indices, similarities = _approximate(embeddings, k, seed, index, threads or default_threads())
    similarities = np.where(indices < 0, -np.inf, similarities).astype(np.float32)
    return indices, similarities


def recall_at_k(approximate: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of each row's exact neighbours that the approximate search also found (recall@k, with
    k the number of columns).

    >>> recall_at_k(np.array([[1, 2], [0, 3]]), np.array([[1, 2], [0, 2]]))
    0.75
    """
    approximate, exact = np.asarray(approximate), np.asarray(exact)
    if approximate.shape != exact.shape:
        raise InputError(f"recall_at_k: shapes differ: {approximate.shape} vs {exact.shape}")
    if exact.size == 0:
        return 1.0
    found = (exact[:, :, None] == approximate[:, None, :]).any(axis=2)
    return float(found.mean())
