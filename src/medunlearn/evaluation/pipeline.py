"""``evaluate_unlearning``: populations → runner (model, before, retain) → per-example table → summary.

An evaluation folder (EVALDIR)::

    run.json              what was evaluated: model, before / retain models, data, forget config, settings,
                          seed
    examples.parquet      the scored examples (population, QA type, question, answer, keywords)
    outputs/model/        runner outputs of the evaluated model (all populations)
    outputs/before/       runner outputs of the model before unlearning (forget populations), for AFE
    outputs/retain/       teacher-forced outputs of the retain model (forget populations), for privleak
    per_example.parquet   every per-example statistic of the evaluated model
    summary.json          metrics per population × QA type, MIA / privleak

``score_evaluation(EVALDIR)`` rebuilds the last two from the stored outputs, without any model.
Launched on several processes (``torchrun``), each runs every N-th batch and process 0 writes the summary.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from medunlearn.chat import PRESETS, warn_if_conventions_differ
from medunlearn.errors import MissingInputError
from medunlearn.evaluation.populations import FORGET_POPULATIONS, PopulationConfig, load_populations
from medunlearn.evaluation.runner import (
    GENERATION,
    PASSES,
    TEACHER_FORCED,
    RunnerConfig,
    outputs_complete,
    read_answer_variants,
    read_outputs,
    run_model,
)
from medunlearn.evaluation.scoring import per_example_metrics, summarise
from medunlearn.models import check_model_name, resolve_model
from medunlearn.utils.distributed import launched_processes

ROLES = ("model", "before", "retain")
FLAGS = {"model": "--model", "before": "--before", "retain": "--retain-model"}  # named in errors


def evaluate_unlearning(
    model,
    data_dir: str | Path,
    forget_config: str,
    out_dir: str | Path,
    *,
    tokenizer=None,
    before=None,
    retain_model=None,
    name: str | None = None,
    runner_config: RunnerConfig | None = None,
    population_config: PopulationConfig | None = None,
    examples: pd.DataFrame | None = None,
    before_outputs: str | Path | None = None,
    embedding_similarity: bool = False,
    overwrite: bool = False,
) -> dict:
    """Evaluate ``model`` (a path, or an object with ``tokenizer=``) on an AMNESIA forget config.

    ``before`` and ``retain_model`` are paths or ``(model, tokenizer)`` pairs. ``examples`` replaces the
    populations read from ``data_dir`` (a table shaped like ``build_populations``' output). Finished batches
    in ``out_dir`` are reused, so rerunning an interrupted evaluation resumes it. ``before_outputs`` is where
    the before model's outputs live (default ``out_dir/outputs/before``): give several evaluations that share
    a before model, data and settings the same folder and the before model runs once (``overwrite`` leaves
    that shared folder alone: its fingerprint already guarantees it matches). ``embedding_similarity`` adds
    the offline MiniLM embedding cosine to the answer similarity (ROUGE-L F1 alone by default).

    Under ``torchrun`` / ``accelerate launch`` every process runs its share of the batches and process 0
    scores; the other processes return ``{}``. Returns the summary (``{}`` while batches are left: rerun to
    resume).
    """
    for role, value in (("model", model), ("before", before), ("retain", retain_model)):
        if isinstance(value, (str, Path)):  # before any work: a bad name fails at once, plainly
            check_model_name(str(value), FLAGS[role])
    runner_config = runner_config or RunnerConfig()
    population_config = population_config or PopulationConfig()
    processes = launched_processes()
    is_main = processes.is_main
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if examples is None:
        examples = load_populations(data_dir, forget_config, population_config)
    if is_main:
        examples.to_parquet(out_dir / "examples.parquet", index=False)
    forget_examples = examples[examples["population"].isin(FORGET_POPULATIONS)].reset_index(drop=True)

    outputs = {role: out_dir / "outputs" / role for role in ROLES}
    if before_outputs is not None:
        outputs["before"] = Path(before_outputs)
    jobs = [("model", model, tokenizer, examples, PASSES)]
    if before is not None:
        jobs.append(("before", before, None, forget_examples, PASSES))
    if retain_model is not None:
        jobs.append(("retain", retain_model, None, forget_examples, (TEACHER_FORCED,)))
    run_info = {
        "name": name or (Path(model).name if isinstance(model, (str, Path)) else "model"),
        "data": str(data_dir),
        "forget_config": forget_config,
        "runner": asdict(runner_config),
        "populations": asdict(population_config),
        "similarity": {"embedding": embedding_similarity},
        # AMNESIA evaluation renders with the tokenizer's own template (the medunlearn conventions).
        "conventions": PRESETS["medunlearn"].to_dict(),
        "models": {},
        "outputs": {role: str(outputs[role]) for role, *_ in jobs},
        "complete": False,
    }
    for role, model_or_path, role_tokenizer, role_examples, passes in jobs:
        loaded, loaded_tokenizer, path = resolve_model(model_or_path, role_tokenizer, FLAGS[role])
        if path is not None and is_main:
            warn_if_conventions_differ(path, PRESETS["medunlearn"], FLAGS[role])
        if path is not None:
            # Loaded here, so placed here: the process's GPU when there is one (data parallel: every process
            # holds the model and runs its share of the batches). Objects stay where the caller put them.
            loaded.to(processes.device)
        model_id = path or str(getattr(loaded.config, "name_or_path", "") or f"in-memory model ({role})")
        run_info["models"][role] = model_id
        # A shared --before-outputs folder is discarded only when stale: outputs matching the fingerprint are
        # exactly what this run would compute, and other evaluations are reusing them.
        shared = role == "before" and before_outputs is not None
        run_model(
            loaded,
            loaded_tokenizer,
            role_examples,
            outputs[role],
            runner_config,
            model_id=model_id,
            passes=passes,
            overwrite="stale" if overwrite and shared else overwrite,
            process_index=processes.index,
            num_processes=processes.count,
        )
        del loaded  # one model in memory at a time
    if processes.count > 1:
        processes.wait_for_everyone()
    if not is_main:
        return {}
    run_info["complete"] = all(outputs_complete(outputs[role], passes) for role, *_, passes in jobs)
    (out_dir / "run.json").write_text(json.dumps(run_info, indent=2))
    if not run_info["complete"]:
        return {}
    return score_evaluation(out_dir)


def score_evaluation(eval_dir: str | Path) -> dict:
    """Recompute ``per_example.parquet`` and ``summary.json`` from an evaluation folder's stored outputs."""
    eval_dir = Path(eval_dir)
    for required in ("run.json", "examples.parquet"):
        if not (eval_dir / required).is_file():
            raise MissingInputError(f"{eval_dir} has no {required}: not an evaluation folder")
    run_info = json.loads((eval_dir / "run.json").read_text())
    examples = pd.read_parquet(eval_dir / "examples.parquet")
    tables = {}
    recorded = run_info.get("outputs", {})
    use_embedding = bool(run_info.get("similarity", {}).get("embedding", False))
    for role in ROLES:
        folder = Path(recorded[role]) if role in recorded else eval_dir / "outputs" / role
        if not folder.is_dir():
            continue
        role_examples = (
            examples if role == "model" else examples[examples["population"].isin(FORGET_POPULATIONS)]
        )
        role_examples = role_examples.reset_index(drop=True)
        outputs = read_outputs(folder, role_examples["example_id"])
        variants = read_answer_variants(folder)
        tables[role] = per_example_metrics(role_examples, outputs, variants, use_embedding=use_embedding)
    if "model" not in tables:
        raise MissingInputError(f"{eval_dir} has no outputs/model")
    model_table = tables["model"]
    storable = model_table.drop(columns=[c for c in ("disease_keywords",) if c in model_table])
    storable.to_parquet(eval_dir / "per_example.parquet", index=False)
    summary = {
        "name": run_info.get("name"),
        "forget_config": run_info.get("forget_config"),
        "models": run_info.get("models", {}),
        "conventions": run_info.get("conventions", PRESETS["medunlearn"].to_dict()),
        "similarity": "mean of ROUGE-L F1 and MiniLM embedding cosine" if use_embedding else "ROUGE-L F1",
        **summarise(model_table, tables.get("before"), tables.get("retain")),
    }
    if summary["forget_quality"] is None:
        summary["notes"] = [
            "forget_quality (TOFU KS test of truth ratios) needs --retain-model and examples with "
            "paraphrased_answer and perturbed_answers columns, which AMNESIA QA rows do not have",
        ]
    summary = _finite_or_none(summary)
    (eval_dir / "summary.json").write_text(
        json.dumps(summary, indent=2, allow_nan=False, default=_json_default)
    )
    return summary


def _finite_or_none(value):
    """NaN / inf (an undefined metric, e.g. AFE when the before model scored 0) become null in JSON."""
    import math

    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _json_default(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in summary.json")


__all__ = ["evaluate_unlearning", "score_evaluation", "GENERATION", "TEACHER_FORCED"]
