"""``run_study``: build the data, fine-tune once, evaluate the fine-tuned model per forget config, then run
every cell (unlearn + evaluate), skipping every stage whose fingerprint matches what the folder holds.

A study folder::

    study.json                 the resolved grid, fingerprints, status per stage, one entry per invocation
    study.log                  one line per stage run, skipped or failed (what the tests read)
    data/                      the AMNESIA folder (when the study file gives build options)
    finetune/model/            the fine-tuned model; finetune/done.json
    baseline/<forget>/eval/    the fine-tuned model's evaluation ("no unlearning"); before_outputs/ next to it
    cells/<cell>/model/        the unlearned model; cells/<cell>/eval/ its evaluation; cells/<cell>/done.json
    cells/<cell>/attacks/      with an ``attacks:`` mapping: the cell's attack folder (docs/attacks.md) and
                               its own done.json; the robustness section goes in cells/<cell>/model/README.md
    results.parquet / .json    one row per (stage × population × QA type), see medunlearn.study.collect

A MUSE protocol study (``benchmark: muse``, :mod:`medunlearn.study.muse_stages`) also has ``retain/model/``
(the retain model), ``baseline/finetuned/`` and ``baseline/retain/`` (the two models' evaluations), one
results row per stage and the protocol's figures (docs/study.md, "MUSE protocols").

A stage is finished when its ``done.json`` holds its fingerprint (:mod:`medunlearn.utils.stage_marker`);
anything else found in its folder (a killed run's leftovers, a changed setting's outputs) is removed and the
stage runs again. Each stage is a job (:mod:`medunlearn.study.stages`: one class per kind) run through an
executor (:mod:`medunlearn.study.executors`: ``processes``, ``local`` or ``slurm``). Jobs ``chdir`` into the
study folder and name models by their path inside it, so a study folder can be moved or copied and still
resumes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from medunlearn.errors import InputError, OutputExistsError
from medunlearn.study.collect import collect_results
from medunlearn.study.config import StudyConfig, load_study
from medunlearn.study.executors import EXECUTORS, ExecutorName, StageExecutor, check_executor, open_executor
from medunlearn.study.grid import (
    Baseline,
    Grid,
    attack_settings,
    cell_fields,
    check_subset_names,
    data_fingerprint,
    study_precision,
    validate_study,
)
from medunlearn.study.stages import (
    FINETUNED,
    AttackJob,
    BaselineJob,
    CellJob,
    FinetuneJob,
    Job,
    StudyContext,
    run_job,
)
from medunlearn.utils.files import atomic_write_text, check_outside_inputs
from medunlearn.utils.stage_marker import DONE, is_done, mark_done, read_marker
from medunlearn.utils.user_files import read_json

DATA_MARKER = "data.json"  # beside data/: the fingerprint of the build options it was built with
Log = Callable[[str], None]


@dataclass(frozen=True)
class StudyRunSettings:
    """How one invocation runs a study; none of it is fingerprinted (the numbers depend on ``threads`` only
    through float rounding).

    Parameters:
        jobs (`int`, defaults to `1`): stages at once.
        executor (`"processes"`, `"local"` or `"slurm"`, defaults to `"processes"`): docs/study.md.
        threads (`int`, defaults to `1`): torch threads per stage (1: ``--jobs N`` on N cores).
        methods (`list[str]` or `None`): run only these method labels (default all).
        forget (`list[str]` or `None`): run only these forget configs (default all).
    """

    jobs: int = 1
    executor: ExecutorName = "processes"
    threads: int = 1
    methods: list[str] | None = None
    forget: list[str] | None = None

    def check(self) -> None:
        check_executor(self.executor)
        if self.jobs < 1 or self.threads < 1:
            raise InputError("--jobs and --threads must be at least 1")


@dataclass
class Phase:
    """Jobs independent of each other, run together; a phase starts when the one before has finished."""

    title: str
    jobs: list[Job]
    workers: int


# ---------------------------------------------------------------------------------------------------------
# The study


class StudyLog:
    """``study.json`` (written by this process only) and ``study.log``."""

    def __init__(self, study_dir: Path, study: StudyConfig, grid: Grid, run: dict):
        self.dir, self.path = study_dir, study_dir / "study.json"
        previous = read_json(self.path, expect=dict) if self.path.is_file() else {}
        self.state = {
            "name": study.name,
            "study_file": str(Path(study.source).resolve()),
            "study": _study_json(study),
            "grid": grid.to_json(),
            "status": {},
            "runs": previous.get("runs", []) + [run],
        }
        self.run = run

    def status(self, name: str, value: dict) -> None:
        self.state["status"][name] = value
        self.save()

    def save(self) -> None:
        atomic_write_text(self.path, json.dumps(self.state, indent=2, default=str))

    def line(self, text: str) -> None:
        with (self.dir / "study.log").open("a") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} [{os.getpid()}] {text}\n")


def _study_json(study: StudyConfig) -> dict:
    return asdict(study)


def prepare_study(study: StudyConfig | str | Path, out: str | Path) -> tuple[StudyConfig, Path, Path, Grid]:
    """Parse and validate the study, build its data if needed; ``(study, study_dir, data_dir, grid)``."""
    if not isinstance(study, StudyConfig):
        study = load_study(study)
    # Refused before anything is written (study.json, the fine-tune): a study folder inside its inputs.
    check_outside_inputs(out, _study_inputs(study))
    study_dir = Path(out).resolve()
    marker = study_dir / "study.json"
    if study_dir.is_dir() and any(study_dir.iterdir()) and not marker.is_file():
        raise OutputExistsError(f"{study_dir} exists and is not a study folder (no study.json)")
    study_dir.mkdir(parents=True, exist_ok=True)
    if study.data.build is not None:
        data_dir = study_dir / "data"
        data_fp = data_fingerprint(study)
        if not is_done(study_dir, data_fp, DATA_MARKER):
            validate_study(study, data_dir=Path("/nonexistent"))  # fail on the file before building
            _build_data(study, data_dir)
            mark_done(study_dir, data_fp, {"build": study.data.build}, DATA_MARKER)
    else:
        data_dir = study.data_path()
    grid = validate_study(study, data_dir=data_dir)
    return study, study_dir, data_dir, grid


def _study_inputs(study: StudyConfig) -> dict:
    """The data folder a study is given (``data.path``), which its folder may not be nor lie in."""
    return {} if study.data.build is not None else {f"{study.source}'s data.path": study.data_path()}


def _build_data(study: StudyConfig, data_dir: Path) -> None:
    """Build the data folder: AMNESIA's, or a MUSE-format one (``benchmark: muse``)."""
    if study.benchmark == "muse":
        from medunlearn.muse.build import build_muse_folder

        build_muse_folder(data_dir, overwrite=True, **study.data.build)
        return
    from medunlearn.amnesia.pipeline import build_amnesia

    build_amnesia(data_dir, overwrite=True, **study.data.build)


