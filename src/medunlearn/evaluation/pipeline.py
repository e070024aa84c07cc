"""``evaluate_unlearning``: populations → runner (model, before, retain) → per-example table → summary.

An evaluation folder (EVALDIR)::

    run.json              what was evaluated: model, before / retain models, data, forget config, settings,
                          seed
    examples.parquet      the scored examples (population, QA type, question, answer, keywords)
    outputs/model/        runner outputs of the evaluated model (all populations; only the others when the
                          before model is the evaluated one: its forget rows are the before outputs)
    outputs/before/       runner outputs of the model before unlearning (forget populations), for AFE
    outputs/retain/       teacher-forced outputs of the retain model (forget populations), for privleak
    per_example.parquet   every per-example statistic of the evaluated model
    summary.json          metrics per population × QA type, MIA / privleak

``score_evaluation(EVALDIR)`` rebuilds the last two from the stored outputs, without any model.
Launched on several processes (``torchrun``), each runs every N-th batch and process 0 writes the summary.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from medunlearn.chat import PRESETS, warn_if_conventions_differ
from medunlearn.errors import InputError, MissingInputError
from medunlearn.evaluation.engines import HFEngine, check_engine_serves, make_engine
from medunlearn.evaluation.populations import FORGET_POPULATIONS, PopulationConfig, load_populations
from medunlearn.evaluation.runner import (
    GENERATION,
    PASSES,
    TEACHER_FORCED,
    RunnerConfig,
    outputs_complete,
    outputs_current,
    outputs_fingerprint,
    read_answer_variants,
    read_outputs,
    run_model,
)
from medunlearn.evaluation.scoring import per_example_metrics, summarise
from medunlearn.models import check_model_name, resolve_model
from medunlearn.utils.digest import folder_weights_digest, start_folder_digest
from medunlearn.utils.distributed import launched_processes
from medunlearn.utils.files import finite_or_none

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
    retain_outputs: str | Path | None = None,
    embedding_similarity: bool = False,
    overwrite: bool = False,
) -> dict:
    """Evaluate ``model`` (a path, or an object with ``tokenizer=``) on an AMNESIA forget config.

    ``before`` and ``retain_model`` are paths or ``(model, tokenizer)`` pairs. ``examples`` replaces the
    populations read from ``data_dir`` (a table shaped like ``build_populations``' output). Finished batches
    in ``out_dir`` are reused, so rerunning an interrupted evaluation resumes it. ``before_outputs`` is where
    the before model's outputs live (default ``out_dir/outputs/before``): give several evaluations that share
    a before model, data and settings the same folder and the before model runs once (``overwrite`` leaves
    that shared folder alone: its fingerprint already guarantees it matches). ``retain_outputs`` does the same
    for the retain model (default ``out_dir/outputs/retain``). A ``before`` that is ``model`` (the same
    folder, or ``(model, tokenizer)``) runs once: the forget examples as the before model, the others as the
    model. Outputs are reused exactly when their
    fingerprint matches (the same model folder and weights digest, examples and runner settings); a model
    named by a folder whose outputs are all there is not even loaded. ``embedding_similarity`` adds the
    offline MiniLM embedding cosine to the answer similarity (ROUGE-L F1 alone by default).

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
    if runner_config.engine == "vllm" and processes.count > 1:
        raise InputError(
            "--engine vllm runs in one process (the vLLM server batches for the whole device); "
            "launch without torchrun / accelerate, or use --engine hf"
        )
    # Before anything is written: a server at --vllm-url must serve each generating role's checkpoint, and a
    # started server must be able to run it (docs/evaluation.md, "Generation engines").
    check_engine_serves(runner_config, {FLAGS["model"]: model, FLAGS["before"]: before})
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
    if retain_outputs is not None:
        outputs["retain"] = Path(retain_outputs)
    shared_roles = {
        role for role, folder in (("before", before_outputs), ("retain", retain_outputs)) if folder
    }
    jobs = [("model", model, tokenizer, examples, PASSES)]
    model_folders = [str(outputs["model"])]
    # The before model is the evaluated one (a study's baseline, --model X --before X): it runs once. The
    # before role scores the forget examples, the model role only the others, and the model's forget rows are
    # read from the before outputs (unless the model's outputs of every example are already there).
    same = (
        before is not None
        and _same_model(model, tokenizer, before)
        and not _reusable(model, examples, outputs["model"], runner_config, PASSES, overwrite, False)
    )
    if same:
        others = examples[~examples["population"].isin(FORGET_POPULATIONS)].reset_index(drop=True)
        jobs = [("before", before, None, forget_examples, PASSES)]
        if len(others):
            jobs.append(("model", model, tokenizer, others, PASSES))
        model_folders = [str(outputs["model"])] * bool(len(others)) + [str(outputs["before"])]
    elif before is not None:
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
    if same:  # the model's outputs: its own folder (non-forget examples, if any), then the before outputs
        run_info["outputs"]["model"] = model_folders
    held = None  # the before model, kept loaded for the model role when they are the same model
    for role, model_or_path, role_tokenizer, role_examples, passes in jobs:
        shared = role in shared_roles
        reuse, held = (held if role == "model" else None), None  # never two models in memory
        if _reusable(model_or_path, role_examples, outputs[role], runner_config, passes, overwrite, shared):
            run_info["models"][role] = str(model_or_path)
            continue
        if reuse is not None:
            loaded, loaded_tokenizer, path, weights = reuse
        else:
            # A folder's weights are hashed from its files, once (cached beside it), while the model loads.
            digest = start_folder_digest(model_or_path) if isinstance(model_or_path, (str, Path)) else None
            loaded, loaded_tokenizer, path = resolve_model(model_or_path, role_tokenizer, FLAGS[role])
            if path is not None and is_main:
                warn_if_conventions_differ(path, PRESETS["medunlearn"], FLAGS[role])
            if path is not None:
                # Loaded here, so placed here: the process's GPU when there is one (data parallel: every
                # process holds the model and runs its share of the batches). Objects stay where the caller
                # put them.
                loaded.to(processes.device)
            weights = digest.result() if digest is not None else None
        reuse = None
        held = (loaded, loaded_tokenizer, path, weights) if same and role == "before" else None
        model_id = path or str(getattr(loaded.config, "name_or_path", "") or f"in-memory model ({role})")
        run_info["models"][role] = model_id
        # A shared --before-outputs / --retain-outputs folder is discarded only when stale: outputs matching
        # the fingerprint are exactly what this run would compute, and other evaluations are reusing them.
        # The generation engine of this model: a vLLM server is started (from the model's folder) only if
        # generations are left to do, and stopped when this model is done, also on error.
        with make_engine(runner_config, loaded, path) if GENERATION in passes else HFEngine(loaded) as engine:
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
                weights=weights,
                engine=engine,
            )
        del loaded  # one model in memory at a time (the before model is held for the model role)
    reuse = held = None
    if same:
        run_info["models"].setdefault("model", run_info["models"]["before"])
    if processes.count > 1:
        processes.wait_for_everyone()
    if not is_main:
        return {}
    run_info["complete"] = all(outputs_complete(outputs[role], passes) for role, *_, passes in jobs)
    (out_dir / "run.json").write_text(json.dumps(run_info, indent=2))
    if not run_info["complete"]:
        return {}
    return score_evaluation(out_dir)


