"""Checks shared by the tests of what a command refuses."""

from __future__ import annotations

import pytest

from medunlearn.cli import main


def refused_when_parsed(tmp_path, capsys, argv: list[str], message: str) -> None:
    """The parser refuses ``argv`` with ``--out tmp_path/out``: exit 2, an error line naming the argument
    (``error: argument <message>``), no traceback, nothing written."""
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"error: argument {message}" in err, err
    assert "Traceback" not in err and not out.exists()
