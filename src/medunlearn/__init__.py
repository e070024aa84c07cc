"""medunlearn: medical machine unlearning (AMNESIA) and biomedical contradiction analysis (BioDivergence)."""

from __future__ import annotations

__version__ = "0.1.0.dev0"


def load_metric(name: str, **kwargs):
    """Load one of medunlearn's metrics as an ``evaluate`` module (works from an installed wheel).

    >>> import medunlearn
    >>> medunlearn.load_metric("disease_leakage")  # doctest: +SKIP
    """
    from medunlearn.metrics.loading import load_metric as _load

    return _load(name, **kwargs)
