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

A stage is finished when its ``done.json`` holds its fingerprint; anything else found in its folder (a killed
run's leftovers, a changed setting's outputs) is removed and the stage runs again. Stages run through an
executor: ``processes`` (a ``ProcessPoolExecutor``, spawn context), ``local`` (submitit's ``LocalExecutor``)
or ``slurm`` (submitit, one array job per phase). Jobs ``chdir`` into the study folder and name models by
their path inside it, so a study folder can be moved or copied and still resumes.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from medunlearn.errors import InputError, OutputExistsError
from medunlearn.study.collect import collect_results
from medunlearn.study.config import StudyConfig, load_study
from medunlearn.study.grid import Grid, attack_settings, data_fingerprint, validate_study

EXECUTORS = ("processes", "local", "slurm")
DONE = "done.json"
FINETUNED = "finetune/model"


@dataclass
class Job:
    """Everything one stage needs, picklable (sent to a process, a submitit job or a Slurm node)."""

    kind: str  # "finetune", "baseline", "cell" or "attack"
    name: str
    folder: str  # inside the study folder
    study_dir: str
    data_dir: str
    fingerprint: str
    model: dict[str, Any]  # ModelArguments fields of the study
    threads: int | None = 1
    forget: str = ""
    before_outputs: str = ""
    method: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    finetune: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] = field(default_factory=dict)
    attacks: dict[str, Any] = field(default_factory=dict)  # grid.attack_settings (an attack stage)
    model_dir: str = ""  # the attacked model (an attack stage)
    label: str = ""  # the method's display name in the attack folder (an attack stage)


def write_json(path: Path, value: Any) -> None:
    """Write ``value`` as JSON atomically (a killed process never leaves half a file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=2, default=str))
    os.replace(tmp, path)


def stage_done(study_dir: Path, folder: str, fingerprint: str) -> bool:
    marker = study_dir / folder / DONE
    if not marker.is_file():
        return False
    return json.loads(marker.read_text()).get("fingerprint") == fingerprint


# ---------------------------------------------------------------------------------------------------------
# One stage (runs in a worker process, a submitit job or a Slurm task)


def run_job(job: Job) -> dict:
    """Run one stage from scratch in its folder and mark it done; returns its ``done.json`` record."""
    import torch

    os.chdir(job.study_dir)
    if job.threads is not None:
        torch.set_num_threads(job.threads)  # --jobs N on N cores: one thread each
    started = time.perf_counter()
    folder = Path(job.folder)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if job.kind == "finetune":
        _finetune(job, folder)
    elif job.kind == "attack":
        _attack(job, folder)
    else:
        _evaluate(job, folder, _unlearn(job, folder) if job.kind == "cell" else FINETUNED)
    record = {
        "name": job.name,
        "kind": job.kind,
        "fingerprint": job.fingerprint,
        "seconds": round(time.perf_counter() - started, 2),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "pid": os.getpid(),
    }
    write_json(folder / DONE, record)
    return record


def _model_arguments(job: Job, path: str):
    from medunlearn.models import ModelArguments

    options = {k: v for k, v in job.model.items() if k not in ("model_name_or_path", "tiny_vocab_size")}
    return ModelArguments(path, **options)


def _finetune(job: Job, folder: Path) -> None:
    from medunlearn.models import ModelArguments
    from medunlearn.unlearn.run import FinetuneArguments, default_sft_config, run_finetune

    model_args = ModelArguments(**job.model)
    out = folder / "model"
    sft_config = default_sft_config(model_args, out)
    sft_config.disable_tqdm = True
    for name, value in job.finetune["sft"].items():
        setattr(sft_config, name, value)
    arguments = FinetuneArguments(
        job.data_dir, str(out), job.finetune["notes_epochs"], job.finetune["qa_epochs"]
    )
    run_finetune(arguments, model_args, sft_config)


def _unlearn(job: Job, folder: Path) -> str:
    from medunlearn.unlearn.run import UnlearningDataArguments, make_method_config, run_unlearning

    out = folder / "model"
    config = make_method_config(job.method, out, **job.fields)
    run_unlearning(
        config, _model_arguments(job, FINETUNED), UnlearningDataArguments(job.data_dir, job.forget)
    )
    return str(out)


def _evaluate(job: Job, folder: Path, model: str) -> None:
    from medunlearn.evaluation.pipeline import evaluate_unlearning
    from medunlearn.evaluation.populations import PopulationConfig
    from medunlearn.evaluation.runner import RunnerConfig

    settings = job.evaluation
    summary = evaluate_unlearning(
        model,
        job.data_dir,
        job.forget,
        folder / "eval",
        before=FINETUNED,
        before_outputs=job.before_outputs,
        name=job.name,
        runner_config=RunnerConfig(**settings["runner"], progress=False),
        population_config=PopulationConfig(**settings["populations"]),
        embedding_similarity=settings["embedding_similarity"],
    )
    if not summary:
        raise RuntimeError(f"{job.name}: the evaluation did not complete")  # a bug: every batch is asked for


def _attack(job: Job, folder: Path) -> None:
    """``run_attacks`` on the cell's unlearned model (the fine-tuned model as the before model), into the
    stage folder, writing the robustness section into the model's card."""
    from medunlearn.attacks.relearning import RelearnConfig
    from medunlearn.attacks.run import AttackArguments, run_attacks
    from medunlearn.evaluation.runner import RunnerConfig

    settings = job.attacks
    extra = {}
    if "relearn" in settings:
        extra["relearn"] = RelearnConfig(**settings["relearn"])
    if "quantizations" in settings:
        extra["quantizations"] = tuple(settings["quantizations"])
    run_attacks(
        AttackArguments(
            models=[job.model_dir],
            before=FINETUNED,
            data=job.data_dir,
            forget_config=job.forget,
            out_dir=str(folder),
            attacks=tuple(settings["attacks"]),
            names=[job.label],
            seed=settings["seed"],
            max_retain_patients=settings["max_retain_patients"],
            runner=RunnerConfig(**job.evaluation["runner"], progress=False),
            overwrite=True,  # the stage folder, just emptied by run_job
            write_card=True,
            **extra,
        )
    )