def run_study(
    study: StudyConfig | str | Path,
    out: str | Path,
    *,
    jobs: int = 1,
    executor: ExecutorName = "processes",
    threads: int = 1,
    methods: list[str] | None = None,
    forget: list[str] | None = None,
    log: Log | None = None,
) -> dict:
    """Run (or resume) a study into ``out``; returns ``{"study_dir", "ran", "skipped", "results", ...}``.

    ``jobs``: stages at once; ``threads``: torch threads per stage (1: ``--jobs N`` on N cores; the numbers
    depend on it only through float rounding); ``methods`` / ``forget``: run only these labels / forget
    configs (the fingerprints do not change, so the full study later reuses them). Every stage computes in
    the study's ``dtype`` resolved here (:func:`~medunlearn.study.grid.study_precision`; set
    ``study.dtype`` on a :class:`StudyConfig` to override the file's), recorded in the run's entry of
    ``study.json``.
    """
    settings = StudyRunSettings(jobs, executor, threads, methods, forget)
    settings.check()
    import torch

    study, study_dir, data_dir, grid = prepare_study(study, out)
    dtype = study_precision(study).dtype  # as the grid's fingerprints resolved it
    finetune_threads = torch.get_num_threads()  # the fine-tune runs alone: every core this process has
    with open_executor(settings.executor, settings.jobs, study_dir, study.slurm) as stages:
        context = StudyContext(
            str(study_dir), str(data_dir), study.model, _evaluation(study), settings.threads, dtype
        )
        grid, phases = _plan(study, grid, context, settings, finetune_threads)
        invocation = StudyRun(study, study_dir, grid, settings, log or (lambda text: None))
        invocation.record["dtype"] = dtype
        return invocation.run(phases, stages)


def _plan(study: StudyConfig, grid, context: StudyContext, settings: StudyRunSettings, finetune_threads: int):
    """The grid restricted to ``--methods`` / ``--forget``, and its phases (a MUSE study: its protocol's)."""
    if study.benchmark == "muse":
        from medunlearn.study.muse_grid import subset_muse_grid
        from medunlearn.study.muse_stages import plan_muse_phases

        grid = subset_muse_grid(study, grid, settings.methods, settings.forget)
        return grid, plan_muse_phases(study, grid, context, settings.jobs, finetune_threads)
    grid = _subset(study, grid, settings.methods, settings.forget)
    return grid, plan_phases(study, grid, context, settings.jobs, finetune_threads)


def _evaluation(study: StudyConfig) -> dict:
    """The study's evaluation settings as the stages receive them."""
    evaluation = asdict(study.evaluation)
    if evaluation["runner"].get("engine") == "vllm":
        # Stages run inside the study folder: the vLLM Python is found from here, once.
        from medunlearn.llm.server import default_vllm_python, default_vllm_venv

        python = evaluation["runner"].get("vllm_python") or default_vllm_python()
        python = Path(python) if python else default_vllm_venv() / "bin" / "python"
        evaluation["runner"]["vllm_python"] = str(python.resolve())
    return evaluation


