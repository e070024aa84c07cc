"""Input checks shared by every metric: bad input raises a ValueError that names the argument."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def check_sequence(name: str, values: Any, *, allow_empty: bool = False) -> Sequence:
    """``values`` must be a list-like without ``None``; returns it unchanged.

    >>> check_sequence("predictions", None)
    Traceback (most recent call last):
    ...
    ValueError: `predictions` must be a list, got None
    """
    if values is None or isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ValueError(f"`{name}` must be a list, got {values!r}"[:200])
    if not allow_empty and len(values) == 0:
        raise ValueError(f"`{name}` is empty")
    for index, value in enumerate(values):
        if value is None:
            raise ValueError(f"`{name}`[{index}] is None")
        if isinstance(value, float) and math.isnan(value):
            raise ValueError(f"`{name}`[{index}] is NaN")
    return values


def check_same_length(**named: Sequence) -> int:
    """All named sequences have one length; returns it.

    >>> check_same_length(predictions=["a", "b"], references=["a"])
    Traceback (most recent call last):
    ...
    ValueError: `references` has 1 items but `predictions` has 2
    """
    items = list(named.items())
    first_name, first = items[0]
    for name, values in items[1:]:
        if len(values) != len(first):
            raise ValueError(f"`{name}` has {len(values)} items but `{first_name}` has {len(first)}")
    return len(first)


def as_float_array(name: str, values: Any, *, ndim: int = 1, allow_nan: bool = False):
    """``values`` as a float64 numpy array of ``ndim`` dimensions, non-empty and (by default) NaN-free.

    >>> as_float_array("scores", [0.5, 1.0])
    array([0.5, 1. ])
    >>> as_float_array("scores", [0.5, float("nan")])
    Traceback (most recent call last):
    ...
    ValueError: `scores`[1] is NaN
    """
    import numpy as np

    if values is None:
        raise ValueError(f"`{name}` must be an array, got None")
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"`{name}` must be numeric with a regular shape: {error}") from None
    if array.ndim != ndim:
        raise ValueError(f"`{name}` must have {ndim} dimension(s), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"`{name}` is empty")
    if not allow_nan and np.isnan(array).any():
        first = tuple(int(i) for i in np.argwhere(np.isnan(array))[0])
        where = first[0] if len(first) == 1 else list(first)
        raise ValueError(f"`{name}`[{where}] is NaN")
    return array
