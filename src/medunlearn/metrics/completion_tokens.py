"""Which completion tokens a MUSE token-wise metric scores: all of them [ours], or all but the last [ref].

A MUSE completion (a ``verbmem`` continuation, a ``privleak`` text) carries no end-of-sequence token: the
reference builds its labels from the text's own tokens (``open-unlearning@d3d7cf9
src/data/utils.py:166-176``, no EOS appended). Its token-wise helpers still drop the last labelled token "to
ignore eos prediction" (``open-unlearning@d3d7cf9 src/evals/metrics/utils.py:129-131`` for log-probs,
``:173-175`` for the argmax predictions), so on MUSE data they skip the completion's **last real token**.

* ``drop_last_token=False`` (medunlearn's default): every completion token is scored.
* ``drop_last_token=True`` (the ``open-unlearning`` preset): each row loses its last token; a row of one
  token is left with none, and the metrics give it the reference's value for an empty row (Min-K% 0,
  ``open-unlearning@d3d7cf9 src/evals/metrics/mia/min_k.py:21-22``; extraction strength 0,
  ``src/evals/metrics/memorization.py:242-251``).

Masks follow :mod:`medunlearn.metrics.probability` (``(n, max_tokens)``, True on completion tokens, padded
on the right).
"""

from __future__ import annotations

import numpy as np

__all__ = ["scored_token_mask"]


def scored_token_mask(mask, *, drop_last_token: bool = False) -> np.ndarray:
    """The mask of the tokens a MUSE token-wise metric scores.

    >>> scored_token_mask([[True, True, True], [True, False, False]], drop_last_token=True).tolist()
    [[True, True, False], [False, False, False]]
    >>> scored_token_mask([[True, True, False]]).tolist()
    [[True, True, False]]
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 2:
        raise ValueError(
            f"`mask` must be a 2-D boolean array (n_examples, max_tokens), got shape {mask.shape}"
        )
    if not drop_last_token:
        return mask.copy()
    lengths = mask.sum(axis=1)
    if (mask != (np.arange(mask.shape[1])[None, :] < lengths[:, None])).any():
        raise ValueError("`mask` must be right-padded (True then False in every row)")
    return np.arange(mask.shape[1])[None, :] < np.maximum(lengths - 1, 0)[:, None]
