"""Checks shared by the tests of what a command refuses, and the files they build."""

from __future__ import annotations

from pathlib import Path

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


def write_model_file(path: Path) -> None:
    """A file of a model folder that passes the audit: real safetensors, a config with a model_type, JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".safetensors":
        import numpy as np
        from safetensors.numpy import save_file

        save_file({"weight": np.zeros(2, dtype=np.float32)}, str(path))
    elif path.name == "config.json":
        path.write_text('{"model_type": "llama"}')
    elif path.suffix == ".json":
        path.write_text("{}")
    else:
        path.write_text("x")
