"""ROUGE-L through Google's ``rouge-score`` package, returned as numpy arrays (one value per pair)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from medunlearn.metrics.validation import check_same_length, check_sequence


@lru_cache(maxsize=2)
def _scorer(use_stemmer: bool):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=use_stemmer)


def rouge_l(predictions, references, *, use_stemmer: bool = False) -> dict[str, np.ndarray]:
    """Per-pair ROUGE-L precision, recall and F1 (``rouge_score.RougeScorer(["rougeL"])``).

    >>> scores = rouge_l(["the right coronary artery"], ["right coronary artery occluded"])
    >>> [round(float(scores[k][0]), 4) for k in ("precision", "recall", "f1")]
    [0.75, 0.75, 0.75]
    """
    check_sequence("predictions", predictions)
    check_sequence("references", references)
    n = check_same_length(predictions=predictions, references=references)
    scorer = _scorer(use_stemmer)
    out = np.empty((3, n), dtype=np.float64)
    for i, (prediction, reference) in enumerate(zip(predictions, references)):
        score = scorer.score(reference, prediction)["rougeL"]
        out[:, i] = (score.precision, score.recall, score.fmeasure)
    return {"precision": out[0], "recall": out[1], "f1": out[2]}