# ---------------------------------------------------------------------------------------------------------
# Executors: no scheduler of our own


def _process_pool(workers: int):
    """The ``processes`` executor: one pool of spawned workers for the whole study (torch is imported once
    per worker, not once per phase)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def _execute(
    jobs: list[Job], workers: int, executor, study_dir: Path, slurm: dict, on_done: Callable
) -> None:
    """Run ``jobs`` (independent of each other) with at most ``workers`` at once; ``on_done(job, record)``
    is called in this process as each finishes. The first failure is recorded and re-raised.

    ``executor``: a process pool (:func:`_process_pool`), ``"local"`` or ``"slurm"`` (submitit)."""
    if not jobs:
        return
    if not isinstance(executor, str):
        from concurrent.futures import as_completed

        futures = {executor.submit(run_job, job): job for job in jobs}
        for future in as_completed(futures):
            _finish(futures[future], future.result, on_done, lambda: [f.cancel() for f in futures])
        return
    import submitit

    folder = study_dir / "submitit"
    if executor == "local":
        from concurrent.futures import ThreadPoolExecutor, as_completed

        local = submitit.LocalExecutor(folder=folder)
        local.update_parameters(timeout_min=int(slurm.get("timeout_min", 24 * 60)))
        # submitit's local executor starts every job it is given at once: a thread per slot hands it one job
        # at a time and waits for it.
        with ThreadPoolExecutor(max_workers=workers) as slots:
            futures = {
                slots.submit(lambda job: local.submit(run_job, job).result(), job): job for job in jobs
            }
            for future in as_completed(futures):
                _finish(futures[future], future.result, on_done, lambda: slots.shutdown(cancel_futures=True))
        return
    cluster = submitit.AutoExecutor(folder=folder, cluster="slurm")
    cluster.update_parameters(slurm_array_parallelism=workers, **slurm)
    submitted = cluster.map_array(run_job, jobs)
    by_id = {id(s): job for s, job in zip(submitted, jobs)}
    for done in submitit.helpers.as_completed(submitted):
        _finish(
            by_id[id(done)], done.result, on_done, lambda: [s.cancel() for s in submitted if not s.done()]
        )


def _finish(job: Job, result: Callable, on_done: Callable, stop: Callable) -> None:
    try:
        record = result()
    except BaseException as error:  # recorded, then re-raised: never swallowed
        on_done(job, {"name": job.name, "failed": f"{type(error).__name__}: {error}"})
        stop()
        raise
    on_done(job, record)


# ---------------------------------------------------------------------------------------------------------
# The study


class StudyLog:
    """``study.json`` (written by this process only) and ``study.log``."""

    def __init__(self, study_dir: Path, study: StudyConfig, grid: Grid, run: dict):
        self.dir, self.path = study_dir, study_dir / "study.json"
        previous = json.loads(self.path.read_text()) if self.path.is_file() else {}
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
        write_json(self.path, self.state)

    def line(self, text: str) -> None:
        with (self.dir / "study.log").open("a") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} [{os.getpid()}] {text}\n")


def _study_json(study: StudyConfig) -> dict:
    return asdict(study)


def prepare_study(study: StudyConfig | str | Path, out: str | Path) -> tuple[StudyConfig, Path, Path, Grid]:
    """Parse and validate the study, build its data if needed; ``(study, study_dir, data_dir, grid)``."""
    if not isinstance(study, StudyConfig):
        study = load_study(study)
    study_dir = Path(out).resolve()
    marker = study_dir / "study.json"
    if study_dir.is_dir() and any(study_dir.iterdir()) and not marker.is_file():
        raise OutputExistsError(f"{study_dir} exists and is not a study folder (no study.json)")
    study_dir.mkdir(parents=True, exist_ok=True)
    if study.data.build is not None:
        data_dir = study_dir / "data"
        data_fp = data_fingerprint(study)
        if not _marker_matches(study_dir / "data.json", data_fp):
            validate_study(study, data_dir=Path("/nonexistent"))  # fail on the file before building
            from medunlearn.amnesia.build import build_amnesia

            build_amnesia(data_dir, overwrite=True, **study.data.build)
            write_json(study_dir / "data.json", {"fingerprint": data_fp, "build": study.data.build})
    else:
        data_dir = study.data_path()
    grid = validate_study(study, data_dir=data_dir)
    return study, study_dir, data_dir, grid


def _marker_matches(path: Path, fingerprint: str) -> bool:
    return path.is_file() and json.loads(path.read_text()).get("fingerprint") == fingerprint


def run_study(
    study: StudyConfig | str | Path,
    out: str | Path,
    *,
    jobs: int = 1,
    executor: str = "processes",
    threads: int = 1,
    methods: list[str] | None = None,
    forget: list[str] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Run (or resume) a study into ``out``; returns ``{"study_dir", "ran", "skipped", "results", ...}``.

    ``jobs``: stages at once; ``threads``: torch threads per stage (1: ``--jobs N`` on N cores; the numbers
    depend on it only through float rounding); ``methods`` / ``forget``: run only these labels / forget
    configs (the fingerprints do not change, so the full study later reuses them).
    """
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    if jobs < 1 or threads < 1:
        raise InputError("--jobs and --threads must be at least 1")
    if executor != "processes":
        import importlib.util

        if importlib.util.find_spec("submitit") is None:
            raise InputError(f"--executor {executor} needs submitit: pip install 'medunlearn[study]'")
        if executor == "slurm" and shutil.which("srun") is None:
            raise InputError(
                "--executor slurm needs a Slurm cluster (no `srun` on PATH); use processes or local"
            )
    import contextlib

    import torch

    log = log or (lambda text: None)
    study, study_dir, data_dir, grid = prepare_study(study, out)
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(_process_pool(jobs)) if executor == "processes" else executor
        return _run_grid(
            study,
            study_dir,
            data_dir,
            grid,
            pool,
            jobs,
            threads,
            methods,
            forget,
            log,
            executor,
            torch.get_num_threads(),
        )


