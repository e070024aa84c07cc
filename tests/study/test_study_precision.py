"""A study's precision (``dtype: auto|float32|bfloat16``, ``medunlearn study --dtype``): the key's errors, the
command-line override, the fingerprints (a float32 study keeps those of earlier versions; bfloat16 changes
every stage but the data), and every stage that trains or evaluates receiving the resolved dtype, in an
AMNESIA and a MUSE study (docs/study.md, "Precision"). No training: the stages' calls are planted."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from medunlearn.study.config import StudyConfigError, parse_study
from medunlearn.study.grid import (
    PRESENTATION_FIELDS,
    PROBE_FIELDS,
    build_grid,
    cell_fields,
    data_fingerprint,
    fingerprint,
    study_precision,
)
from medunlearn.study.muse_config import muse_conventions
from medunlearn.study.muse_grid import build_muse_grid
from medunlearn.study.muse_stages import MuseCellJob, MuseEvaluationJob, MuseFinetuneJob, plan_muse_phases
from medunlearn.study.run import plan_phases
from medunlearn.study.stages import AttackJob, BaselineJob, CellJob, FinetuneJob, StudyContext

REPO = Path(__file__).resolve().parents[2]
STUDIES = REPO / "recipes" / "studies"
TINY = STUDIES / "tiny.yaml"
SCALABILITY = STUDIES / "muse-scalability.yaml"


def raw(path: Path, **changes) -> dict:
    """The study file at ``path`` as a mapping, top-level keys replaced by ``changes``."""
    return {**yaml.safe_load(path.read_text()), **changes}


def small_muse(**changes) -> dict:
    """The shipped scalability study cut to one seed and two folds (the fingerprints need no more)."""
    return raw(SCALABILITY, seeds=[0], forget=["forget_1", "forget_2"], **changes)


@pytest.fixture
def cpu_without_fast_bf16(monkeypatch):
    """This machine as the fingerprints' rule sees it: no CUDA, a CPU without native bf16 (``auto`` is
    float32), whatever the machine the test runs on."""
    import torch

    from medunlearn.utils import precision

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(precision, "native_bf16_flags", lambda flags=None: [])


# ---------------------------------------------------------------------------------------------------------
# The key


@pytest.mark.parametrize("base", [TINY, SCALABILITY])
@pytest.mark.parametrize(
    ("section", "value", "key"),
    [
        ("dtype", "fp16", "dtype"),
        ("dtype", ["bfloat16"], "dtype"),
        ("finetune", {"sft": {"bf16": True}}, "finetune.sft.bf16"),
        ("finetune", {"sft": {"fp16": True}}, "finetune.sft.fp16"),
        ("methods", {"grad_diff": {"dtype": "bfloat16"}}, "methods.grad_diff.dtype"),
        ("methods", {"grad_diff": {"bf16": True}}, "methods.grad_diff.bf16"),
        ("evaluation", {"runner": {"dtype": "bfloat16"}}, "evaluation.runner.dtype"),
    ],
)
def test_a_bad_or_second_precision_key_is_named_with_the_file(base, section, value, key):
    with pytest.raises(StudyConfigError, match=re.escape(f"my.yaml: key '{key}': ")) as info:
        parse_study(raw(base, **{section: value}), "my.yaml")
    says = (
        "must be one of auto, float32, bfloat16" if key == "dtype" else "set by the study's top-level `dtype`"
    )
    assert says in str(info.value)


@pytest.mark.parametrize("base", [TINY, SCALABILITY])
def test_the_key_defaults_to_auto_and_takes_each_choice(base):
    assert parse_study(raw(base), "s.yaml").dtype == "auto"
    assert parse_study(raw(base, dtype=None), "s.yaml").dtype == "auto"  # `dtype:` left empty
    for choice in ("auto", "float32", "bfloat16"):
        assert parse_study(raw(base, dtype=choice), "s.yaml").dtype == choice


# ---------------------------------------------------------------------------------------------------------
# The command line


@pytest.mark.parametrize(
    ("in_file", "option", "expected"),
    [(None, [], "auto"), ("bfloat16", [], "bfloat16"), ("bfloat16", ["--dtype", "float32"], "float32")],
)
def test_study_dtype_overrides_the_file_and_is_announced_once(
    tmp_path, monkeypatch, capsys, in_file, option, expected
):
    from medunlearn.cli import main
    from medunlearn.study import grid

    seen = []
    monkeypatch.setattr(grid, "validate_study", lambda study: seen.append(study.dtype))
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw(TINY, **({"dtype": in_file} if in_file else {}))))
    assert main(["study", str(path), "--validate", *option]) == 0
    assert seen == [expected]
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dtype: ")]
    assert len(said) == 1
    if expected != "auto":
        assert said == [f"dtype: {expected} (as asked)"]


def test_run_study_gives_every_stage_the_resolved_dtype_and_records_it(tmp_path, monkeypatch):
    """``run_study`` itself (its executor planted): the jobs' context holds the study's dtype, resolved."""
    from medunlearn.study import run as study_run

    planted = []

    class Planted(study_run.StageExecutor):
        def run(self, jobs, workers, on_done):
            planted.extend(jobs)

    def prepare(study, out):
        return study, Path(out), Path(out) / "data", build_grid(study, "data-fp")

    monkeypatch.setattr(study_run, "prepare_study", prepare)
    monkeypatch.setattr(study_run, "open_executor", lambda *args: contextlib.nullcontext(Planted()))
    monkeypatch.setattr(study_run, "collect_results", lambda study_dir: {})
    study = parse_study(raw(TINY, dtype="bfloat16"), str(TINY))
    (tmp_path / "s").mkdir()
    study_run.run_study(study, tmp_path / "s")
    assert planted and {job.context.dtype for job in planted} == {"bfloat16"}
    runs = json.loads((tmp_path / "s" / "study.json").read_text())["runs"]
    assert runs[-1]["dtype"] == "bfloat16" and runs[-1]["ran"] == []


# ---------------------------------------------------------------------------------------------------------
# Fingerprints


def earlier_cell_config(method: str, fields: dict, seed: int, benchmark: str) -> dict:
    """A cell's config as earlier versions fingerprinted it (no precision given: the field's ``auto``)."""
    from medunlearn.unlearn.run import make_method_config

    config = make_method_config(method, "unused", benchmark=benchmark, **cell_fields(fields, seed)).to_dict()
    resolved = {k: v for k, v in config.items() if not PRESENTATION_FIELDS.match(k)}
    if resolved.get("eval_probe_steps") is None:
        resolved = {k: v for k, v in resolved.items() if not PROBE_FIELDS.match(k)}
    return resolved


def earlier_amnesia_fingerprints(study) -> dict:
    """Every stage's fingerprint by the formula of the versions before precision was fingerprinted."""
    from medunlearn.unlearn.methods import resolve_method

    finetune = fingerprint({"data": "data", "model": study.model, "finetune": asdict(study.finetune)})
    evaluation = asdict(study.evaluation)
    found = {"finetune": finetune}
    for forget in study.forget:
        found[f"finetuned-{forget}"] = fingerprint(
            {"finetune": finetune, "forget": forget, "evaluation": evaluation}
        )
    for entry in study.methods:
        stem = resolve_method(entry.method).stem
        for forget in study.forget:
            for seed in study.seeds:
                config = earlier_cell_config(entry.method, entry.fields, seed, "amnesia")
                found[f"{entry.label}-{forget}-s{seed}"] = fingerprint(
                    {
                        "finetune": finetune,
                        "method": stem,
                        "config": config,
                        "forget": forget,
                        "seed": seed,
                        "evaluation": evaluation,
                    }
                )
    return found


