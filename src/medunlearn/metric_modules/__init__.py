"""medunlearn's ``evaluate`` modules as files (docs/metrics/index.md): finding and loading them, and
installing them into evaluate's module cache. This package reads and writes files; the metric functions the
modules wrap are pure and live in :mod:`medunlearn.metrics`.

- :mod:`~medunlearn.metric_modules.loading` — ``load_metric``: the modules of the installed wheel
  (``medunlearn/_metric_modules/``) or of the repository checkout (``metrics/``), loaded offline
- :mod:`~medunlearn.metric_modules.evaluate_cache` — ``register_evaluate_modules`` (``medunlearn metrics
  install``): copies them into evaluate's module cache, so a bare ``evaluate.load("disease_leakage")`` works
  offline

The modules' base class, :mod:`medunlearn.metrics.evaluate_base`, stays in :mod:`medunlearn.metrics`: every
module file imports it by that path, also the copies already installed in evaluate's cache.
"""
