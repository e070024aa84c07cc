"""Base class of medunlearn's ``evaluate`` modules (``metrics/<name>/<name>.py``).

It adds three things to ``evaluate.Metric``: a missing input (``None``) raises a ValueError that names the
argument, instead of evaluate's generic "call add or add_batch first"; an element that is ``None`` or NaN
raises one that names the argument and its index (evaluate would cast it to the string "nan" or fail with
"don't match the expected format"); an argument ``_compute`` does not take raises a ValueError naming it and
the ones it takes, before any input is stored (evaluate would raise a
TypeError from inside ``_compute``). Importing this module imports
``evaluate``; only the metric modules do, never :mod:`medunlearn.metrics`' pure functions.
"""

from __future__ import annotations

import inspect

import evaluate

from medunlearn.metrics.validation import check_sequence

__all__ = ["CheckedMetric"]


class CheckedMetric(evaluate.Metric):
    """``evaluate.Metric`` whose ``compute`` names a missing input."""

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Compute the metric (``evaluate.Metric.compute``); a missing input or an unknown argument raises a
        ValueError naming it."""
        inputs = {"predictions": predictions, "references": references, **kwargs}
        names = self._feature_names()
        parameters = inspect.signature(self._compute).parameters
        takes = [name for name in parameters if name not in names]
        open_ended = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
        unknown = sorted(set(kwargs) - set(takes) - set(names))
        if unknown and not open_ended:
            raise ValueError(
                f"{self.name} takes no argument(s) {unknown}; its arguments beyond the inputs are {takes}"
            )
        nothing_added = getattr(self, "writer", None) is None
        given = [name for name in names if inputs.get(name) is not None]
        # Inputs may come earlier through add/add_batch; only a call with nothing to score at all is an error,
        # or a call that gives some inputs and leaves others out.
        if (nothing_added and not given) or (given and len(given) < len(names)):
            missing = next(name for name in names if inputs.get(name) is None)
            raise ValueError(f"`{missing}` must be a list, got None")
        for name in given:  # before evaluate casts them: None or NaN would become "nan" or a format error
            check_sequence(name, inputs[name], allow_empty=True)
        if given:
            predictions, references = self._check_inputs(predictions, references)
        return super().compute(predictions=predictions, references=references, **kwargs)

    def _check_inputs(self, predictions, references):
        """Check and complete the inputs before evaluate infers and encodes their features; a module whose
        inputs evaluate cannot encode as given (optional keys, mixed kinds) overrides it and raises a
        named error. The default returns them unchanged."""
        return predictions, references
