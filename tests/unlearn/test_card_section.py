"""``replace_card_section`` (src/medunlearn/unlearn/card.py) writes through the one atomic writer
(``medunlearn.utils.files``): a failed write keeps the old card and leaves no temporary file."""

from __future__ import annotations

import doctest
import os

import pytest

import medunlearn.unlearn.card
from medunlearn.unlearn.card import replace_card_section


def test_doctests():
    assert doctest.testmod(medunlearn.unlearn.card).failed == 0


def test_a_failed_write_keeps_the_old_card_and_leaves_nothing_behind(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("# Card\n", encoding="utf-8")

    def refuse(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        replace_card_section(tmp_path, "robustness", "## Robustness\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == "# Card\n"
