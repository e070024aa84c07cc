"""MUSE protocol studies end to end on tiny-llama: the shipped files, shrunk (fewer epochs and folds), run
through ``run_study``: one results row per method × seed × fold (or request) and the two models before
unlearning, the figures drawing those rows, the sustainability chain in the rows, and resume (a finished study
runs nothing; a removed cell runs alone)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from medunlearn.cli import main
from medunlearn.study import run_study
from medunlearn.study.muse_collect import METRICS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
STUDIES = REPO / "recipes" / "studies"
# matplotlib's first two colours: the methods' lines (C0, C1)
METHOD_COLOURS = {"grad_diff": (0x1F, 0x77, 0xB4), "npo": (0xFF, 0x7F, 0x0E)}


def shrunk(name: str, folder: Path, forget: list[str], seeds: list[int]) -> Path:
    raw = yaml.safe_load((STUDIES / name).read_text())
    raw["data"]["build"]["articles"] = 5
    raw["finetune"]["epochs"] = 4.0
    raw["methods"] = {label: {**fields, "max_steps": 2} for label, fields in raw["methods"].items()}
    raw["forget"], raw["seeds"] = forget, seeds
    path = folder / name
    path.write_text(yaml.safe_dump(raw))
    return path


def draws_colour(png: Path, colour: tuple) -> bool:
    import matplotlib.image

    pixels = (matplotlib.image.imread(png)[..., :3] * 255).round().astype(int)
    return bool((np.abs(pixels - np.array(colour)).sum(axis=-1) <= 6).sum() > 30)


def check_figures(study_dir: Path, protocol: str, table: pd.DataFrame, x_key: str) -> None:
    """The two PNGs exist, each method's colour is drawn in them, and what they draw
    (``muse_<protocol>_figures.json``) is each method's mean, lowest and highest seed at each x of the
    table."""
    values = json.loads((study_dir / f"muse_{protocol}_figures.json").read_text())
    cells = table[table["kind"] == "cell"]
    for name, metric in (("utility", "knowmem_r"), ("privleak", "privleak")):
        png = study_dir / f"muse_{protocol}_{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        for label in cells["label"].unique():
            assert draws_colour(png, METHOD_COLOURS[label]), (png, label)
        drawn = values[name]
        assert drawn["metric"] == metric
        for label, group in cells.groupby("label"):
            expected = group.groupby(x_key)[metric].agg(["mean", "min", "max", "count"]).reset_index()
            points = drawn["methods"][label]
            assert [p["x"] for p in points] == [float(x) for x in expected[x_key]]
            assert np.allclose([p["mean"] for p in points], expected["mean"])
            assert np.allclose([p["lowest"] for p in points], expected["min"])
            assert np.allclose([p["highest"] for p in points], expected["max"])
            assert [p["seeds"] for p in points] == expected["count"].tolist()
        baselines = table[table["kind"] == "baseline"].set_index("stage")[metric]
        assert drawn["references"] == pytest.approx(baselines.to_dict())


def check_rows(table: pd.DataFrame, methods, seeds, folds) -> pd.DataFrame:
    assert set(table[table["kind"] == "baseline"]["stage"]) == {"finetuned", "retain"}
    cells = table[table["kind"] == "cell"]
    keys = sorted(zip(cells["label"], cells["seed"], cells["fold"]))
    assert keys == sorted((m, s, f) for m in methods for s in seeds for f in folds)  # one row each
    for metric in METRICS:
        assert table[metric].notna().all() and np.isfinite(table[metric].astype(float)).all(), metric
    assert table.set_index("stage").loc["retain", "privleak"] == 0.0  # the reference against itself
    assert (table["preset"] == "medunlearn").all()
    return cells


def test_scalability_study_end_to_end(tmp_path):
    folds = ["forget_1", "forget_3"]
    study_file = shrunk("muse-scalability.yaml", tmp_path, folds, [0, 1])
    result = run_study(study_file, tmp_path / "scal", jobs=2)
    study_dir = Path(result["study_dir"])
    assert not result["failed"] and not result["results"]["missing"]
    table = pd.read_parquet(study_dir / "results.parquet")
    cells = check_rows(table, ("grad_diff", "npo"), (0, 1), folds)
    assert (cells["corpus"] == "scal/" + cells["fold"]).all()
    assert dict(zip(cells["fold"], cells["fold_documents"])) == {"forget_1": 5, "forget_3": 15}
    assert set(cells["start_model"]) == {str(study_dir / "finetune" / "model")}
    assert set(table["threads"]) == {1}  # every stage's torch threads (not fingerprinted)
    check_figures(study_dir, "scalability", table, "fold_documents")
    again = run_study(study_file, study_dir, jobs=1)  # a finished study: every stage skipped
    assert not again["ran"] and len(again["skipped"]) == 2 + 2 + 8
    report = tmp_path / "report"
    assert main(["report", str(study_dir), "--out", str(report)]) == 0
    markdown = (report / "muse_results.md").read_text()
    assert all(f"| {stage} |" in markdown for stage in table["stage"])
    for name in ("utility", "privleak"):
        assert (report / f"muse_scalability_{name}.png").read_bytes()[:4] == b"\x89PNG"


def test_sustainability_study_end_to_end_and_resume(tmp_path, capsys):
    folds = ["forget_1", "forget_2", "forget_3"]
    study_file = shrunk("muse-sustainability.yaml", tmp_path, folds, [0])
    result = run_study(study_file, tmp_path / "sust", jobs=2)
    study_dir = Path(result["study_dir"])
    assert not result["failed"] and not result["results"]["missing"]
    table = pd.read_parquet(study_dir / "results.parquet")
    cells = check_rows(table, ("grad_diff", "npo"), (0,), folds)
    for _, chain in cells.sort_values("request").groupby("label"):
        assert chain["request"].tolist() == [1, 2, 3]
        assert chain["corpus"].tolist() == ["sust/forget_1", "sust/forget_2", "sust/forget_3"]
        starts = [str(study_dir / "finetune" / "model")] + chain["model_dir"].tolist()[:-1]
        assert chain["start_model"].tolist() == starts  # request k unlearned request k - 1's model
    check_figures(study_dir, "sustainability", table, "request")
    before = table.set_index("stage")[list(METRICS)]
    shutil.rmtree(study_dir / "cells" / "npo-forget_3-s0")  # as a study killed during its last request
    capsys.readouterr()
    assert main(["study", str(study_file), "--out", str(study_dir)]) == 0  # the command resumes it
    printed = capsys.readouterr().out
    resumed = json.loads((study_dir / "study.json").read_text())["runs"][-1]
    assert resumed["ran"] == ["npo-forget_3-s0"] and len(resumed["skipped"]) == 4 + 5
    assert "MUSE sustainability" in printed and "ran 1, skipped 9" in printed
    assert "muse_sustainability_privleak.png" in printed.replace("\n", "")  # a long path may be folded
    after = pd.read_parquet(study_dir / "results.parquet").set_index("stage")[list(METRICS)]
    pd.testing.assert_frame_equal(after.loc[before.index], before)  # rerun from the same model: the same