def amnesia_fingerprints(grid) -> dict:
    found = {"finetune": grid.finetune_fingerprint}
    found |= {b.name: b.fingerprint for b in grid.baselines}
    found |= {c.name: c.fingerprint for c in grid.cells}
    found |= {c.attack_name: c.attack_fingerprint for c in grid.cells if c.attack_fingerprint}
    return found


@pytest.mark.usefixtures("cpu_without_fast_bf16")
def test_amnesia_float32_keeps_earlier_fingerprints_and_bfloat16_changes_every_stage_but_the_data():
    studies = {choice: parse_study(raw(TINY, dtype=choice), "s.yaml") for choice in ("auto", "float32")}
    assert study_precision(studies["auto"]).dtype == "float32"  # auto on this (planted) CPU
    earlier = earlier_amnesia_fingerprints(studies["auto"])
    for study in studies.values():
        assert amnesia_fingerprints(build_grid(study, "data")) == earlier
    bf16_study = parse_study(raw(TINY, dtype="bfloat16"), "s.yaml")
    bf16 = amnesia_fingerprints(build_grid(bf16_study, "data"))
    assert bf16.keys() == earlier.keys() and not set(bf16.values()) & set(earlier.values())
    assert data_fingerprint(bf16_study) == data_fingerprint(studies["auto"])  # the data is not computed in it
    cell = build_grid(bf16_study, "data").cells[0]
    assert cell.config["bf16"] is True and cell.config["dtype"] == "bfloat16"
    attacks = {"attacks": {"attacks": ["holdout"]}}  # the attack stages follow their cells
    plain = amnesia_fingerprints(build_grid(parse_study(raw(TINY, **attacks), "s.yaml"), "data"))
    bf16_attacks = amnesia_fingerprints(
        build_grid(parse_study(raw(TINY, dtype="bfloat16", **attacks), "s"), "d")
    )
    assert not {v for k, v in plain.items() if k.startswith("attacks-")} & set(bf16_attacks.values())