def _same_model(model, tokenizer, before) -> bool:
    """Whether ``before`` is the evaluated model: the same folder (or name, with no other tokenizer), or the
    same objects (``before=(model, tokenizer)``)."""
    if isinstance(model, (str, Path)) and isinstance(before, (str, Path)):
        if tokenizer is not None:  # the model role would run with another tokenizer than the folder's
            return False
        if Path(model).is_dir() and Path(before).is_dir():
            return Path(model).resolve() == Path(before).resolve()
        return str(model) == str(before)
    if isinstance(before, (tuple, list)) and len(before) == 2:
        return before[0] is model and before[1] is tokenizer
    return False


def _read_role(folders: list[Path], example_ids) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A role's outputs (rows in ``example_ids`` order) and answer variants, from one folder or several (the
    model's own outputs and the before outputs, when the before model is the evaluated one)."""
    if len(folders) == 1:
        return read_outputs(folders[0], example_ids), read_answer_variants(folders[0])
    outputs = pd.concat([read_outputs(folder) for folder in folders], ignore_index=True)
    outputs = outputs.drop_duplicates("example_id").set_index("example_id")
    missing = pd.Index(example_ids).difference(outputs.index)
    if len(missing):
        raise MissingInputError(
            f"{', '.join(map(str, folders))} have no outputs for example {missing[0]!r} (run incomplete?)"
        )
    variants = pd.concat([read_answer_variants(folder) for folder in folders], ignore_index=True)
    return outputs.loc[list(example_ids)].reset_index(), variants.drop_duplicates(["example_id", "variant"])


def _reusable(model_or_path, examples, folder: Path, config: RunnerConfig, passes, overwrite, shared) -> bool:
    """Whether ``folder`` already holds all of this role's outputs, for a model named by its folder: its
    weights digest (from the files, cached) gives the fingerprint without loading it."""
    if not isinstance(model_or_path, (str, Path)) or (overwrite and not shared):
        return False
    # Only a cached digest: a folder never hashed has no complete outputs (unless its cache was removed; the
    # runner then finds them done after the load).
    weights = folder_weights_digest(model_or_path, cached_only=True)
    if weights is None:
        return False
    fingerprint = outputs_fingerprint(str(model_or_path), examples, config, weights, passes=passes)
    if not outputs_current(folder, fingerprint, passes):
        return False
    if config.progress:
        print(
            f"{folder.name}: reused cached outputs in {folder} ({model_or_path} not loaded)", file=sys.stderr
        )
    return True


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
        folders = recorded.get(role, str(eval_dir / "outputs" / role))
        folders = [Path(folder) for folder in ([folders] if isinstance(folders, str) else folders)]
        if not all(folder.is_dir() for folder in folders):
            continue
        role_examples = (
            examples if role == "model" else examples[examples["population"].isin(FORGET_POPULATIONS)]
        )
        role_examples = role_examples.reset_index(drop=True)
        outputs, variants = _read_role(folders, role_examples["example_id"])
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
    summary = finite_or_none(summary)
    (eval_dir / "summary.json").write_text(
        json.dumps(summary, indent=2, allow_nan=False, default=_json_default)
    )
    return summary


def _json_default(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in summary.json")


__all__ = ["evaluate_unlearning", "score_evaluation", "GENERATION", "TEACHER_FORCED"]