def plan_phases(
    study: StudyConfig, grid: Grid, context: StudyContext, workers: int, finetune_threads: int
) -> list[Phase]:
    """The study's phases in order: fine-tune, baselines, cells, then (with ``attacks:``) attacks."""
    finetune = FinetuneJob(
        "finetune",
        "finetune",
        grid.finetune_fingerprint,
        replace(context, threads=finetune_threads),
        finetune=asdict(study.finetune),
    )
    baselines = [
        BaselineJob(
            b.name, b.folder, b.fingerprint, context, forget=b.forget, before_outputs=b.before_outputs
        )
        for b in grid.baselines
    ]
    cells = [
        CellJob(
            c.name,
            c.folder,
            c.fingerprint,
            context,
            forget=c.forget,
            before_outputs=Baseline(c.forget, fingerprint="").before_outputs,  # its baseline's
            method=c.method,
            fields=cell_fields(c.fields, c.seed),
        )
        for c in grid.cells
    ]
    phases = [
        Phase("fine-tune", [finetune], 1),
        Phase("baselines (the fine-tuned model per forget config)", baselines, workers),
        Phase("cells", cells, workers),
    ]
    if study.attacks is not None:
        settings = attack_settings(study)
        attacks = [
            AttackJob(
                c.attack_name,
                c.attack_folder,
                c.attack_fingerprint,
                context,
                forget=c.forget,
                attacks=settings,
                model_dir=f"{c.folder}/model",
                label=c.name,
            )
            for c in grid.cells
        ]
        phases.append(Phase("attacks (one attack stage per cell)", attacks, workers))
    return phases


class StudyRun:
    """One invocation of a study: runs its phases, skipping finished stages, and keeps the book
    (``study.json``'s status and run entry, ``study.log``)."""

    def __init__(
        self, study: StudyConfig, study_dir: Path, grid: Grid, settings: StudyRunSettings, log: Log
    ) -> None:
        self.study_dir, self.log = study_dir, log
        self.record = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "jobs": settings.jobs,
            "executor": settings.executor,
            "threads": settings.threads,
            "ran": [],
            "skipped": [],
            "failed": [],
        }
        self.book = StudyLog(study_dir, study, grid, self.record)

    def run(self, phases: list[Phase], executor: StageExecutor) -> dict:
        started = time.perf_counter()
        for phase in phases:
            self.phase(phase, executor)
        run = self.record
        run["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        run["seconds"] = round(time.perf_counter() - started, 1)
        self.book.save()
        results = collect_results(self.study_dir)
        self.book.line(
            f"finished: ran {len(run['ran'])}, skipped {len(run['skipped'])} in {run['seconds']} s"
        )
        return {
            "study_dir": str(self.study_dir),
            "ran": run["ran"],
            "skipped": run["skipped"],
            "failed": run["failed"],
            "seconds": run["seconds"],
            "results": results,
        }

    def phase(self, phase: Phase, executor: StageExecutor) -> None:
        """Mark every job finished before as skipped, run the others."""
        todo = []
        for job in phase.jobs:
            status = {"kind": job.kind, "status": "pending", "fingerprint": job.fingerprint}
            if is_done(self.study_dir / job.folder, job.fingerprint):
                self.record["skipped"].append(job.name)
                self.book.line(f"skipped {job.kind} {job.name} {job.fingerprint} (finished)")
                status = {**status, "status": "done", **read_marker(self.study_dir / job.folder)}
            else:
                todo.append(job)
            self.book.state["status"][job.name] = status
        self.book.save()
        self.log(f"{phase.title}: {len(todo)} to run, {len(phase.jobs) - len(todo)} finished before")
        if todo:
            executor.run(todo, phase.workers, self.on_done)

    def on_done(self, job: Job, record: dict) -> None:
        """Called in this process as each job finishes (``record``: its marker, or ``{"name", "failed"}``)."""
        failed = "failed" in record
        self.record["failed" if failed else "ran"].append(job.name)
        status = "failed" if failed else "done"
        self.book.status(
            job.name, {"kind": job.kind, "status": status, **record, "fingerprint": job.fingerprint}
        )
        self.book.line(
            f"{'failed' if failed else 'ran'} {job.kind} {job.name} {job.fingerprint}"
            + (f": {record['failed']}" if failed else f" in {record['seconds']} s")
        )
        self.log(
            f"  {'FAILED' if failed else 'done'} {job.name}"
            + (f": {record['failed']}" if failed else f" ({record['seconds']:.1f} s)")
        )


def _subset(study: StudyConfig, grid: Grid, methods: list[str] | None, forget: list[str] | None) -> Grid:
    check_subset_names(study, methods, forget, "forget config")
    grid.cells = [
        c for c in grid.cells if (not methods or c.label in methods) and (not forget or c.forget in forget)
    ]
    grid.baselines = [b for b in grid.baselines if not forget or b.forget in forget]
    return grid


__all__ = [
    "DONE",
    "EXECUTORS",
    "FINETUNED",
    "Job",
    "Phase",
    "StudyRun",
    "StudyRunSettings",
    "plan_phases",
    "prepare_study",
    "run_job",
    "run_study",
]
