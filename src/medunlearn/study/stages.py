"""The study's stages: one small job class per stage kind, each with its own ``run(folder)``.

A job is everything one stage needs, picklable: it is sent to a worker process, a submitit job or a Slurm
node, where :func:`run_job` runs it from scratch in its folder and writes its marker
(:mod:`medunlearn.utils.stage_marker`) last. Jobs name models by their path inside the study folder (they
``chdir`` into it), so a study folder can be moved or copied and still resumes (docs/study.md). Every job
that trains or evaluates computes in the study's resolved precision (``StudyContext.dtype``), passed as the
single commands pass ``--dtype``: to ``default_sft_config`` and the method config for training, as
``RunnerConfig.dtype`` for evaluation.

=========== ======================================================== ==============================
kind        what it does                                             folder
=========== ======================================================== ==============================
finetune    notes pretraining, then QA SFT of the study's model      ``finetune/``
baseline    evaluates the fine-tuned model on one forget config      ``baseline/<forget>/``
cell        unlearns one (method, forget config, seed), evaluates it ``cells/<cell>/``
attack      runs the attacks on one cell's unlearned model           ``cells/<cell>/attacks/``
=========== ======================================================== ==============================
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from medunlearn.utils.stage_marker import mark_done

StageKind = Literal["finetune", "baseline", "cell", "attack"]
FINETUNED = "finetune/model"  # the fine-tuned model, inside the study folder


@dataclass(frozen=True)
class StudyContext:
    """What every stage of one study shares."""

    study_dir: str
    data_dir: str
    model: dict[str, Any]  # ModelArguments fields of the study
    evaluation: dict[str, Any]  # the study's evaluation settings (runner, populations, ...), resolved
    threads: int | None = 1  # torch threads per stage (None: leave torch's default)
    dtype: str = "float32"  # every stage's precision: the study's dtype resolved (grid.study_precision)


@dataclass
class Job:
    """One stage of the study: its name (in ``study.json`` and ``study.log``), its folder inside the study
    folder, the fingerprint its marker must hold, and the study's shared context."""

    kind: ClassVar[StageKind]
    name: str
    folder: str
    fingerprint: str
    context: StudyContext

    def run(self, folder: Path) -> None:
        """Do the stage's work in ``folder`` (empty, the current directory being the study folder)."""
        raise NotImplementedError


@dataclass
class FinetuneJob(Job):
    kind: ClassVar[StageKind] = "finetune"
    finetune: dict[str, Any] = field(default_factory=dict)  # FinetuneSpec fields

    def run(self, folder: Path) -> None:
        from medunlearn.models import ModelArguments
        from medunlearn.unlearn.run import FinetuneArguments, run_finetune

        model_args = ModelArguments(**self.context.model)
        out = folder / "model"
        sft_config = study_sft_config(model_args, out, self.finetune["sft"], self.context.dtype)
        arguments = FinetuneArguments(
            self.context.data_dir, str(out), self.finetune["notes_epochs"], self.finetune["qa_epochs"]
        )
        run_finetune(arguments, model_args, sft_config)


@dataclass
class BaselineJob(Job):
    """The fine-tuned model's evaluation on one forget config ("no unlearning"); it also writes the
    before-model outputs every cell of that forget config reads."""

    kind: ClassVar[StageKind] = "baseline"
    forget: str = ""
    before_outputs: str = ""

    def run(self, folder: Path) -> None:
        evaluate_stage_model(self, folder, FINETUNED, self.forget, self.before_outputs)


@dataclass
class CellJob(Job):
    kind: ClassVar[StageKind] = "cell"
    forget: str = ""
    before_outputs: str = ""  # the baseline's, shared by every cell of the forget config
    method: str = ""  # the method-table stem
    fields: dict[str, Any] = field(default_factory=dict)  # make_method_config fields, the seed included

    def run(self, folder: Path) -> None:
        from medunlearn.unlearn.run import UnlearningDataArguments, make_method_config, run_unlearning

        out = folder / "model"
        config = make_method_config(self.method, out, dtype=self.context.dtype, **self.fields)
        run_unlearning(
            config,
            finetuned_model_arguments(self.context.model),
            UnlearningDataArguments(self.context.data_dir, self.forget),
        )
        evaluate_stage_model(self, folder, str(out), self.forget, self.before_outputs)


