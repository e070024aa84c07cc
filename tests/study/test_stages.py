"""The study's pieces without training: the stage marker, one job class per stage kind, ``run_job`` on a
planted job, the phases a study file gives, and the run settings' checks."""

from __future__ import annotations

import doctest
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from medunlearn.errors import MedunlearnError
from medunlearn.study.config import load_study
from medunlearn.study.grid import build_grid
from medunlearn.study.run import StudyRunSettings, plan_phases
from medunlearn.study.stages import (
    AttackJob,
    BaselineJob,
    CellJob,
    FinetuneJob,
    Job,
    StageKind,
    StudyContext,
    run_job,
)
from medunlearn.utils import stage_marker
from medunlearn.utils.stage_marker import is_done, mark_done, read_marker

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "recipes" / "studies" / "tiny.yaml"


def test_stage_marker_holds_the_fingerprint_and_nothing_else_counts(tmp_path):
    assert not is_done(tmp_path, "abc") and read_marker(tmp_path) is None  # no marker
    (tmp_path / "done.json").write_text('{"fingerprint": "ab')  # a killed writer's half file
    assert not is_done(tmp_path, "abc")
    (tmp_path / "done.json").write_text('["abc"]')  # not a record
    assert not is_done(tmp_path, "abc")
    path = mark_done(tmp_path, "abc", {"name": "cell", "fingerprint": "stale", "seconds": 2.5})
    assert json.loads(path.read_text()) == {"name": "cell", "fingerprint": "abc", "seconds": 2.5}
    assert is_done(tmp_path, "abc") and not is_done(tmp_path, "abd")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.json"]  # no temporary file left behind
    mark_done(tmp_path, "xyz", name="data.json")  # another marker beside it, by name
    assert is_done(tmp_path, "xyz", "data.json") and is_done(tmp_path, "abc")


def test_stage_marker_doctest():
    assert doctest.testmod(stage_marker).failed == 0


@dataclass
class PlantedJob(Job):
    kind: ClassVar[StageKind] = "cell"
    text: str = ""

    def run(self, folder: Path) -> None:
        assert Path.cwd() == Path(self.context.study_dir)  # models are named inside the study folder
        assert not any(folder.iterdir())  # every stage starts from an empty folder
        (folder / "out.txt").write_text(self.text)


def test_run_job_empties_the_folder_runs_the_job_and_marks_it_done_last(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    context = StudyContext(str(tmp_path), "data", {}, {}, threads=None)
    folder = tmp_path / "cells" / "c"
    folder.mkdir(parents=True)
    (folder / "leftover.bin").write_text("a killed run's")
    mark_done(folder, "old")
    record = run_job(PlantedJob("c", "cells/c", "fp1", context, text="hello"))
    assert sorted(p.name for p in folder.iterdir()) == ["done.json", "out.txt"]
    assert (folder / "out.txt").read_text() == "hello"
    assert record["kind"] == "cell" and record["name"] == "c" and is_done(folder, "fp1")
    assert read_marker(folder) == record

    class Failing(PlantedJob):
        def run(self, folder: Path) -> None:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_job(Failing("c", "cells/c", "fp2", context))
    assert not (folder / "done.json").exists() and not is_done(folder, "fp1")  # no marker: it reruns


def test_plan_phases_gives_one_job_class_per_stage_kind():
    study = load_study(TINY)
    study_with_attacks = load_study(TINY)
    from medunlearn.study.config import AttackSpec

    study_with_attacks.attacks = AttackSpec(attacks=["holdout"])
    grid = build_grid(study_with_attacks, "data-fp")
    context = StudyContext("/study", "/study/data", study.model, {"runner": {}}, threads=1)
    phases = plan_phases(study_with_attacks, grid, context, workers=3, finetune_threads=7)
    kinds = [[job.kind for job in phase.jobs] for phase in phases]
    assert kinds == [["finetune"], ["baseline"] * 2, ["cell"] * 4, ["attack"] * 4]
    assert [type(phase.jobs[0]) for phase in phases] == [FinetuneJob, BaselineJob, CellJob, AttackJob]
    assert [phase.workers for phase in phases] == [1, 3, 3, 3]
    finetune = phases[0].jobs[0]
    assert finetune.context.threads == 7 and phases[2].jobs[0].context.threads == 1
    baselines = {job.forget: job for job in phases[1].jobs}
    for cell in phases[2].jobs:  # every cell reads the before-model outputs its baseline writes
        assert (
            cell.before_outputs
            == baselines[cell.forget].before_outputs
            == f"baseline/{cell.forget}/before_outputs"
        )
        assert cell.fields["seed"] == 0 and cell.fields["disable_tqdm"] is True
    for attack, cell in zip(phases[3].jobs, grid.cells):
        assert attack.model_dir == f"cells/{cell.name}/model" and attack.label == cell.name
        assert attack.fingerprint == cell.attack_fingerprint != cell.fingerprint
    for phase in phases:  # sent to worker processes, submitit and Slurm
        for job in phase.jobs:
            assert pickle.loads(pickle.dumps(job)) == job
    assert len(plan_phases(study, build_grid(study, "data-fp"), context, 3, 7)) == 3  # no attacks: no phase


@pytest.mark.parametrize(
    "settings, message",
    [
        (StudyRunSettings(executor="ray"), "unknown executor 'ray'"),
        (StudyRunSettings(jobs=0), "--jobs and --threads must be at least 1"),
        (StudyRunSettings(threads=0), "--jobs and --threads must be at least 1"),
    ],
)
def test_run_settings_are_checked(settings, message):
    with pytest.raises(MedunlearnError, match=message):
        settings.check()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, is not running)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    except FileNotFoundError:
        return False


PARENT = """
import os, sys, time
from medunlearn.study.executors import ProcessPoolStages
with ProcessPoolStages(1) as stages:
    worker = stages.pool.submit(os.getpid).result()
    stages.pool.submit(time.sleep, 300)  # a stage that outlives the test
    print(worker, flush=True)  # only now: the signal lands while the stage runs, not inside submit()
    time.sleep(300)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_stage_worker_dies_with_the_study(sig):
    """Before: killing the study left its pool's worker running the stage, orphaned (SIGINT: the study
    waited for the stage to end)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        stdout=subprocess.PIPE,
        env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
        # A study started from a shell that ignores SIGINT (a background job) ignores Ctrl-C too, and a child
        # inherits an ignored signal: in the full suite the pytest process can ignore it, so the child starts
        # with SIGINT at its default (Python then turns it into KeyboardInterrupt), as in a terminal.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        worker = int(parent.stdout.readline())
        assert _alive(worker)
        parent.send_signal(sig)
        parent.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), "the worker outlived the study"
    finally:
        parent.kill()
        parent.stdout.close()
