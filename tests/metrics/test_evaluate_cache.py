"""``medunlearn metrics install`` / ``medunlearn.register_evaluate_modules()``: every module in evaluate's
module cache, so that ``evaluate.load(name)`` works by its bare name, offline, in a fresh cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import medunlearn
from medunlearn.cli import main
from medunlearn.metric_modules.evaluate_cache import (
    EvaluateModulesCacheError,
    installed_evaluate_modules,
    register_evaluate_modules,
)
from medunlearn.metric_modules.loading import available_metrics

REPOSITORY = Path(__file__).resolve().parents[2]
NAMES = sorted(
    path.parent.name for path in (REPOSITORY / "metrics").glob("*/*.py") if path.stem == path.parent.name
)

# One computation per module, by its bare name, and the value it must give.
BY_NAME = """
import json, math, sys
import evaluate

gold = {"conflict_type": "no_conflict", "axes": [], "dominant_confounder": "none",
        "reconciliation": "they agree", "evidence_a": "x rises", "evidence_b": "x rises too"}
calls = {
    "answer_forgetting": (dict(predictions=["a b"], references=["a b"]), "answer_forgetting"),
    "contextual_contradiction": (dict(predictions=[gold], references=[gold]), "accuracy"),
    "degeneration": (dict(predictions=["", "The troponin was high."]), "degeneration_score"),
    "disease_leakage": (dict(predictions=["sepsis"], references=[["sepsis", "fever"]]), "leakage_score"),
    "forget_quality": (dict(predictions=[0.1, 0.2, 0.3], references=[0.7, 0.8, 0.9]), "ks_statistic"),
    "memorization": (
        dict(predictions=[[1, 2]], references=[[1, 2]], token_logprobs=[[math.log(0.5)] * 2]),
        "exact_memorization",
    ),
    "mia": (dict(predictions=[[-0.1], [-0.2], [-2.0], [-3.0]], references=[1, 1, 0, 0]), "loss_auc"),
    "model_utility": (dict(predictions=["a b"], references=["a b"]), "model_utility"),
    "truth_ratio": (dict(predictions=[[0.2, 0.3]], references=[0.5]), "truth_ratio"),
}
values = {}
for name in sys.argv[1:]:
    inputs, key = calls[name]
    values[name] = evaluate.load(name).compute(**inputs)[key]
print(json.dumps(values))
"""
EXPECTED = {
    "answer_forgetting": 0.0,
    "contextual_contradiction": 1.0,
    "degeneration": 0.5,
    "disease_leakage": 0.5,
    "forget_quality": 1.0,
    "memorization": 1.0,
    "mia": 1.0,
    "model_utility": 1.0,
    "truth_ratio": 0.5,
}


def fresh_environment(modules_cache: Path) -> dict[str, str]:
    """Offline, with evaluate's module cache in ``modules_cache``; set before evaluate is imported."""
    return {
        **os.environ,
        "HF_MODULES_CACHE": str(modules_cache),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


@pytest.mark.slow  # two fresh processes importing evaluate (~30 s)
def test_after_install_every_module_loads_by_its_bare_name_offline_in_a_fresh_cache(tmp_path):
    modules_cache, elsewhere = tmp_path / "hf-modules", tmp_path / "elsewhere"
    elsewhere.mkdir()  # not the repository: evaluate's ./<name>/<name>.py lookup finds nothing here
    env = fresh_environment(modules_cache)
    assert NAMES == available_metrics() and len(NAMES) == 9

    install = subprocess.run(
        [sys.executable, "-m", "medunlearn.cli", "metrics", "install"],
        capture_output=True, text=True, env=env, cwd=elsewhere, timeout=600,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    assert "9 written, 0 already installed" in install.stdout
    for name in NAMES:
        (hashed,) = (modules_cache / "evaluate_modules" / "metrics" / f"evaluate-metric--{name}").glob("*/")
        assert (
            len(hashed.name) == 64
            and (hashed / f"{name}.py").is_file()
            and (hashed / "__init__.py").is_file()
        )

    loaded = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(BY_NAME), *NAMES],
        capture_output=True, text=True, env=env, cwd=elsewhere, timeout=600,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    values = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert sorted(values) == NAMES
    assert values == pytest.approx(EXPECTED)
    assert "Using the latest cached version of the module" in loaded.stderr  # evaluate's cache fallback


def test_install_is_idempotent_and_keyed_by_content(tmp_path):
    first = register_evaluate_modules(modules_cache=tmp_path)
    assert [m.name for m in first] == NAMES and {m.status for m in first} == {"written"}
    files = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    again = register_evaluate_modules(modules_cache=tmp_path)
    assert {m.status for m in again} == {"unchanged"} and [m.path for m in again] == [m.path for m in first]
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()) == files
    for module in first:
        assert (
            module.path.parent.name == module.sha256
            and module.path.read_bytes()
            == (REPOSITORY / "metrics" / module.name / f"{module.name}.py").read_bytes()
        )
    for parent in ("", "evaluate_modules", "evaluate_modules/metrics"):
        assert (tmp_path / parent / "__init__.py").is_file()
    assert {m.status for m in installed_evaluate_modules(tmp_path)} == {"installed"}


def test_list_tells_installed_other_version_and_missing_apart(tmp_path, capsys):
    register_evaluate_modules(["disease_leakage", "mia"], modules_cache=tmp_path)
    # Another version of mia, installed later: evaluate would load that one.
    other = tmp_path / "evaluate_modules" / "metrics" / "evaluate-metric--mia" / ("0" * 64) / "mia.py"
    other.parent.mkdir()
    other.write_text("# another version\n")
    os.utime(other, (other.stat().st_mtime + 60,) * 2)
    status = {m.name: m for m in installed_evaluate_modules(tmp_path)}
    assert status["disease_leakage"].status == "installed"
    assert status["mia"].status == "other version" and status["mia"].path == other
    assert status["degeneration"].status == "not installed"

    assert main(["metrics", "install", "--list", "--modules-cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "8 of 9 not at this version: run `medunlearn metrics install`" in out
    # Installing again makes this version of mia the latest, the one evaluate takes.
    assert main(["metrics", "install", "--modules-cache", str(tmp_path)]) == 0
    assert "7 written, 2 already installed" in capsys.readouterr().out
    assert {m.status for m in installed_evaluate_modules(tmp_path)} == {"installed"}


def test_an_unwritable_cache_is_a_named_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(EvaluateModulesCacheError, match="cannot write evaluate's module cache"):
        register_evaluate_modules(modules_cache=blocker)
    assert main(["metrics", "install", "--modules-cache", str(blocker)]) == 2
    assert "medunlearn metrics: error: cannot write evaluate's module cache" in capsys.readouterr().err


def test_import_medunlearn_writes_nothing_and_the_api_is_exposed(tmp_path):
    code = "import medunlearn; print(callable(medunlearn.register_evaluate_modules))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=fresh_environment(tmp_path),
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
    assert not (tmp_path / "evaluate_modules").exists()
    assert "register_evaluate_modules" in dir(medunlearn)