@dataclass
class AttackJob(Job):
    """``run_attacks`` on a cell's unlearned model (the fine-tuned model as the before model), into the stage
    folder, writing the robustness section into the model's card."""

    kind: ClassVar[StageKind] = "attack"
    forget: str = ""
    attacks: dict[str, Any] = field(default_factory=dict)  # grid.attack_settings
    model_dir: str = ""  # the attacked model
    label: str = ""  # the method's display name in the attack folder

    def run(self, folder: Path) -> None:
        from medunlearn.attacks.relearning import RelearnConfig
        from medunlearn.attacks.run import AttackArguments, run_attacks

        settings = self.attacks
        extra = {}
        if "relearn" in settings:
            extra["relearn"] = RelearnConfig(**settings["relearn"])
        if "quantizations" in settings:
            extra["quantizations"] = tuple(settings["quantizations"])
        run_attacks(
            AttackArguments(
                models=[self.model_dir],
                before=FINETUNED,
                data=self.context.data_dir,
                forget_config=self.forget,
                out_dir=str(folder),
                attacks=tuple(settings["attacks"]),
                names=[self.label],
                seed=settings["seed"],
                max_retain_patients=settings["max_retain_patients"],
                runner=stage_runner_config(self.context),  # its relearning trains in its dtype too
                overwrite=True,  # the stage folder, just emptied by run_job
                write_card=True,
                **extra,
            )
        )


def study_sft_config(model_args, out: Path, fields: dict[str, Any], dtype: str = "float32"):
    """The ``SFTConfig`` of a study's fine-tune: the defaults of ``medunlearn finetune --dtype DTYPE`` (bf16
    autocast over float32 weights for ``bfloat16``) < the file's ``sft`` fields, without progress bars.
    ``dtype`` is the study's, already resolved (a parity preset's float32 pin included)."""
    from medunlearn.unlearn.run import default_sft_config

    sft_config = default_sft_config(model_args, out, dtype=dtype)
    sft_config.disable_tqdm = True
    for name, value in fields.items():
        setattr(sft_config, name, value)
    return sft_config


def finetuned_model_arguments(model: dict[str, Any], path: str = FINETUNED):
    """The study's model options applied to the fine-tuned model at ``path`` (it has its own tokenizer)."""
    from medunlearn.models import ModelArguments

    options = {k: v for k, v in model.items() if k not in ("model_name_or_path", "tiny_vocab_size")}
    return ModelArguments(path, **options)


def stage_runner_config(context: StudyContext):
    """The ``RunnerConfig`` of a stage's evaluations: the study's runner settings, in its resolved dtype
    (``RunnerConfig.dtype``, as ``medunlearn evaluate --dtype`` sets it), without progress bars."""
    from medunlearn.evaluation.runner import RunnerConfig

    return RunnerConfig(**context.evaluation["runner"], dtype=context.dtype, progress=False)


def evaluate_stage_model(job: Job, folder: Path, model: str, forget: str, before_outputs: str) -> None:
    """Evaluate ``model`` on ``forget`` into ``folder/eval``, the fine-tuned model as ``before``."""
    from medunlearn.evaluation.pipeline import evaluate_unlearning
    from medunlearn.evaluation.populations import PopulationConfig

    settings = job.context.evaluation
    summary = evaluate_unlearning(
        model,
        job.context.data_dir,
        forget,
        folder / "eval",
        before=FINETUNED,
        before_outputs=before_outputs,
        name=job.name,
        runner_config=stage_runner_config(job.context),
        population_config=PopulationConfig(**settings["populations"]),
        embedding_similarity=settings["embedding_similarity"],
    )
    if not summary:
        raise RuntimeError(f"{job.name}: the evaluation did not complete")  # a bug: every batch is asked for


def run_job(job: Job) -> dict:
    """Run one stage from scratch in its folder and mark it done; returns its marker's record.

    Runs in a worker process, a submitit job or a Slurm task: it ``chdir``s into the study folder. Whatever
    the folder held (a killed run's leftovers, a changed setting's outputs) is removed first; the marker is
    written last, so a stage killed mid-way is never taken for finished."""
    import torch

    os.chdir(job.context.study_dir)
    if job.context.threads is not None:
        torch.set_num_threads(job.context.threads)  # --jobs N on N cores: one thread each
    started = time.perf_counter()
    folder = Path(job.folder)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    job.run(folder)
    record = {
        "name": job.name,
        "kind": job.kind,
        "fingerprint": job.fingerprint,
        "seconds": round(time.perf_counter() - started, 2),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "pid": os.getpid(),
        # Not fingerprinted, but the numbers depend on it through float rounding: results rows carry it.
        "threads": torch.get_num_threads(),
    }
    mark_done(folder, job.fingerprint, record)
    return record


__all__ = [
    "FINETUNED",
    "AttackJob",
    "BaselineJob",
    "CellJob",
    "FinetuneJob",
    "Job",
    "StageKind",
    "StudyContext",
    "run_job",
]
