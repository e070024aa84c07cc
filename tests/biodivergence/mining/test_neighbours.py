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
