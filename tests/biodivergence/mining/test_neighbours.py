"""Exact and approximate nearest neighbours (medunlearn.biodivergence.mining.neighbours)."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from medunlearn.biodivergence.mining import neighbours as neighbours_module
from medunlearn.biodivergence.mining.neighbours import nearest_neighbours, recall_at_k
from medunlearn.errors import InputError


def unit_rows(array: np.ndarray) -> np.ndarray:
    return (array / np.linalg.norm(array, axis=1, keepdims=True)).astype(np.float32)


def random_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return unit_rows(np.random.default_rng(seed).normal(size=(n, dim)))


def clustered_vectors(n: int, dim: int, clusters: int, spread: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    return unit_rows(centres[rng.integers(0, clusters, n)] + spread * rng.normal(size=(n, dim)))


def brute_force(vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    similarities = vectors.astype(np.float64) @ vectors.T.astype(np.float64)
    np.fill_diagonal(similarities, -np.inf)
    order = np.argsort(-similarities, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(similarities, order, axis=1)


def test_doctests():
    assert doctest.testmod(neighbours_module).failed == 0


@pytest.mark.parametrize(("n", "dim", "k"), [(50, 8, 5), (1500, 24, 10), (2100, 16, 3)])
def test_exact_equals_brute_force(n, dim, k):
    vectors = random_vectors(n, dim, seed=n)
    indices, similarities = nearest_neighbours(vectors, k=k)
    expected_indices, expected_similarities = brute_force(vectors, k)
    assert indices.shape == similarities.shape == (n, k)
    assert indices.dtype == np.int64 and similarities.dtype == np.float32
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_allclose(similarities, expected_similarities, atol=1e-5)
    assert (np.diff(similarities, axis=1) <= 1e-7).all()  # sorted, highest first


def test_self_is_excluded_even_with_duplicates():
    base = random_vectors(20, 6, seed=3)
    vectors = np.concatenate([base, base])  # every row has an exact twin
    for exact_below in (10_000, 1):  # exact and HNSW
        indices, similarities = nearest_neighbours(vectors, k=4, exact_below=exact_below)
        assert not (indices == np.arange(40)[:, None]).any()
        twins = (np.arange(40) + 20) % 40
        assert (indices[:, 0] == twins).all()
        np.testing.assert_allclose(similarities[:, 0], 1.0, atol=1e-5)


def test_k_larger_than_the_data_and_tiny_inputs():
    vectors = random_vectors(4, 3)
    indices, _ = nearest_neighbours(vectors, k=10)
    assert indices.shape == (4, 3)
    assert {frozenset(row) | {i} for i, row in enumerate(indices.tolist())} == {frozenset(range(4))}
    assert nearest_neighbours(vectors[:1], k=3)[0].shape == (1, 0)


@pytest.mark.parametrize("index", ["hnsw", "ivf"])
def test_ann_recall_on_clustered_data(index):
    vectors = clustered_vectors(3000, 32, clusters=60, spread=0.6, seed=1)
    exact, _ = nearest_neighbours(vectors, k=10)
    approximate, similarities = nearest_neighbours(vectors, k=10, exact_below=1000, index=index)
    assert approximate.shape == (3000, 10)
    assert not (approximate == np.arange(3000)[:, None]).any()
    assert recall_at_k(approximate, exact) >= 0.95
    again, _ = nearest_neighbours(vectors, k=10, exact_below=1000, index=index)
    np.testing.assert_array_equal(approximate, again)  # deterministic for a seed


def test_recall_at_k():
    assert recall_at_k(np.array([[1, 2], [0, 3]]), np.array([[2, 1], [0, 3]])) == 1.0
    assert recall_at_k(np.array([[5, 6]]), np.array([[1, 2]])) == 0.0
    with pytest.raises(InputError, match="shapes differ"):
        recall_at_k(np.zeros((2, 3)), np.zeros((2, 2)))


def test_bad_input():
    with pytest.raises(InputError, match="2-d"):
        nearest_neighbours(np.zeros(5))
    with pytest.raises(InputError, match="NaN"):
        nearest_neighbours(np.full((3, 2), np.nan))
    with pytest.raises(InputError, match="index must be"):
        nearest_neighbours(random_vectors(5, 2), index="lsh")
    with pytest.raises(InputError, match="k must be"):
        nearest_neighbours(random_vectors(5, 2), k=0)


def exact_tie_vectors(n: int, seed: int = 0) -> np.ndarray:
    """``n`` rows drawn from seven unit vectors whose entries are 0, ±0.5 or 1: every cosine is a multiple of
    0.25, exact in float32 whatever order a BLAS kernel sums in."""
    pool = np.array(
        [
            [1, 0, 0, 0],
            [0, 1, 0, 0],
            [0, 0, 1, 0],
            [0.5, 0.5, 0.5, 0.5],
            [0.5, -0.5, 0.5, 0.5],
            [0.5, 0.5, -0.5, 0.5],
            [0.5, 0.5, 0.5, -0.5],
        ],
        dtype=np.float32,
    )
    return pool[np.random.default_rng(seed).integers(0, len(pool), n)]


def duplicated_random_vectors(n: int, seed: int = 0) -> np.ndarray:
    """``n`` rows drawn from seven random 64-d unit vectors: copies of one vector tie exactly, but a BLAS
    matmul may round their cosines differently depending on where a column falls in its tiles."""
    return random_vectors(7, 64, seed=seed)[np.random.default_rng(seed).integers(0, 7, n)]


def signed_zero_copies(n: int, seed: int = 0) -> np.ndarray:
    """Duplicated random rows with every third entry zero, half of the copies holding -0.0 there: equal in
    value, different in bits (a bitwise de-duplication would score them as two columns)."""
    vectors = duplicated_random_vectors(n, seed=seed)
    vectors[:, ::3] = 0.0
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    flipped = np.random.default_rng(seed + 1).random(n) < 0.5
    vectors[np.ix_(flipped, np.arange(0, vectors.shape[1], 3))] = -0.0
    return vectors


def brute_force_by_vector(vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference for duplicated rows: one float64 cosine per pair of distinct vectors, copied to every
    copy, then a stable sort (ties by lower index)."""
    # + 0.0 turns -0.0 into +0.0: copies are equal in value, which np.unique (bitwise) would not see.
    distinct, vector_of = np.unique(vectors + np.float32(0.0), axis=0, return_inverse=True)
    vector_of = vector_of.reshape(-1)
    distinct = distinct.astype(np.float64)
    similarities = (distinct @ distinct.T)[vector_of][:, vector_of]
    np.fill_diagonal(similarities, -np.inf)
    order = np.argsort(-similarities, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(similarities, order, axis=1)


@pytest.mark.parametrize("make_vectors", [exact_tie_vectors, duplicated_random_vectors, signed_zero_copies])
@pytest.mark.parametrize("k", [1, 5, 30])
def test_exact_ties_go_to_the_lower_index_whatever_the_block_size(monkeypatch, make_vectors, k):
    """The documented rule: among rows tied with the k-th similarity, the lower indices are kept, and the
    block size (rows per matmul) changes nothing. ``argpartition`` alone picks tied candidates arbitrarily,
    and a matmul may round the cosines of two copies of one vector differently."""
    vectors = make_vectors(300, seed=k)
    expected, expected_similarities = brute_force_by_vector(vectors, k)
    for block_rows in (1, 7, 64, 300, 1024):
        monkeypatch.setattr(neighbours_module, "_EXACT_BLOCK_ROWS", block_rows)
        indices, similarities = nearest_neighbours(vectors, k=k)
        np.testing.assert_array_equal(indices, expected, err_msg=f"block of {block_rows} rows")
        np.testing.assert_allclose(similarities, expected_similarities, atol=1e-6)
    # The rule itself, row by row: a copy of the row's k-th neighbour that was left out has a higher index
    # than every kept copy.
    for row, kept in enumerate(indices):
        same_as_kth = np.flatnonzero((vectors == vectors[kept[-1]]).all(axis=1))
        left_out = set(same_as_kth.tolist()) - set(kept.tolist()) - {row}
        kept_copies = [i for i in kept if (vectors[i] == vectors[kept[-1]]).all()]
        assert not left_out or min(left_out) > max(kept_copies)