def earlier_muse_fingerprints(study) -> dict:
    """A scalability study's fingerprints by the formula of the versions before precision was
    fingerprinted."""
    from medunlearn.unlearn.methods import resolve_method

    finetune = {"data": "data", "model": study.model, "finetune": asdict(study.finetune)}
    found = {role: fingerprint({**finetune, "role": role}) for role in ("target", "retain")}
    settings = asdict(study.evaluation)
    evaluation = {"runner": settings["runner"], "conventions": muse_conventions(settings).to_dict()}
    found["retain-eval"] = fingerprint({"model": found["retain"], "evaluation": evaluation})
    found["target-eval"] = fingerprint(
        {"model": found["target"], "retain": found["retain-eval"], "evaluation": evaluation}
    )
    for entry in study.methods:
        stem = resolve_method(entry.method).stem
        for seed in study.seeds:
            config = earlier_cell_config(entry.method, entry.fields, seed, "muse")
            for fold in study.forget:
                found[f"{entry.label}-{fold}-s{seed}"] = fingerprint(
                    {
                        "start": found["target"],
                        "retain": found["retain-eval"],
                        "method": stem,
                        "config": config,
                        "forget": f"scal/{fold}",
                        "seed": seed,
                        "evaluation": evaluation,
                    }
                )
    return found


def muse_fingerprints(grid) -> dict:
    found = dict(grid.finetune_fingerprints)
    found |= {f"{'retain' if b.name == 'retain' else 'target'}-eval": b.fingerprint for b in grid.baselines}
    return found | {c.name: c.fingerprint for c in grid.cells}


@pytest.mark.usefixtures("cpu_without_fast_bf16")
def test_muse_float32_keeps_earlier_fingerprints_and_bfloat16_changes_every_stage_but_the_data():
    auto = parse_study(small_muse(), "s.yaml")
    earlier = earlier_muse_fingerprints(auto)
    for study in (auto, parse_study(small_muse(dtype="float32"), "s.yaml")):
        assert muse_fingerprints(build_muse_grid(study, "data")) == earlier
    bf16_study = parse_study(small_muse(dtype="bfloat16"), "s.yaml")
    bf16 = muse_fingerprints(build_muse_grid(bf16_study, "data"))
    assert bf16.keys() == earlier.keys() and not set(bf16.values()) & set(earlier.values())
    assert data_fingerprint(bf16_study) == data_fingerprint(auto)


def test_auto_is_resolved_per_device_and_a_parity_preset_keeps_a_cpu_float32(monkeypatch):
    """On a CPU that computes bf16 natively and fast, ``auto`` is bfloat16, except under a MUSE study's
    open-unlearning preset (as ``evaluate --benchmark muse --preset open-unlearning``)."""
    from medunlearn.utils import precision

    monkeypatch.setattr(precision, "default_device", lambda: "cpu")
    monkeypatch.setattr(precision, "native_bf16_flags", lambda flags=None: ["amx_bf16"])
    monkeypatch.setattr(precision, "bf16_matmul_speedup", lambda *args: 3.0)
    assert study_precision(parse_study(raw(TINY), "s.yaml")).dtype == "bfloat16"
    assert study_precision(parse_study(small_muse(), "s.yaml")).dtype == "bfloat16"
    parity = small_muse(evaluation={"preset": "open-unlearning"})
    pinned = study_precision(parse_study(parity, "s.yaml"))
    assert pinned.dtype == "float32" and "open-unlearning" in pinned.reason
    explicit = study_precision(parse_study({**parity, "dtype": "bfloat16"}, "s.yaml"))
    assert explicit.dtype == "bfloat16"  # an explicit choice is taken as given
    monkeypatch.setattr(precision, "native_bf16_flags", lambda flags=None: [])
    assert study_precision(parse_study(raw(TINY), "s.yaml")).dtype == "float32"


# ---------------------------------------------------------------------------------------------------------
# Every stage receives it


