"""The study's grid: the fine-tune stage, one baseline evaluation per forget config, and the cells
(method × forget config × seed), each with a fingerprint of everything that determines its result.

Fingerprints chain: data → fine-tune (model arguments, fine-tune settings) → baseline (forget config,
evaluation settings) and cell (method and its *resolved* config — paper defaults included, so a changed
default reruns the cells it affects — forget config, seed, evaluation settings). A stage whose stored
fingerprint matches is skipped; any other is run again from scratch. With an ``attacks:`` mapping each cell
also has an attack stage: cell fingerprint → attack settings (changing them reruns only the attack stages;
without the mapping there is no attack stage and no fingerprint changes).

Precision: the study's ``dtype`` (``auto``, ``float32``, ``bfloat16``) is resolved once, for the device the
stages run on (:func:`study_precision`), and every stage computes in that resolved dtype. It enters the
fingerprints only when it is ``bfloat16`` (the fine-tune's, the evaluation settings' runner, and through the
cell's resolved config, its ``bf16``), so a float32 study, ``auto`` on a CPU without fast native bf16
included, keeps the fingerprints of earlier versions and its finished stages are reused.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from medunlearn.config_names import SplitName, folder_configs, is_forget_config
from medunlearn.study.config import StudyConfig

# Config fields that change how a run is shown or where it is written, never its result.
PRESENTATION_FIELDS = re.compile(
    r"^(output_dir|logging_dir|logging_.*|log_.*|disable_tqdm|run_name|report_to|push_to_hub|hub_.*|"
    r"save_.*|overwrite_output_dir|dataloader_num_workers|dataloader_persistent_workers|project|trackio_.*)$"
)

# Evaluation during unlearning (medunlearn.unlearn.probe): results only when eval_probe_steps is set.
PROBE_FIELDS = re.compile(r"^(eval_probe_steps|probe_.*|max_retain_mu_drop)$")


def fingerprint(value: Any) -> str:
    """The first 16 hex digits of the SHA-256 of ``value`` as canonical JSON."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def folder_fingerprint(folder: Path) -> str:
    """SHA-256 over the relative paths and bytes of every file under ``folder`` (an AMNESIA folder)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def data_fingerprint(study: StudyConfig) -> str:
    """Built data: the build options (the build is seeded and deterministic); a folder: its contents."""
    if study.data.build is not None:
        from medunlearn import __version__

        return fingerprint({"build": study.data.build, "medunlearn": __version__})
    return folder_fingerprint(study.data_path())


def study_precision(study: StudyConfig):
    """The study's ``dtype`` resolved for the device its stages run on (CUDA when this machine has it), by
    the rule of ``--dtype`` (:func:`medunlearn.utils.precision.resolve_precision`, as ``medunlearn evaluate``
    resolves it): under a parity preset (a MUSE study's ``evaluation.preset: open-unlearning``) ``auto`` stays
    float32 on a CPU. Returns a :class:`~medunlearn.utils.precision.Precision` (``.dtype``, ``.reason``).

    Stages receive the resolved dtype, never ``auto``: what they compute in is what the fingerprints say,
    wherever they run (under ``--executor slurm``, ``auto`` is resolved on the machine that runs the study
    command; give ``bfloat16`` to train and evaluate in bf16 on a cluster's GPUs from a login node)."""
    from medunlearn.chat import preset
    from medunlearn.unlearn.reference_recipe import is_reference_preset
    from medunlearn.utils.precision import default_device, resolve_precision

    parity = None
    if study.benchmark == "muse" and is_reference_preset(preset(study.evaluation.preset)):
        parity = study.evaluation.preset
    return resolve_precision(study.dtype, default_device(), parity)


def precision_fields(dtype: str) -> dict:
    """What a fingerprint holds about the resolved ``dtype``: ``{"dtype": "bfloat16"}``, or nothing for
    float32 (the fingerprints of earlier versions, which ran float32)."""
    return {"dtype": dtype} if dtype == "bfloat16" else {}


def finetune_fingerprint(study: StudyConfig, data_fp: str, dtype: str = "float32") -> str:
    return fingerprint(
        {"data": data_fp, "model": study.model, "finetune": asdict(study.finetune), **precision_fields(dtype)}
    )


# Runner fields that say where a vLLM server runs, not what it computes (the engine itself is fingerprinted):
# a study resumed against another server or interpreter keeps its finished stages.
SERVER_LOCATION = ("vllm_url", "vllm_model", "vllm_python", "vllm_args")


def evaluation_settings(study: StudyConfig, dtype: str | None = None) -> dict:
    """The evaluation settings a stage's fingerprint covers; ``dtype``: the resolved precision (default
    :func:`study_precision`), in the runner's settings when it is bfloat16."""
    settings = asdict(study.evaluation)
    settings["runner"] = {k: v for k, v in settings["runner"].items() if k not in SERVER_LOCATION}
    if settings["runner"].get("engine") == "hf":
        del settings["runner"]["engine"]  # the default, named or not: the fingerprints of earlier studies
    dtype = study_precision(study).dtype if dtype is None else dtype
    settings["runner"].update(precision_fields(dtype))
    return settings


def resolved_method_config(
    method: str, fields: dict, seed: int, benchmark: str = "amnesia", dtype: str = "float32"
) -> dict:
    """The method config a cell trains with (paper defaults < the study's fields < the seed, in the
    study's resolved ``dtype``), as a dict without the fields that only affect display or paths
    (``benchmark``: its corpus's ``data_format``). Its ``bf16`` is what the cell trains in; its ``dtype``
    field is kept as ``auto`` for float32 (as every earlier version fingerprinted it), else ``bfloat16``."""
    from medunlearn.unlearn.run import make_method_config

    fields = cell_fields(fields, seed)
    config = make_method_config(method, "unused", benchmark=benchmark, dtype=dtype, **fields)
    resolved = {k: v for k, v in config.to_dict().items() if not PRESENTATION_FIELDS.match(k)}
    resolved["dtype"] = precision_fields(dtype).get("dtype", "auto")
    if resolved.get("eval_probe_steps") is None:  # probing off: its settings change nothing
        resolved = {k: v for k, v in resolved.items() if not PROBE_FIELDS.match(k)}
    return resolved


def cell_fields(fields: dict, seed: int) -> dict:
    """The fields a cell passes to ``make_method_config``: the study's, the seed, and no progress bars."""
    return {**fields, "seed": seed, "disable_tqdm": True}


def forget_parts(forget: str) -> dict:
    """``disease_cancer_forget_10`` → split ``disease``, disease ``cancer``, size 10 (random and no size for a
    name off the grammar of :mod:`medunlearn.config_names`)."""
    parsed = SplitName.parse(forget) if is_forget_config(forget, "amnesia") else None
    disease = parsed.disease if parsed else None
    return {
        "split": "disease" if disease else "random",
        "disease": disease,
        "forget_size": parsed.percent if parsed else None,
    }


@dataclass
class Baseline:
    """The fine-tuned model evaluated on one forget config (the "no unlearning" row); it also writes the
    before-model outputs every cell of that forget config reads (``before_outputs``)."""

    forget: str
    fingerprint: str

    @property
    def name(self) -> str:
        return f"finetuned-{self.forget}"

    @property
    def folder(self) -> str:
        return f"baseline/{self.forget}"

    @property
    def before_outputs(self) -> str:
        return f"{self.folder}/before_outputs"


@dataclass
class Cell:
    """One (method, forget config, seed) of the grid."""

    label: str  # the study's name for the method entry
    method: str  # the method-table stem
    forget: str
    seed: int
    fields: dict = field(default_factory=dict)  # the study's fields (the seed is added at run time)
    config: dict = field(default_factory=dict)  # the resolved method config (fingerprinted)
    fingerprint: str = ""
    attack_fingerprint: str | None = None  # the attack stage's (None: the study runs no attacks)

    @property
    def name(self) -> str:
        return f"{self.label}-{self.forget}-s{self.seed}"

    @property
    def folder(self) -> str:
        return f"cells/{self.name}"

    @property
    def attack_name(self) -> str:
        return f"attacks-{self.name}"

    @property
    def attack_folder(self) -> str:
        return f"{self.folder}/attacks"


@dataclass
class Grid:
    data_fingerprint: str
    finetune_fingerprint: str
    baselines: list[Baseline]
    cells: list[Cell]

    def to_json(self) -> dict:
        return {
            "data_fingerprint": self.data_fingerprint,
            "finetune_fingerprint": self.finetune_fingerprint,
            "baselines": [
                {"name": b.name, "forget": b.forget, "fingerprint": b.fingerprint} for b in self.baselines
            ],
            "cells": [
                {
                    "name": c.name,
                    "label": c.label,
                    "method": c.method,
                    "forget": c.forget,
                    "seed": c.seed,
                    "fields": c.fields,
                    "fingerprint": c.fingerprint,
                    **({"attack_fingerprint": c.attack_fingerprint} if c.attack_fingerprint else {}),
                }
                for c in self.cells
            ],
        }


def build_grid(study: StudyConfig, data_fp: str) -> Grid:
    """Every stage of ``study`` with its fingerprint (resolves each method config: imports the trainers)."""
    from medunlearn.unlearn.methods import resolve_method

    dtype = study_precision(study).dtype
    finetune_fp = finetune_fingerprint(study, data_fp, dtype)
    evaluation = evaluation_settings(study, dtype)
    attacks = attack_settings(study) if study.attacks is not None else None
    baselines = [
        Baseline(forget, fingerprint({"finetune": finetune_fp, "forget": forget, "evaluation": evaluation}))
        for forget in study.forget
    ]
    cells = []
    for entry in study.methods:
        stem = resolve_method(entry.method).stem
        for forget in study.forget:
            for seed in study.seeds:
                config = _resolve(study, entry, seed, dtype)
                cell = Cell(entry.label, stem, forget, seed, dict(entry.fields), config)
                cell.fingerprint = fingerprint(
                    {
                        "finetune": finetune_fp,
                        "method": stem,
                        "config": config,
                        "forget": forget,
                        "seed": seed,
                        "evaluation": evaluation,
                    }
                )
                if study.attacks is not None:
                    cell.attack_fingerprint = fingerprint({"cell": cell.fingerprint, "attacks": attacks})
                cells.append(cell)
    return Grid(data_fp, finetune_fp, baselines, cells)


def attack_settings(study: StudyConfig) -> dict:
    """The resolved settings of the attack stage (``AttackArguments`` and ``RelearnConfig`` values, defaults
    filled in), what its fingerprint covers; checks the attack and quantization names."""
    from medunlearn.attacks.quantization import QUANTIZATIONS
    from medunlearn.attacks.relearning import RelearnConfig
    from medunlearn.attacks.run import ATTACKS
    from medunlearn.errors import MedunlearnError

    spec = study.attacks
    attacks = list(spec.attacks or ATTACKS)
    unknown = [a for a in attacks if a not in ATTACKS]
    if unknown:
        raise study.error("attacks.attacks", f"unknown attack(s) {', '.join(unknown)}; choose from {ATTACKS}")
    schemes = list(spec.quantizations or QUANTIZATIONS)
    bad = [q for q in schemes if q not in QUANTIZATIONS]
    if bad:
        raise study.error(
            "attacks.quantizations", f"unknown scheme(s) {', '.join(bad)}; choose from {list(QUANTIZATIONS)}"
        )
    relearn = {
        name: getattr(spec, f"relearn_{name}")
        for name in ("steps", "data", "share", "learning_rate", "batch_size")
        if getattr(spec, f"relearn_{name}") is not None
    }
    try:
        relearn = asdict(RelearnConfig(**relearn, seed=spec.seed))
    except MedunlearnError as error:
        raise study.error("attacks", str(error)) from None
    relearn["steps"] = list(relearn["steps"])
    max_retain = spec.max_retain_patients
    if max_retain is None:
        max_retain = study.evaluation.populations.get("max_retain_patients", 100)
    settings = {"attacks": attacks, "seed": spec.seed, "max_retain_patients": max_retain}
    if "relearn" in attacks:
        settings["relearn"] = relearn
    if "quantize" in attacks:
        settings["quantizations"] = schemes
    return settings


def _resolve(study: StudyConfig, entry, seed: int, dtype: str = "float32") -> dict:
    """``entry``'s resolved config for ``seed`` in ``dtype``; a bad method, field or value is named by its
    study key."""
    import dataclasses

    from medunlearn.errors import MedunlearnError
    from medunlearn.unlearn.methods import resolve_method

    try:
        config_class, _ = resolve_method(entry.method).load()
    except MedunlearnError as error:
        raise study.error(f"methods.{entry.label}.method", str(error)) from None
    names = {f.name for f in dataclasses.fields(config_class)}
    for name in entry.fields:
        if name not in names:
            raise study.error(f"methods.{entry.label}.{name}", f"not a field of {config_class.__name__}")
    import contextlib
    import io

    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):  # TRL's parser prints its usage before exiting
            return resolved_method_config(entry.method, entry.fields, seed, study.benchmark, dtype)
    except MedunlearnError as error:
        raise study.error(f"methods.{entry.label}", str(error)) from None
    except SystemExit:  # a value the field's type rejects: argparse's own message names the field
        message = (captured.getvalue().strip().splitlines() or ["invalid value"])[-1]
        raise study.error(f"methods.{entry.label}", message.split("error: ", 1)[-1]) from None


def validate_study(study: StudyConfig, data_dir: Path | None = None) -> Grid | None:
    """Check what the file's shape cannot tell: every method and its fields (resolved with
    ``make_method_config``), the ``sft`` fields, and, when the data folder exists, that it has every forget
    config. Returns the grid when the data fingerprint can be computed (a folder, or build options). A MUSE
    study is checked by :func:`medunlearn.study.muse_grid.validate_muse_study`."""
    from medunlearn.errors import MedunlearnError
    from medunlearn.unlearn.methods import resolve_method

    if study.benchmark == "muse":
        from medunlearn.study.muse_grid import validate_muse_study

        return validate_muse_study(study, data_dir)
    for entry in study.methods:
        try:
            resolve_method(entry.method)
        except MedunlearnError as error:
            raise study.error(f"methods.{entry.label}.method", str(error)) from None
    _check_sft_fields(study)
    if study.data.build is not None:
        _check_build_forget(study)
    folder = data_dir if data_dir is not None else study.data_path()
    if folder is not None and (folder / "README.md").is_file():
        from medunlearn.utils.user_files import card_data_files

        card_data_files(folder)  # the card's data files stay in the folder, no key given twice
        offered = folder_configs(folder)
        for index, forget in enumerate(study.forget):
            if forget not in offered:
                raise study.error(f"forget[{index}]", f"{folder} has no config {forget!r}")
    elif study.data.path is not None:
        from medunlearn.errors import MissingInputError

        raise MissingInputError(f"{study.source}: key 'data.path': {folder} is not an AMNESIA folder")
    return build_grid(study, data_fingerprint(study)) if folder is None or folder.is_dir() else None


def _check_sft_fields(study: StudyConfig) -> None:
    import dataclasses

    from trl import SFTConfig

    names = {f.name for f in dataclasses.fields(SFTConfig)}
    for name in study.finetune.sft:
        if name not in names:
            raise study.error(f"finetune.sft.{name}", "not a field of SFTConfig")
        if name in ("output_dir", "num_train_epochs"):
            epochs = "epochs" if study.benchmark == "muse" else "notes_epochs, qa_epochs"
            raise study.error(f"finetune.sft.{name}", f"is set by the study ({epochs})")


def _check_build_forget(study: StudyConfig) -> None:
    from medunlearn.ontology.amnesia import DISEASE_LEVEL_DEFAULT, DISEASES

    diseases = tuple(study.data.build.get("disease_level", DISEASE_LEVEL_DEFAULT))
    percentages = tuple(study.data.build.get("forget_percentages", (5, 10, 15, 20, 25)))
    for index, forget in enumerate(study.forget):
        parts = forget_parts(forget)
        if parts["forget_size"] not in percentages:
            raise study.error(
                f"forget[{index}]", f"{forget}: {parts['forget_size']}% is not built {percentages}"
            )
        if parts["disease"] is not None and (
            parts["disease"] not in diseases or parts["disease"] not in DISEASES
        ):
            raise study.error(
                f"forget[{index}]",
                f"{forget}: disease {parts['disease']!r} is not built ({', '.join(diseases)})",
            )


def check_subset_names(
    study: StudyConfig, methods: list[str] | None, forget: list[str] | None, noun: str
) -> None:
    """``--methods`` must be method labels of ``study`` and ``--forget`` its forget sets (``noun``: what a
    forget set is called there, "forget config" or "fold"); a named error otherwise."""
    from medunlearn.errors import InputError

    labels = [m.label for m in study.methods]
    for name in methods or []:
        if name not in labels:
            raise InputError(
                f"--methods: {name!r} is not a method label of {study.source} ({', '.join(labels)})"
            )
    for name in forget or []:
        if name not in study.forget:
            raise InputError(
                f"--forget: {name!r} is not a {noun} of {study.source} ({', '.join(study.forget)})"
            )
