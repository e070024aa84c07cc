"""Pure, vectorised metric functions (numpy). No model, no I/O.

Each function here is wrapped as an ``evaluate`` module in the repository's ``metrics/<name>/`` folder
(loaded with :func:`medunlearn.load_metric`; finding, loading and installing those modules reads and writes
files, so it lives in :mod:`medunlearn.metric_modules`). Submodules are imported on use, so
``import medunlearn.metrics`` stays cheap:

- :mod:`~medunlearn.metrics.disease_leakage` — LS, disease keyword leakage (ours)
- :mod:`~medunlearn.metrics.degeneration` — DS and its components (ours)
- :mod:`~medunlearn.metrics.answer_forgetting` — AFE (ours)
- :mod:`~medunlearn.metrics.model_utility` — MU per QA type (ours) and TOFU's harmonic mean
- :mod:`~medunlearn.metrics.similarity` — answer similarity: ROUGE-L F1, embedding cosine, NLI hook (ours)
- :mod:`~medunlearn.metrics.probability` — Prob, exact memorisation, extraction strength, token entropy from
  per-token log-probs (the ``(n, max_tokens)`` values + mask convention is documented there)
- :mod:`~medunlearn.metrics.truth_ratio`, :mod:`~medunlearn.metrics.forget_quality` — TOFU
- :mod:`~medunlearn.metrics.mia` — LOSS / zlib / Min-K% / Min-K%++ scores, MIA AUC, privleak
- :mod:`~medunlearn.metrics.rouge`, :mod:`~medunlearn.metrics.validation` — shared helpers
- :mod:`~medunlearn.metrics.evaluate_base` — the base class of the ``evaluate`` modules (no I/O either; it
  imports ``evaluate``, so only the modules import it). It stays here because every module file, also the
  copies installed in evaluate's cache, imports it as ``medunlearn.metrics.evaluate_base``.
"""
