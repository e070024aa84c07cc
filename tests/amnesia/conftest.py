"""AMNESIA tests run the build's embedding second opinion (:mod:`medunlearn.amnesia.second_opinion`) with a
fast bag-of-words embedder instead of MiniLM: a build then costs no model load (MiniLM embeds the 1,587
ICD-10-CM descriptions in minutes on a busy CPU), and the opinion is still computed end to end against the
shipped descriptions. ``test_second_opinion.py`` checks MiniLM itself."""

from __future__ import annotations

import zlib
from functools import lru_cache

import numpy as np
import pytest

from medunlearn.amnesia import second_opinion
from medunlearn.ontology.vocabulary import words

DIM = 512


def bag_of_words_embedder(texts) -> np.ndarray:
    """Unit vectors of hashed lowercase words (crc32 mod ``DIM``): the cosine is the word overlap."""
    matrix = np.zeros((len(texts), DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in words(text):
            matrix[row, zlib.crc32(word.encode()) % DIM] += 1.0
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


@lru_cache(maxsize=1)
def fake_nearest() -> second_opinion.NearestChapter:
    return second_opinion.NearestChapter(bag_of_words_embedder)


@pytest.fixture(autouse=True)
def _fast_second_opinion(monkeypatch):
    monkeypatch.setattr(second_opinion, "default_nearest", fake_nearest)
