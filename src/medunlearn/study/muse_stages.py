"""The stages of a MUSE protocol study, one small job class per stage kind (as :mod:`medunlearn.study.stages`,
whose ``run_job`` runs them: from scratch in their folder, marker last), and the phases they run in.

=========== ================================================================ ============================
kind        what it does                                                     folder
=========== ================================================================ ============================
finetune    the target model (``train``: forget, retain1, retain2) or the    ``finetune/``, ``retain/``
            retain model (retain1, retain2), from the study's model
baseline    evaluates the retain model (its privleak outputs are every       ``baseline/retain/``,
            other evaluation's PrivLeak reference), or the target model      ``baseline/finetuned/``
cell        unlearns one fold from its start model, then evaluates it        ``cells/<cell>/``
=========== ================================================================ ============================

Phases: the two fine-tunes (one phase each, with every core), the retain model's evaluation, then the target's
evaluation with every scalability cell (all independent), or with sustainability's first requests; each later
request is a phase of its own, since request k starts from request k - 1's model (docs/study.md, "MUSE
protocols").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from medunlearn.study.config import StudyConfig
from medunlearn.study.grid import cell_fields
from medunlearn.study.muse_config import muse_conventions
from medunlearn.study.muse_grid import (
    RETAIN_BASELINE,
    RETAIN_MODEL,
    RETAIN_PRIVLEAK,
    TARGET_BASELINE,
    TARGET_MODEL,
    MuseGrid,
)
from medunlearn.study.run import Phase
from medunlearn.study.stages import (
    Job,
    StageKind,
    StudyContext,
    finetuned_model_arguments,
    stage_runner_config,
    study_sft_config,
)

# role -> (stage name, folder) of the two fine-tunes.
FINETUNE_STAGES = {"target": ("finetune", "finetune"), "retain": ("finetune-retain", "retain")}


@dataclass
class MuseFinetuneJob(Job):
    """:func:`medunlearn.muse.finetune.run_muse_finetune` of the study's model for ``role``."""

    kind: ClassVar[StageKind] = "finetune"
    role: str = "target"
    finetune: dict[str, Any] = field(default_factory=dict)  # MuseFinetuneSpec fields

    def run(self, folder: Path) -> None:
        from medunlearn.models import ModelArguments
        from medunlearn.muse.finetune import MuseFinetuneArguments, run_muse_finetune

        model_args = ModelArguments(**self.context.model)
        out = folder / "model"
        arguments = MuseFinetuneArguments(self.context.data_dir, str(out), self.role, self.finetune["epochs"])
        sft_config = study_sft_config(model_args, out, self.finetune["sft"], self.context.dtype)
        run_muse_finetune(arguments, model_args, sft_config)


@dataclass
class MuseEvaluationJob(Job):
    """The MUSE evaluation of the target or the retain model (``retain_outputs``: ``None`` for the retain
    model's own, which writes the privleak outputs the others read)."""

    kind: ClassVar[StageKind] = "baseline"
    model_dir: str = ""
    retain_outputs: str | None = RETAIN_PRIVLEAK

    def run(self, folder: Path) -> None:
        evaluate_muse_stage(self, folder, self.model_dir, self.retain_outputs)


@dataclass
class MuseCellJob(Job):
    """Unlearn ``forget`` (``scal/forget_k`` or ``sust/forget_k``) from ``start_model``, then evaluate."""

    kind: ClassVar[StageKind] = "cell"
    forget: str = ""
    start_model: str = TARGET_MODEL  # the target, or (sustainability) the previous request's model
    method: str = ""  # the method-table stem
    fields: dict[str, Any] = field(default_factory=dict)  # make_method_config fields, the seed included

    def run(self, folder: Path) -> None:
        from medunlearn.unlearn.run import UnlearningDataArguments, make_method_config, run_unlearning

        out = folder / "model"
        config = make_method_config(
            self.method, out, benchmark="muse", dtype=self.context.dtype, **self.fields
        )
        run_unlearning(
            config,
            finetuned_model_arguments(self.context.model, self.start_model),
            UnlearningDataArguments(self.context.data_dir, self.forget, benchmark="muse"),
        )
        evaluate_muse_stage(self, folder, str(out), RETAIN_PRIVLEAK)


def evaluate_muse_stage(job: Job, folder: Path, model: str, retain_outputs: str | None) -> None:
    """:func:`medunlearn.muse.evaluate.evaluate_muse` of ``model`` into ``folder/eval``, the retain model
    normalising PrivLeak."""
    from medunlearn.muse.evaluate import evaluate_muse

    settings = job.context.evaluation
    summary = evaluate_muse(
        model,
        job.context.data_dir,
        folder / "eval",
        retain_model=RETAIN_MODEL,
        retain_outputs=retain_outputs,
        conventions=muse_conventions(settings),
        runner_config=stage_runner_config(job.context),
    )
    if not summary:
        raise RuntimeError(f"{job.name}: the evaluation did not complete")  # a bug: every batch is asked for


def plan_muse_phases(
    study: StudyConfig, grid: MuseGrid, context: StudyContext, workers: int, finetune_threads: int
) -> list[Phase]:
    """The MUSE study's phases in order (module docstring)."""
    finetunes = [
        MuseFinetuneJob(
            *FINETUNE_STAGES[role],
            grid.finetune_fingerprints[role],
            replace(context, threads=finetune_threads),
            role=role,
            finetune=asdict(study.finetune),
        )
        for role in ("target", "retain")
    ]
    baselines = {b.name: b for b in grid.baselines}
    retain, target = baselines[RETAIN_BASELINE], baselines[TARGET_BASELINE]
    retain_job = MuseEvaluationJob(
        retain.name, retain.folder, retain.fingerprint, context, model_dir=RETAIN_MODEL, retain_outputs=None
    )
    target_job = MuseEvaluationJob(
        target.name, target.folder, target.fingerprint, context, model_dir=TARGET_MODEL
    )
    cells = [
        MuseCellJob(
            c.name,
            c.folder,
            c.fingerprint,
            context,
            forget=c.corpus,
            start_model=c.start_model,
            method=c.method,
            fields=cell_fields(c.fields, c.seed),
        )
        for c in grid.cells
    ]
    # One fine-tune per phase: each takes every core (a process pool would run two at once, each with every
    # core, and their threads would fight).
    phases = [
        Phase("fine-tune: the target model (train: forget, retain1, retain2)", finetunes[:1], 1),
        Phase("fine-tune: the retain model (retain1, retain2)", finetunes[1:], 1),
        Phase("the retain model's evaluation (the PrivLeak reference)", [retain_job], 1),
    ]
    if study.protocol == "scalability":
        return [
            *phases,
            Phase("the target's evaluation and every fold's cells", [target_job, *cells], workers),
        ]
    requests = sorted({c.request for c in grid.cells}) or [1]
    for request in requests:
        jobs = [job for job, c in zip(cells, grid.cells) if c.request == request]
        first = [target_job] if request == requests[0] else []
        phases.append(Phase(f"request {request} (sust/{study.forget[request - 1]})", first + jobs, workers))
    return phases


__all__ = [
    "FINETUNE_STAGES",
    "MuseCellJob",
    "MuseEvaluationJob",
    "MuseFinetuneJob",
    "evaluate_muse_stage",
    "plan_muse_phases",
]
