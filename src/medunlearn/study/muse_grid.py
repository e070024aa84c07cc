"""The grid of a MUSE protocol study: two fine-tunes (the target and the retain model), their evaluations, and
one cell per (method, fold, seed), each with a fingerprint of everything that determines its result.

Fingerprints chain: data → fine-tune (model, fine-tune settings, role) → the retain model's evaluation (the
evaluation settings; its privleak outputs normalise every other evaluation's PrivLeak, so they are computed
once) → the target's evaluation and the cells (method, resolved config, fold, seed, evaluation settings). A
scalability cell starts from the target model. A sustainability cell of request k starts from the model of
request k - 1 (same method and seed), and its fingerprint holds that cell's: a changed request reruns every
later one, a finished chain is never redone (docs/study.md, "MUSE protocols").

The study's resolved precision (:func:`medunlearn.study.grid.study_precision`) enters the fine-tunes', the
evaluation settings' and (as the config's ``bf16``) the cells' fingerprints only when it is ``bfloat16``:
float32 studies keep the fingerprints of earlier versions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from medunlearn.study.config import StudyConfig
from medunlearn.study.grid import (
    SERVER_LOCATION,
    _check_sft_fields,
    _resolve,
    check_subset_names,
    data_fingerprint,
    fingerprint,
    precision_fields,
    study_precision,
)
from medunlearn.study.muse_config import PROTOCOLS, muse_conventions
from medunlearn.study.stages import FINETUNED

TARGET_MODEL = FINETUNED  # the target model, inside the study folder
RETAIN_MODEL = "retain/model"
ROLES = ("target", "retain")  # the fine-tunes; their folders: finetune/ and retain/
TARGET_BASELINE, RETAIN_BASELINE = "finetuned", "retain"  # the two evaluations' names (baseline/<name>/)
# The retain model's privleak outputs, written by its own evaluation and read by every other one.
RETAIN_PRIVLEAK = f"baseline/{RETAIN_BASELINE}/eval/outputs/retain-privleak"


@dataclass
class MuseBaseline:
    """The evaluation of the target (``finetuned``: before unlearning) or of the retain model (``retain``)."""

    name: str
    fingerprint: str

    @property
    def folder(self) -> str:
        return f"baseline/{self.name}"

    @property
    def model_dir(self) -> str:
        return RETAIN_MODEL if self.name == RETAIN_BASELINE else TARGET_MODEL


@dataclass
class MuseCell:
    """One (method, fold, seed): unlearn ``<fold_set>/<fold>`` from ``start_model``, then evaluate."""

    label: str
    method: str  # the method-table stem
    fold: str  # forget_1 … forget_4
    seed: int
    fold_set: str  # scal or sust
    request: int | None = None  # sustainability: 1, 2, … (fold k is request k)
    fields: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)  # the resolved method config (fingerprinted)
    fingerprint: str = ""
    start_model: str = TARGET_MODEL  # inside the study folder
    previous: str | None = None  # sustainability: the cell whose model this one starts from
    fold_documents: int | None = None  # rows of the fold (None until the data exists)

    @property
    def name(self) -> str:
        return f"{self.label}-{self.fold}-s{self.seed}"

    @property
    def folder(self) -> str:
        return f"cells/{self.name}"

    @property
    def corpus(self) -> str:
        """The forget corpus ``run_unlearning`` reads (``UnlearningDataArguments.forget``)."""
        return f"{self.fold_set}/{self.fold}"


@dataclass
class MuseGrid:
    protocol: str
    data_fingerprint: str
    finetune_fingerprints: dict[str, str]
    baselines: list[MuseBaseline]
    cells: list[MuseCell]

    def to_json(self) -> dict:
        cells = []
        for c in self.cells:
            entry = {k: v for k, v in asdict(c).items() if k != "config"}
            cells.append({"name": c.name, "forget": c.corpus, **entry})
        return {
            "benchmark": "muse",
            "protocol": self.protocol,
            "data_fingerprint": self.data_fingerprint,
            "finetune_fingerprint": self.finetune_fingerprints["target"],
            "finetune_fingerprints": self.finetune_fingerprints,
            "baselines": [{"name": b.name, "fingerprint": b.fingerprint} for b in self.baselines],
            "cells": cells,
        }


def muse_evaluation_settings(study: StudyConfig, dtype: str | None = None) -> dict:
    """What an evaluation stage's fingerprint covers: the runner settings (not where a server runs; the
    resolved ``dtype``, default :func:`~medunlearn.study.grid.study_precision`, when it is bfloat16) and the
    *resolved* MUSE conventions (a changed default in the code reruns the evaluations)."""
    evaluation = asdict(study.evaluation)
    runner = {k: v for k, v in evaluation["runner"].items() if k not in SERVER_LOCATION}
    runner.update(precision_fields(study_precision(study).dtype if dtype is None else dtype))
    return {"runner": runner, "conventions": muse_conventions(evaluation).to_dict()}


def build_muse_grid(
    study: StudyConfig, data_fp: str, fold_documents: dict[str, int] | None = None
) -> MuseGrid:
    """Every stage of a MUSE study with its fingerprint (resolves each method config: imports the trainers);
    ``fold_documents``: rows per fold, when the data is there."""
    from medunlearn.unlearn.methods import resolve_method

    dtype = study_precision(study).dtype
    evaluation = muse_evaluation_settings(study, dtype)
    finetune = {"data": data_fp, "model": study.model, "finetune": asdict(study.finetune)}
    finetunes = {role: fingerprint({**finetune, "role": role, **precision_fields(dtype)}) for role in ROLES}
    retain = MuseBaseline(
        RETAIN_BASELINE, fingerprint({"model": finetunes["retain"], "evaluation": evaluation})
    )
    target = MuseBaseline(
        TARGET_BASELINE,
        fingerprint({"model": finetunes["target"], "retain": retain.fingerprint, "evaluation": evaluation}),
    )
    sequential = study.protocol == "sustainability"
    cells = []
    for entry in study.methods:
        stem = resolve_method(entry.method).stem
        for seed in study.seeds:
            config = _resolve(study, entry, seed, dtype)
            start, start_fp, previous = TARGET_MODEL, finetunes["target"], None
            for request, fold in enumerate(study.forget, start=1):
                cell = MuseCell(
                    entry.label, stem, fold, seed, PROTOCOLS[study.protocol], fields=dict(entry.fields)
                )
                cell.config, cell.start_model, cell.previous = config, start, previous
                cell.request = request if sequential else None
                cell.fold_documents = (fold_documents or {}).get(fold)
                cell.fingerprint = fingerprint(
                    {
                        "start": start_fp,
                        "retain": retain.fingerprint,
                        "method": stem,
                        "config": config,
                        "forget": cell.corpus,
                        "seed": seed,
                        "evaluation": evaluation,
                    }
                )
                cells.append(cell)
                if sequential:  # the next request starts from this one's model
                    start, start_fp, previous = f"{cell.folder}/model", cell.fingerprint, cell.name
    return MuseGrid(study.protocol, data_fp, finetunes, [retain, target], cells)


def validate_muse_study(study: StudyConfig, data_dir: Path | None = None) -> MuseGrid | None:
    """Check what the file's shape cannot tell: every method (and that it trains on raw text) and its fields,
    the ``sft`` fields, and, when the data folder exists, that it is a MUSE-format folder with the protocol's
    folds and a ``train`` config. Returns the grid when the data fingerprint can be computed."""
    from medunlearn.errors import MedunlearnError, MissingInputError
    from medunlearn.unlearn.methods import resolve_method

    for entry in study.methods:
        try:
            _, trainer_class = resolve_method(entry.method).load()
        except MedunlearnError as error:
            raise study.error(f"methods.{entry.label}.method", str(error)) from None
        if not getattr(trainer_class, "supports_text", True):
            raise study.error(f"methods.{entry.label}.method", f"{entry.method} does not train on raw text")
    _check_sft_fields(study)
    folder = data_dir if data_dir is not None else study.data_path()
    documents = None
    if folder is not None and (folder / "README.md").is_file():
        documents = _fold_documents(study, folder)
    elif study.data.path is not None:
        raise MissingInputError(f"{study.source}: key 'data.path': {folder} is not a MUSE-format folder")
    if folder is not None and not folder.is_dir():
        return None
    return build_muse_grid(study, data_fingerprint(study), documents)


def _fold_documents(study: StudyConfig, folder: Path) -> dict[str, int]:
    """Rows per fold of the protocol's config; a folder without the folds or ``train`` is named by key."""
    from medunlearn.errors import MedunlearnError
    from medunlearn.muse.data import load_muse_split, open_muse_folder

    key = "data.path" if study.data.path is not None else "data.build"
    try:
        muse = open_muse_folder(folder)
    except MedunlearnError as error:
        raise study.error(key, str(error)) from None
    fold_set = PROTOCOLS[study.protocol]
    for config in (fold_set, "train"):
        if not muse.splits(config):
            raise study.error(key, f"{folder} has no config {config!r}, which a {study.protocol} study needs")
    return {fold: len(load_muse_split(muse, fold_set, fold)) for fold in study.forget}


def subset_muse_grid(study: StudyConfig, grid: MuseGrid, methods: list[str] | None, forget: list[str] | None):
    """The grid restricted to ``--methods`` labels and ``--forget`` folds; under sustainability a fold's
    earlier requests must be run too (each starts from the one before)."""
    from medunlearn.errors import InputError

    check_subset_names(study, methods, forget, "fold")
    if forget and study.protocol == "sustainability":
        wanted = study.forget[: max(study.forget.index(name) for name in forget) + 1]
        if set(forget) != set(wanted):
            raise InputError(
                f"--forget: a sustainability request starts from the one before; run {', '.join(wanted)}"
            )
    grid.cells = [
        c for c in grid.cells if (not methods or c.label in methods) and (not forget or c.fold in forget)
    ]
    return grid


__all__ = [
    "RETAIN_MODEL",
    "RETAIN_PRIVLEAK",
    "TARGET_MODEL",
    "MuseBaseline",
    "MuseCell",
    "MuseGrid",
    "build_muse_grid",
    "muse_evaluation_settings",
    "subset_muse_grid",
    "validate_muse_study",
]