def _run_grid(
    study, study_dir, data_dir, grid, pool, jobs, threads, methods, forget, log, executor, finetune_threads
) -> dict:
    grid = _subset(study, grid, methods, forget)
    run = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "jobs": jobs,
        "executor": executor,
        "threads": threads,
        "ran": [],
        "skipped": [],
        "failed": [],
    }
    book = StudyLog(study_dir, study, grid, run)
    base = {"study_dir": str(study_dir), "data_dir": str(data_dir), "model": study.model, "threads": threads}
    evaluation = asdict(study.evaluation)
    if evaluation["runner"].get("engine") == "vllm":
        # Stages run inside the study folder: the vLLM Python is found from here, once.
        from medunlearn.llm.server import default_vllm_python, default_vllm_venv

        python = evaluation["runner"].get("vllm_python") or default_vllm_python()
        python = Path(python) if python else default_vllm_venv() / "bin" / "python"
        evaluation["runner"]["vllm_python"] = str(python.resolve())
    started = time.perf_counter()

    def on_done(job: Job, record: dict) -> None:
        failed = "failed" in record
        run["failed" if failed else "ran"].append(job.name)
        book.status(
            job.name,
            {
                "kind": job.kind,
                "status": "failed" if failed else "done",
                **record,
                "fingerprint": job.fingerprint,
            },
        )
        book.line(
            f"{'failed' if failed else 'ran'} {job.kind} {job.name} {job.fingerprint}"
            + (f": {record['failed']}" if failed else f" in {record['seconds']} s")
        )
        log(
            f"  {'FAILED' if failed else 'done'} {job.name}"
            + (f": {record['failed']}" if failed else f" ({record['seconds']:.1f} s)")
        )

    def phase(title: str, candidates: list[Job], workers: int) -> None:
        todo = []
        for job in candidates:
            if stage_done(study_dir, job.folder, job.fingerprint):
                run["skipped"].append(job.name)
                book.line(f"skipped {job.kind} {job.name} {job.fingerprint} (finished)")
                book.state["status"][job.name] = {
                    "kind": job.kind,
                    "status": "done",
                    "fingerprint": job.fingerprint,
                    **json.loads((study_dir / job.folder / DONE).read_text()),
                }
            else:
                todo.append(job)
                book.state["status"][job.name] = {
                    "kind": job.kind,
                    "status": "pending",
                    "fingerprint": job.fingerprint,
                }
        book.save()
        log(f"{title}: {len(todo)} to run, {len(candidates) - len(todo)} finished before")
        _execute(todo, workers, pool, study_dir, study.slurm, on_done)

    finetune = Job(
        "finetune",
        "finetune",
        "finetune",
        fingerprint=grid.finetune_fingerprint,
        finetune=asdict(study.finetune),
        **{**base, "threads": finetune_threads},
    )
    phase("fine-tune", [finetune], 1)
    phase(
        "baselines (the fine-tuned model per forget config)",
        [
            Job(
                "baseline",
                b.name,
                b.folder,
                fingerprint=b.fingerprint,
                forget=b.forget,
                before_outputs=b.before_outputs,
                evaluation=evaluation,
                **base,
            )
            for b in grid.baselines
        ],
        jobs,
    )
    from medunlearn.study.grid import cell_fields

    phase(
        "cells",
        [
            Job(
                "cell",
                c.name,
                c.folder,
                fingerprint=c.fingerprint,
                forget=c.forget,
                method=c.method,
                fields=cell_fields(c.fields, c.seed),
                before_outputs=f"baseline/{c.forget}/before_outputs",
                evaluation=evaluation,
                **base,
            )
            for c in grid.cells
        ],
        jobs,
    )
    if study.attacks is not None:
        settings = attack_settings(study)
        phase(
            "attacks (one attack stage per cell)",
            [
                Job(
                    "attack",
                    c.attack_name,
                    c.attack_folder,
                    fingerprint=c.attack_fingerprint,
                    forget=c.forget,
                    evaluation=evaluation,
                    attacks=settings,
                    model_dir=f"{c.folder}/model",
                    label=c.name,
                    **base,
                )
                for c in grid.cells
            ],
            jobs,
        )
    run["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    run["seconds"] = round(time.perf_counter() - started, 1)
    book.save()
    results = collect_results(study_dir)
    book.line(f"finished: ran {len(run['ran'])}, skipped {len(run['skipped'])} in {run['seconds']} s")
    return {
        "study_dir": str(study_dir),
        "ran": run["ran"],
        "skipped": run["skipped"],
        "failed": run["failed"],
        "seconds": run["seconds"],
        "results": results,
    }


def _subset(study: StudyConfig, grid: Grid, methods: list[str] | None, forget: list[str] | None) -> Grid:
    labels = [m.label for m in study.methods]
    for name in methods or []:
        if name not in labels:
            raise InputError(
                f"--methods: {name!r} is not a method label of {study.source} ({', '.join(labels)})"
            )
    for name in forget or []:
        if name not in study.forget:
            raise InputError(f"--forget: {name!r} is not a forget config of {study.source}")
    grid.cells = [
        c for c in grid.cells if (not methods or c.label in methods) and (not forget or c.forget in forget)
    ]
    grid.baselines = [b for b in grid.baselines if not forget or b.forget in forget]
    return grid
