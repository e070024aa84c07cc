"""``medunlearn study``: the mini-study end to end on tiny-llama, shrunk (2 methods × 2 forget sizes, one
step each); kill and resume; ``--jobs 2`` and submitit's local executor give the same numbers as ``--jobs 1``;
changing one method's field reruns only its cells.

The reference study runs once (module fixture). The other runs start from a copy of its folder without the
cells (data, fine-tuned model and baselines are reused: their fingerprints match), so they compare the cells.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from medunlearn.study import run_study
from medunlearn.study.config import load_study

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "recipes" / "studies" / "mini.yaml"
METHODS = ("grad_diff", "simnpo")
FORGET = ("forget_10", "disease_cancer_forget_10")
PATH_COLUMNS = ("eval_dir", "model_dir", "study")


def shrunk_study(folder: Path, **method_changes) -> Path:
    """The shipped mini-study file, shrunk to a test's size (``method_changes``: label -> fields)."""
    raw = yaml.safe_load(MINI.read_text())
    raw["data"]["build"]["patients"] = 40
    raw["finetune"].update(notes_epochs=0.0, qa_epochs=2.0)
    raw["methods"] = {label: {**raw["methods"][label], "max_steps": 1} for label in METHODS}
    for label, fields in method_changes.items():
        raw["methods"][label].update(fields)
    raw["forget"] = list(FORGET)
    raw["evaluation"] = {
        "runner": {"max_new_tokens": 4, "batch_size": 32},
        "populations": {"max_retain_patients": 4},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def cells_of(results: dict) -> dict:
    """Per cell: its rows without the paths (which differ between study folders)."""
    rows = {}
    for row in results["rows"]:
        if row["kind"] == "cell":
            key = (row["stage"], row["population"], row["qa_type"])
            rows[key] = {k: v for k, v in row.items() if k not in PATH_COLUMNS}
    return rows


def last_run(study_dir: Path) -> dict:
    return json.loads((study_dir / "study.json").read_text())["runs"][-1]


def copy_without_cells(reference: Path, target: Path) -> Path:
    shutil.copytree(reference, target, ignore=shutil.ignore_patterns("cells", "results.*", "submitit"))
    return target


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study")
    study_file = shrunk_study(folder)
    started = time.perf_counter()
    result = run_study(study_file, folder / "ref", jobs=1)
    result["wall"] = time.perf_counter() - started
    return folder, study_file, result


def test_mini_study_end_to_end(reference):
    folder, _, result = reference
    study_dir = Path(result["study_dir"])
    cells = [f"{m}-{f}-s0" for m in METHODS for f in FORGET]
    assert sorted(result["ran"]) == sorted(["finetune", *(f"finetuned-{f}" for f in FORGET), *cells])
    assert not result["skipped"] and not result["failed"]
    state = json.loads((study_dir / "study.json").read_text())
    assert {name: s["status"] for name, s in state["status"].items() if s["kind"] == "cell"} == dict.fromkeys(
        cells, "done"
    )
    for cell in cells:
        assert (study_dir / "cells" / cell / "model" / "model.safetensors").is_file()
        assert (study_dir / "cells" / cell / "eval" / "summary.json").is_file()
    import pandas as pd

    table = pd.read_parquet(study_dir / "results.parquet")
    assert set(table["stage"]) == {*cells, *(f"finetuned-{f}" for f in FORGET)}
    assert {"forget_seen", "retain_same_disease", "retain_out_of_disease"} <= set(table["population"])
    assert {"all", "factual", "reasoning"} <= set(table["qa_type"])
    assert not table.duplicated(["stage", "population", "qa_type"]).any()
    forget = table[
        (table["population"] == "forget_seen") & (table["qa_type"] == "all") & (table["kind"] == "cell")
    ]
    assert "answer_forgetting" in forget  # NaN when the 2-epoch model answered nothing right before
    retained = table[(table["population"] == "retain_out_of_disease") & (table["qa_type"] == "all")]
    assert retained["model_utility"].notna().all()
    assert all(Path(p).is_dir() for p in table["eval_dir"])  # kept for bootstrap intervals and figures
    assert set(table[table["kind"] == "cell"]["forget_size"]) == {10}
    assert set(table["split"]) == {"random", "disease"}
    assert set(table["threads"]) == {1}  # the threads every stage ran with (not fingerprinted)

    again = run_study(folder / "study.yaml", study_dir, jobs=1)  # a finished study: everything skipped
    assert not again["ran"] and len(again["skipped"]) == 1 + len(FORGET) + len(cells)
    assert cells_of(again["results"]) == cells_of(result["results"])


def test_kill_mid_way_and_resume(reference, tmp_path):
    folder, study_file, result = reference
    study_dir = copy_without_cells(Path(result["study_dir"]), tmp_path / "killed")
    command = [
        str(Path(sys.executable).with_name("medunlearn")),
        "study",
        str(study_file),
        "--out",
        str(study_dir),
    ]
    child = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 240
    try:
        while not list((study_dir / "cells").glob("*/done.json")):
            assert child.poll() is None, child.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "no cell finished in time"
            time.sleep(0.2)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the runner and its worker process
        child.wait()
    finished = sorted(p.parent.name for p in (study_dir / "cells").glob("*/done.json"))
    all_cells = {f"{m}-{f}-s0" for m in METHODS for f in FORGET}
    # A proper subset: every finished cell is a cell of the grid, and the kill left some unfinished.
    assert set(finished) < all_cells, f"nothing left to resume: {finished}"
    resumed = run_study(study_file, study_dir, jobs=1)
    assert sorted(resumed["ran"]) == sorted(all_cells - set(finished))  # only the unfinished cells
    assert set(finished) <= set(resumed["skipped"])
    log = (study_dir / "study.log").read_text()
    for cell in finished:
        assert f"skipped cell {cell}" in log
    assert cells_of(resumed["results"]) == cells_of(result["results"])


def test_two_jobs_give_the_numbers_of_one(reference, tmp_path):
    _, study_file, result = reference
    study_dir = copy_without_cells(Path(result["study_dir"]), tmp_path / "two")
    parallel = run_study(study_file, study_dir, jobs=2)
    assert len(parallel["ran"]) == 4 and last_run(study_dir)["jobs"] == 2
    assert cells_of(parallel["results"]) == cells_of(result["results"])


def test_submitit_local_executor_gives_the_numbers_of_a_local_run(reference, tmp_path):
    pytest.importorskip("submitit")
    _, study_file, result = reference
    study_dir = copy_without_cells(Path(result["study_dir"]), tmp_path / "submitit")
    local = run_study(study_file, study_dir, jobs=2, executor="local", methods=["grad_diff"])
    assert sorted(local["ran"]) == sorted(f"grad_diff-{f}-s0" for f in FORGET)
    assert (study_dir / "submitit").is_dir()
    expected = {k: v for k, v in cells_of(result["results"]).items() if k[0].startswith("grad_diff-")}
    assert cells_of(local["results"]) == expected


def test_changing_one_method_field_reruns_only_its_cells(reference, tmp_path):
    folder, _, result = reference
    study_dir = tmp_path / "changed"
    shutil.copytree(Path(result["study_dir"]), study_dir)
    changed_file = shrunk_study(tmp_path, simnpo={"learning_rate": 1.0e-2})
    changed = run_study(changed_file, study_dir, jobs=1)
    assert sorted(changed["ran"]) == sorted(f"simnpo-{f}-s0" for f in FORGET)
    before, after = cells_of(result["results"]), cells_of(changed["results"])
    for key, row in before.items():
        if key[0].startswith("grad_diff-"):
            assert after[key] == row
    assert any(after[k] != v for k, v in before.items() if k[0].startswith("simnpo-"))


def test_shipped_study_files_validate():
    from medunlearn.study.grid import validate_study

    paper = load_study(REPO / "recipes" / "studies" / "paper.yaml")
    assert paper.model["model_name_or_path"] == "meta-llama/Meta-Llama-3-8B" and paper.model["load_in_4bit"]
    assert paper.data.build["patients"] == 8820
    # 5 random + cancer 5-25, infection/immune 5-20, cardiovascular 5-15: what 8,820 patients can fill
    # (cardiovascular has 1,429 patients, fewer than forget_20's 1,764).
    assert len(paper.forget) == 17 and len(paper.methods) == 4
    grid = validate_study(paper)  # resolves every method config; the data is not built
    assert grid is not None and len(grid.cells) == 17 * 4 * len(paper.seeds)
    mini = load_study(MINI)
    assert len(mini.methods) * len(mini.forget) == 18
    validate_study(mini)
