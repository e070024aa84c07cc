"""How the study's stages run: no scheduler of our own, three executors behind one interface.

* ``processes``: a ``ProcessPoolExecutor`` (spawn context), one pool for the whole study (torch is imported
  once per worker, not once per phase);
* ``local``: submitit's ``LocalExecutor`` (each stage a subprocess with its own log in ``submitit/``);
* ``slurm``: submitit on Slurm, one array job per phase (parameters from the study file's ``slurm:``).

Each runs a phase's jobs (independent of each other) with at most ``workers`` at once and calls
``on_done(job, record)`` in the study's process as each finishes; the first failure is recorded with
``{"name", "failed"}``, the rest are cancelled and the error is re-raised.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Literal, get_args

from medunlearn.errors import InputError
from medunlearn.study.stages import Job, run_job

ExecutorName = Literal["processes", "local", "slurm"]
EXECUTORS: tuple[str, ...] = get_args(ExecutorName)
OnDone = Callable[[Job, dict], None]


def check_executor(name: str) -> None:
    """Raise an :class:`InputError` naming ``--executor`` when ``name`` is unknown or cannot run here."""
    if name not in EXECUTORS:
        raise InputError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
    if name == "processes":
        return
    if importlib.util.find_spec("submitit") is None:
        raise InputError(f"--executor {name} needs submitit: pip install 'medunlearn[study]'")
    if name == "slurm" and shutil.which("srun") is None:
        raise InputError("--executor slurm needs a Slurm cluster (no `srun` on PATH); use processes or local")


class StageExecutor:
    """Runs phases of jobs; a context manager (``close`` releases what it holds)."""

    def run(self, jobs: list[Job], workers: int, on_done: OnDone) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> StageExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ProcessPoolStages(StageExecutor):
    """``processes``: one pool of ``workers`` spawned processes for every phase."""

    def __init__(self, workers: int):
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor

        from medunlearn.llm.server import die_with_parent

        # A worker dies with the study (SIGTERM, SIGKILL, a crash): killing `medunlearn study` left its stage
        # running, orphaned, writing into the study folder. The pool starts its workers from the thread that
        # submits (the study's main thread), which lives as long as the study.
        self.pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=die_with_parent,
            initargs=(os.getpid(),),
        )

    def run(self, jobs: list[Job], workers: int, on_done: OnDone) -> None:
        from concurrent.futures import as_completed

        futures = {self.pool.submit(run_job, job): job for job in jobs}
        for future in as_completed(futures):
            _finish(futures[future], future.result, on_done, lambda: [f.cancel() for f in futures])

    def close(self) -> None:
        self.pool.shutdown()

    def __exit__(self, kind, error, traceback) -> None:
        if kind is not None and not issubclass(kind, Exception):
            # Ctrl-C (KeyboardInterrupt) or SystemExit: shutdown() would wait for the running stages to end.
            # Python 3.14's terminate_workers(); before it, the pool's own table of its processes.
            processes = getattr(self.pool, "_processes", None) or {}
            for process in list(processes.values()):
                process.terminate()
        self.close()


class SubmititLocalStages(StageExecutor):
    """``local``: submitit's ``LocalExecutor``, logs in ``<study>/submitit``."""

    def __init__(self, folder: Path, timeout_min: int):
        self.folder, self.timeout_min = folder, timeout_min

    def run(self, jobs: list[Job], workers: int, on_done: OnDone) -> None:
        from concurrent.futures import ThreadPoolExecutor, as_completed

        import submitit

        local = submitit.LocalExecutor(folder=self.folder)
        local.update_parameters(timeout_min=self.timeout_min)
        # submitit's local executor starts every job it is given at once: a thread per slot hands it one job
        # at a time and waits for it.
        with ThreadPoolExecutor(max_workers=workers) as slots:
            futures = {
                slots.submit(lambda job: local.submit(run_job, job).result(), job): job for job in jobs
            }
            for future in as_completed(futures):
                _finish(futures[future], future.result, on_done, lambda: slots.shutdown(cancel_futures=True))


class SlurmStages(StageExecutor):
    """``slurm``: one submitit array job per phase, at most ``workers`` tasks at once."""

    def __init__(self, folder: Path, parameters: dict):
        self.folder, self.parameters = folder, parameters

    def run(self, jobs: list[Job], workers: int, on_done: OnDone) -> None:
        import submitit

        cluster = submitit.AutoExecutor(folder=self.folder, cluster="slurm")
        cluster.update_parameters(slurm_array_parallelism=workers, **self.parameters)
        submitted = cluster.map_array(run_job, jobs)
        by_id = {id(s): job for s, job in zip(submitted, jobs)}
        for done in submitit.helpers.as_completed(submitted):
            _finish(
                by_id[id(done)], done.result, on_done, lambda: [s.cancel() for s in submitted if not s.done()]
            )


def open_executor(name: ExecutorName, workers: int, study_dir: Path, slurm: dict) -> StageExecutor:
    """The executor ``name`` for a study folder (``workers``: the process pool's size)."""
    check_executor(name)
    if name == "processes":
        return ProcessPoolStages(workers)
    if name == "local":
        return SubmititLocalStages(study_dir / "submitit", int(slurm.get("timeout_min", 24 * 60)))
    return SlurmStages(study_dir / "submitit", slurm)


def _finish(job: Job, result: Callable[[], dict], on_done: OnDone, stop: Callable[[], object]) -> None:
    try:
        record = result()
    except BaseException as error:  # recorded, then re-raised: never swallowed
        on_done(job, {"name": job.name, "failed": f"{type(error).__name__}: {error}"})
        stop()
        raise
    on_done(job, record)


__all__ = [
    "EXECUTORS",
    "ExecutorName",
    "ProcessPoolStages",
    "SlurmStages",
    "StageExecutor",
    "SubmititLocalStages",
    "check_executor",
    "open_executor",
]