def planted_calls(monkeypatch) -> dict:
    """Plant every training and evaluation call a stage makes; each records what it was given."""
    from medunlearn.attacks import run as attacks_run
    from medunlearn.evaluation import pipeline
    from medunlearn.muse import evaluate as muse_evaluate
    from medunlearn.muse import finetune as muse_finetune
    from medunlearn.unlearn import run as unlearn_run

    calls: dict = {}

    def record(name, value):
        calls.setdefault(name, []).append(value)
        return {"planted": True}

    monkeypatch.setattr(unlearn_run, "run_finetune", lambda args, model, sft: record("finetune", sft))
    monkeypatch.setattr(muse_finetune, "run_muse_finetune", lambda args, model, sft: record("finetune", sft))
    monkeypatch.setattr(unlearn_run, "run_unlearning", lambda config, model, data: record("unlearn", config))
    monkeypatch.setattr(
        pipeline, "evaluate_unlearning", lambda *a, runner_config, **k: record("evaluate", runner_config)
    )
    monkeypatch.setattr(
        muse_evaluate, "evaluate_muse", lambda *a, runner_config, **k: record("evaluate", runner_config)
    )
    monkeypatch.setattr(attacks_run, "run_attacks", lambda args: record("attack", args.runner))
    return calls


def check_every_stage_received(calls: dict, jobs: list, kinds: dict) -> None:
    assert {type(job) for job in jobs} == set(kinds)
    assert len(calls["finetune"]) == sum(1 for job in jobs if kinds[type(job)] == "finetune")
    for sft in calls["finetune"]:  # default_sft_config(dtype="bfloat16"): autocast over float32 weights
        assert sft.bf16 is True and sft.disable_tqdm is True
    for config in calls["unlearn"]:  # make_method_config(dtype="bfloat16")
        assert config.dtype == "bfloat16" and config.bf16 is True
    for runner in calls["evaluate"] + calls.get("attack", []):  # RunnerConfig(dtype="bfloat16")
        assert runner.dtype == "bfloat16" and runner.computation.dtype == "bfloat16"


def test_every_amnesia_stage_trains_and_evaluates_in_the_study_dtype(tmp_path, monkeypatch):
    calls = planted_calls(monkeypatch)
    study = parse_study(raw(TINY, attacks={"attacks": ["holdout"]}), "s.yaml")
    context = StudyContext(str(tmp_path), "data", study.model, asdict(study.evaluation), None, "bfloat16")
    jobs = [job for phase in plan_phases(study, build_grid(study, "d"), context, 1, 1) for job in phase.jobs]
    for index, job in enumerate(jobs):
        job.run(tmp_path / str(index))
    kinds = {FinetuneJob: "finetune", BaselineJob: "evaluate", CellJob: "cell", AttackJob: "attack"}
    check_every_stage_received(calls, jobs, kinds)
    assert len(calls["unlearn"]) == len(calls["attack"]) == 4 and len(calls["evaluate"]) == 2 + 4


def test_every_muse_stage_trains_and_evaluates_in_the_study_dtype(tmp_path, monkeypatch):
    calls = planted_calls(monkeypatch)
    study = parse_study(small_muse(), "s.yaml")
    context = StudyContext(str(tmp_path), "data", study.model, asdict(study.evaluation), None, "bfloat16")
    grid = build_muse_grid(study, "d")
    jobs = [job for phase in plan_muse_phases(study, grid, context, 1, 1) for job in phase.jobs]
    for index, job in enumerate(jobs):
        job.run(tmp_path / str(index))
    kinds = {MuseFinetuneJob: "finetune", MuseEvaluationJob: "evaluate", MuseCellJob: "cell"}
    check_every_stage_received(calls, jobs, kinds)
    assert len(calls["unlearn"]) == 4 and len(calls["evaluate"]) == 2 + 4


def test_the_relearning_attack_trains_in_its_runner_dtype(tmp_path, monkeypatch):
    """The attack stage's relearning fine-tune gets the study's dtype through the runner it evaluates with."""
    import pandas as pd

    import medunlearn.models as models
    from medunlearn.attacks import relearning
    from medunlearn.evaluation.runner import RunnerConfig
    from medunlearn.unlearn import run as unlearn_run

    given = []

    class Stop(Exception):
        pass

    def planted_sft_config(model_args, out, overrides=(), dtype="auto", parity=None):
        given.append(dtype)
        raise Stop

    monkeypatch.setattr(models, "load_model", lambda *args, **kwargs: (None, None))
    monkeypatch.setattr(unlearn_run, "default_sft_config", planted_sft_config)
    rows = pd.DataFrame({"question": ["q"], "answer": ["a"]})
    with pytest.raises(Stop):
        relearning.relearning_attack(
            tmp_path, rows, rows, tmp_path / "out", runner_config=RunnerConfig(dtype="bfloat16")
        )
    assert given == ["bfloat16"]
