"""MUSE C3, privacy leakage: the Min-40% membership AUC of forget vs holdout texts, relative to the retain
model's [ref: Shi et al. 2024, MUSE; OpenUnlearning at d3d7cf9].

Metric card
-----------
**Description.** Every ``privleak/forget`` and ``privleak/holdout`` text is scored by the model under
teacher forcing with Min-K% Prob, k = 0.4
(``open-unlearning@d3d7cf9 configs/eval/muse_metrics/mia_min_k.yaml:16-18``;
``src/evals/metrics/mia/min_k.py:18-26``), a loss-like score (higher = less likely a member). The AUC of
telling holdout (label 1) from forget (label 0) by that score is ``roc_auc_score``
(``src/evals/metrics/mia/utils.py:58-69``): 1 when every forget text looks more familiar than every holdout
text. PrivLeak compares it with the same AUC of the retain model (a model never trained on the forget
texts; ``configs/eval/muse_metrics/privleak.yaml:9-17``) in MUSE's orientation ``1 - AUC``
(``src/evals/metrics/privacy.py:35-52``). ``privleak/retain`` is not used by the reference, nor here.

**Inputs.** Per-token log-probs and a mask over each text's tokens (:mod:`medunlearn.metrics.probability`'s
convention); the retain model's AUC (or the reference's default).

**Outputs.** Min-K% scores per text (>= 0), the AUC in [0, 1], PrivLeak in percent: 0 is ideal, negative =
the forget set is still more recognisable than under the retain model (under-unlearning; a target model
gives about -100), positive = less recognisable than it should be (over-unlearning). Unbounded above when the
retain AUC is near 1.

**Formulas.**

* Min-K% [ref]: ``score = -mean(lowest m log-probs)``, ``m = max(1, floor(k·T))``; an empty row scores 0
  (``min_k.py:20-26``). Ours: ``m = ceil(k·T)``, the count :func:`medunlearn.metrics.mia.min_k_score`
  uses everywhere else in medunlearn (at least one token without a special case). Which tokens count
  (the reference drops the last one): :mod:`medunlearn.metrics.completion_tokens`.
* ``AUC = P(score_holdout > score_forget) + ½ P(tie)`` over all (forget, holdout) pairs.
* ``PrivLeak = ((1 - AUC) - (1 - AUC_retain)) / ((1 - AUC_retain) + ε) × 100``, ε = 1e-10 in the reference
  (``privacy.py:50-52``), 0 in ours (an AUC_retain of 1 is then an error, not a huge number).
* Without a retain model the reference takes ``AUC_retain = ref_value = 0.5`` (``privacy.py:43-49``,
  ``privleak.yaml:17``); ours reports no PrivLeak then (a baseline that was not measured is not a baseline).

**Limitations.** 100 + 100 texts on the Hub: the AUC moves in steps of 1e-4 and has sampling error of a few
points; the relative form amplifies it when ``1 - AUC_retain`` is small (OpenUnlearning issue #167 reports
5215.5). Scores depend on the tokenizer and on truncation (the reference keeps 2048 tokens per text,
``configs/data/datasets/MUSE_MIA.yaml:11,21``).

**Citation.** Shi et al., *MUSE: Machine Unlearning Six-Way Evaluation for Language Models*,
arXiv:2407.06460, 2024; Shi et al., *Detecting Pretraining Data from Large Language Models* (Min-K% Prob),
ICLR 2024.
"""

from __future__ import annotations

import numpy as np

from medunlearn.metrics import mia
from medunlearn.metrics.completion_tokens import scored_token_mask

__all__ = ["MIN_K", "REFERENCE_RETAIN_AUC", "min_k_scores", "privleak_percent", "privleak_summary"]

MIN_K = 0.4  # open-unlearning@d3d7cf9 configs/eval/muse_metrics/mia_min_k.yaml:18
REFERENCE_RETAIN_AUC = 0.5  # open-unlearning@d3d7cf9 configs/eval/muse_metrics/privleak.yaml:17


def min_k_scores(
    token_logprobs, mask, *, k: float = MIN_K, count: str = "ceil", drop_last_token: bool = False
) -> np.ndarray:
    """Per-text Min-K% score over the scored tokens; ``count`` is ``"ceil"`` (ours) or ``"floor"`` (the
    reference's ``max(1, floor(k·T))``). A text left without tokens scores 0, as in the reference.

    >>> logprobs = [[-0.1, -3.0, -1.0, -0.2, -0.5]]
    >>> min_k_scores(logprobs, [[True] * 5], count="floor").tolist()
    [2.0]
    >>> min_k_scores(logprobs, [[True] * 5]).tolist()
    [2.0]
    >>> min_k_scores([[-0.1, -3.0, -1.0]], [[True] * 3], count="floor").tolist()
    [3.0]
    """
    if count not in ("ceil", "floor"):
        raise ValueError(f"`count` must be 'ceil' or 'floor', got {count!r}")
    if not 0.0 < k <= 1.0:
        raise ValueError(f"`k` must be in (0, 1], got {k}")
    values = np.asarray(token_logprobs, dtype=np.float64)
    scored = scored_token_mask(mask, drop_last_token=drop_last_token)
    if values.shape != scored.shape:
        raise ValueError(f"`token_logprobs` has shape {values.shape} but `mask` has shape {scored.shape}")
    scores = np.zeros(len(scored), dtype=np.float64)
    rows = scored.any(axis=1)
    if not rows.any():
        return scores
    if count == "ceil":
        scores[rows] = mia.min_k_score(values[rows], scored[rows], k=k)
        return scores
    kept, kept_mask = values[rows], scored[rows]
    taken = np.maximum(1, np.floor(kept_mask.sum(axis=1) * k)).astype(np.int64)
    ordered = np.sort(np.where(kept_mask, kept, np.inf), axis=1)
    take = np.arange(kept.shape[1])[None, :] < taken[:, None]
    scores[rows] = -np.where(take, ordered, 0.0).sum(axis=1) / taken
    return scores


def privleak_percent(auc: float, retain_auc: float, *, epsilon: float = 0.0) -> float:
    """``((1 - auc) - (1 - retain_auc)) / ((1 - retain_auc) + epsilon) * 100``.

    >>> privleak_percent(1.0, 0.5), privleak_percent(0.5, 0.5), round(privleak_percent(0.25, 0.5), 6)
    (-100.0, 0.0, 50.0)
    """
    if epsilon == 0.0:
        return mia.privleak(auc, retain_auc)
    score, reference = 1.0 - float(auc), 1.0 - float(retain_auc)
    return (score - reference) / (reference + epsilon) * 100.0


def privleak_summary(
    forget_scores,
    holdout_scores,
    *,
    retain_auc: float | None = None,
    default_retain_auc: float | None = None,
    epsilon: float = 0.0,
) -> dict:
    """The AUC of forget (members, label 0) vs holdout (label 1) Min-K% scores, and PrivLeak against
    ``retain_auc`` (or ``default_retain_auc`` when no retain model was scored; None leaves PrivLeak None).

    >>> privleak_summary([0.1, 0.2], [0.3, 0.4], default_retain_auc=0.5)
    {'auc': 1.0, 'retain_auc': 0.5, 'retain_auc_measured': False, 'privleak': -100.0}
    """
    auc = mia.mia_auc(forget_scores, holdout_scores)
    reference = retain_auc if retain_auc is not None else default_retain_auc
    value = None if reference is None else privleak_percent(auc, reference, epsilon=epsilon)
    return {
        "auc": auc,
        "retain_auc": reference,
        "retain_auc_measured": retain_auc is not None,
        "privleak": value,
    }
