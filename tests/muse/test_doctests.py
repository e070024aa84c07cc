"""The doctests of the MUSE modules run (their examples are hand-computed values); the metric modules'
doctests run in tests/metrics/test_doctests.py."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("module", ["medunlearn.muse.data", "medunlearn.muse.rendering"])
def test_module_doctests_pass(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
