"""``evaluate_unlearning``: populations → runner (model, before, retain) → per-example table → summary.

An evaluation folder (EVALDIR)::

    run.json              what was evaluated: model, before / retain models, data, forget config, settings,
                          seed
    examples.parquet      the scored examples (population, QA type, question, answer, keywords)
    outputs/model/        runner outputs of the evaluated model (all populations; only the others when the
                          before model is the evaluated one: its forget rows are the before outputs)
    outputs/before/       runner outputs of the model before unlearning (forget populations), for AFE
    outputs/retain/       teacher-forced outputs of the retain model (forget populations), for privleak
    outputs/<role>-notes-verbmem/, outputs/<role>-notes-privleak/
                          with ``notes_memorization``: each role's outputs on the patients' notes
                          (:mod:`medunlearn.evaluation.notes_memorization`); their examples are in
                          notes_examples.parquet
    per_example.parquet   every per-example statistic of the evaluated model
    notes_per_example.parquet  the evaluated model's per-note scores (with ``notes_memorization``)
    summary.json          metrics per population × QA type, MIA / privleak, notes memorization

``score_evaluation(EVALDIR)`` rebuilds the last two from the stored outputs, without any model.
Launched on several processes (``torchrun``), each runs every N-th batch and process 0 writes the summary.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from medunlearn.chat import PRESETS
from medunlearn.errors import InputError, MissingInputError
from medunlearn.evaluation.notes_memorization import (
    NOTES_EXAMPLES,
    NotesMemorizationConfig,
    add_notes_runs,
    load_note_examples,
)
from medunlearn.evaluation.notes_scoring import score_notes
from medunlearn.evaluation.outputs_folder import (
    GENERATION,
    PASSES,
    TEACHER_FORCED,
    outputs_complete,
    read_answer_variants,
    read_outputs,
)
from medunlearn.evaluation.populations import FORGET_POPULATIONS, PopulationConfig, load_populations
from medunlearn.evaluation.roles import (
    LoadedRole,
    Role,
    RoleRun,
    check_role_names,
    load_role,
    role_reusable,
    run_role,
)
from medunlearn.evaluation.scoring import per_example_metrics, summarise
from medunlearn.evaluation.settings import Overwrite, RunnerConfig
from medunlearn.models import resolve_model
from medunlearn.utils.distributed import launched_processes
from medunlearn.utils.files import finite_or_none, relocated, staged_overwrite
from medunlearn.utils.user_files import read_json, read_parquet_frame

ROLES = ("model", "before", "retain")
FLAGS = {"model": "--model", "before": "--before", "retain": "--retain-model"}  # named in errors


class Amnesia:
    """The AMNESIA mode of the shared role steps (:mod:`medunlearn.evaluation.roles`): models as given,
    prompts rendered with the tokenizer's own template (the medunlearn conventions)."""

    conventions = PRESETS["medunlearn"]

    def resolve(self, model, tokenizer, flag):
        return resolve_model(model, tokenizer, flag)

    def rendering(self, tokenizer):
        return tokenizer

    def model_id(self, path, model, role):
        return path or str(getattr(model.config, "name_or_path", "") or f"in-memory model ({role})")

    def named(self, model) -> bool:
        return isinstance(model, (str, Path))


@dataclass
class EvaluationSettings:
    """Everything :func:`evaluate_unlearning` takes besides the model, data, forget config and folder (its
    keyword arguments; see there)."""

    tokenizer: object = None
    before: object = None
    retain_model: object = None
    name: str | None = None
    runner_config: RunnerConfig | None = None
    population_config: PopulationConfig | None = None
    examples: pd.DataFrame | None = None
    before_outputs: str | Path | None = None
    retain_outputs: str | Path | None = None
    embedding_similarity: bool = False
    overwrite: bool = False
    notes_memorization: NotesMemorizationConfig | None = None


def evaluate_unlearning(
    model, data_dir: str | Path, forget_config: str, out_dir: str | Path, **settings
) -> dict:
    """Evaluate ``model`` (a path, or an object with ``tokenizer=``) on an AMNESIA forget config.

    ``settings`` are :class:`EvaluationSettings`' fields. ``before`` and ``retain_model`` are paths or
    ``(model, tokenizer)`` pairs. ``examples`` replaces the populations read from ``data_dir`` (a table shaped
    like ``build_populations``' output). Finished batches in ``out_dir`` are reused, so rerunning an
    interrupted evaluation resumes it. ``before_outputs`` is where the before model's outputs live (default
    ``out_dir/outputs/before``): give several evaluations that share a before model, data and settings the
    same folder and the before model runs once (``overwrite`` leaves that shared folder alone: its
    fingerprint already guarantees it matches). ``retain_outputs`` does the same for the retain model
    (default ``out_dir/outputs/retain``). A ``before`` that is ``model`` (the same folder, or ``(model,
    tokenizer)``) runs once: the forget examples as the before model, the others as the model. Outputs are
    reused exactly when their fingerprint matches (the same model folder and weights digest, examples and
    runner settings); a model named by a folder whose outputs are all there is not even loaded.
    ``embedding_similarity`` adds the offline MiniLM embedding cosine to the answer similarity (ROUGE-L F1
    alone by default). ``notes_memorization`` (a :class:`NotesMemorizationConfig`) also scores verbatim
    memorization of the patients' notes and a notes membership test
    (:mod:`medunlearn.evaluation.notes_memorization`); it reads ``data_dir``'s notes.

    Under ``torchrun`` / ``accelerate launch`` every process runs its share of the batches and process 0
    scores; the other processes return ``{}``. Returns the summary (``{}`` while batches are left: rerun to
    resume).
    """
    settings = EvaluationSettings(**settings)
    config = settings.runner_config = settings.runner_config or RunnerConfig()
    settings.population_config = settings.population_config or PopulationConfig()
    processes = launched_processes()
    if config.engine == "vllm" and processes.count > 1:
        raise InputError(
            "--engine vllm runs in one process (the vLLM server batches for the whole device); "
            "launch without torchrun / accelerate, or use --engine hf"
        )
    models = {FLAGS["model"]: model, FLAGS["before"]: settings.before, FLAGS["retain"]: settings.retain_model}
    check_role_names(Amnesia(), config, models, generating=(FLAGS["model"], FLAGS["before"]))
    out_dir = Path(out_dir)
    # --overwrite of a folder holding outputs: the run goes to a staging folder beside it, which replaces it
    # only when the run is done, so an interrupted run (an error, Ctrl-C) leaves the old folder as it was.
    with staged_overwrite(
        out_dir, settings.overwrite, writer=processes.is_main, records=["run.json"]
    ) as work:
        # A shared outputs folder given inside the replaced one is staged with it.
        settings.before_outputs = relocated(settings.before_outputs, out_dir, work)
        settings.retain_outputs = relocated(settings.retain_outputs, out_dir, work)
        return _evaluate_into(work, model, data_dir, forget_config, settings, processes)


def _evaluate_into(out_dir: Path, model, data_dir, forget_config: str, settings, processes) -> dict:
    """:func:`evaluate_unlearning`'s run into ``out_dir``: the evaluation folder, or the staging folder that
    replaces it."""
    config = settings.runner_config
    out_dir.mkdir(parents=True, exist_ok=True)
    examples = settings.examples
    if examples is None:
        examples = load_populations(data_dir, forget_config, settings.population_config)
    roles, model_folders = _plan_roles(model, examples, out_dir, settings)
    run_info = _run_info(model, data_dir, forget_config, settings)
    notes = None
    if settings.notes_memorization is not None:
        run_info["notes"], notes = _plan_notes(data_dir, examples, roles, settings, model_folders is not None)
    run_info["outputs"] = {role.name: str(role.runs[0].folder) for role in roles}
    if model_folders is not None:  # the model's outputs: its own folder (others, if any), then the before's
        run_info["outputs"]["model"] = model_folders
    run_info["models"] = _run_roles(roles, config, processes, same=model_folders is not None)
    if processes.count > 1:
        processes.wait_for_everyone()
    if not processes.is_main:
        return {}
    # Written once the roles ran: a run refused on stale outputs leaves an existing folder as it was.
    examples.to_parquet(out_dir / "examples.parquet", index=False)
    if notes is not None:
        notes.to_parquet(out_dir / NOTES_EXAMPLES, index=False)
    run_info["complete"] = all(
        outputs_complete(run.folder, run.passes) for role in roles for run in role.runs
    )
    (out_dir / "run.json").write_text(json.dumps(run_info, indent=2))
    if not run_info["complete"]:
        return {}
    return score_evaluation(out_dir)


def _plan_notes(data_dir, examples, roles: list[Role], settings, before_carries_model: bool):
    """Every role's notes folders (appended to its runs) and the notes examples: run.json's ``notes``, and
    the table written beside the QA examples."""
    config = settings.notes_memorization
    if data_dir is None or str(data_dir) == NOT_READ:
        raise InputError("notes memorization reads the AMNESIA folder's notes: give its data folder")
    notes, too_short = load_note_examples(data_dir, examples, config)
    outputs = add_notes_runs(roles, notes, config, before_carries_model)
    return {"config": config.to_dict(), "too_short": too_short, "outputs": outputs}, notes


# run.json's (and the summary's) "data" and "forget_config" of an evaluation on given examples: none was read.
NOT_READ = ""


def evaluate_on_examples(
    model,
    examples: pd.DataFrame,
    out_dir: str | Path,
    *,
    name: str | None = None,
    runner_config: RunnerConfig | None = None,
    overwrite: bool = False,
) -> dict:
    """Evaluate ``model`` alone (no before or retain model) on the given ``examples`` (a table shaped like
    ``build_populations``' output) into the evaluation folder ``out_dir``: what an attack asks of each model
    it attacks. No data folder or forget config is read, so ``run.json`` and the summary record both as
    ``""``. ``model``, ``name``, ``runner_config`` and ``overwrite`` are as in :func:`evaluate_unlearning`;
    returns its summary."""
    return evaluate_unlearning(
        model,
        NOT_READ,
        NOT_READ,
        out_dir,
        examples=examples,
        name=name,
        runner_config=runner_config,
        overwrite=overwrite,
    )


def _run_info(model, data_dir, forget_config: str, settings: EvaluationSettings) -> dict:
    return {
        "name": settings.name or (Path(model).name if isinstance(model, (str, Path)) else "model"),
        "data": str(data_dir),
        "forget_config": forget_config,
        "runner": asdict(settings.runner_config),
        "populations": asdict(settings.population_config),
        "similarity": {"embedding": settings.embedding_similarity},
        # AMNESIA evaluation renders with the tokenizer's own template (the medunlearn conventions); the
        # generation length recorded is the one the runner used, not the preset's default.
        "conventions": {
            **PRESETS["medunlearn"].to_dict(),
            "max_new_tokens": settings.runner_config.max_new_tokens,
        },
        "models": {},
        "outputs": {},
        "complete": False,
    }


def _plan_roles(model, examples: pd.DataFrame, out_dir: Path, settings: EvaluationSettings):
    """The roles to run, in order, and (when the before model is the evaluated one) the model's output
    folders: its own and the before's. A before model that is the evaluated one (a study's baseline, --model X
    --before X) runs once: the before role scores the forget examples, the model role only the others, and
    the model's forget rows are read from the before outputs (unless the model's outputs of every example are
    already there)."""
    folders = {role: out_dir / "outputs" / role for role in ROLES}
    shared = {"before": settings.before_outputs, "retain": settings.retain_outputs}
    folders.update({role: Path(folder) for role, folder in shared.items() if folder is not None})

    def role(name, model_or_path, role_examples, passes=PASSES, tokenizer=None) -> Role:
        overwrite = Overwrite.for_folder(settings.overwrite, shared.get(name) is not None)
        runs = [RoleRun(folders[name], role_examples, passes)]
        return Role(name, FLAGS[name], model_or_path, runs, tokenizer, overwrite)

    forget = examples[examples["population"].isin(FORGET_POPULATIONS)].reset_index(drop=True)
    evaluated = role("model", model, examples, tokenizer=settings.tokenizer)
    roles, model_folders = [evaluated], None
    before = settings.before
    same = before is not None and _same_model(model, settings.tokenizer, before)
    if same and not role_reusable(Amnesia(), evaluated, settings.runner_config):
        others = examples[~examples["population"].isin(FORGET_POPULATIONS)].reset_index(drop=True)
        roles = [role("before", before, forget)]
        if len(others):
            roles.append(role("model", model, others, tokenizer=settings.tokenizer))
        model_folders = [str(folders["model"])] * bool(len(others)) + [str(folders["before"])]
    elif before is not None:
        roles.append(role("before", before, forget))
    if settings.retain_model is not None:
        roles.append(role("retain", settings.retain_model, forget, passes=(TEACHER_FORCED,)))
    return roles, model_folders


def _run_roles(roles: list[Role], config: RunnerConfig, processes, same: bool) -> dict:
    """Run every role not already in its folders, one model in memory at a time (the before model is held
    for the model role when they are the same model); returns the model of each role (run.json's
    ``models``)."""
    benchmark, models = Amnesia(), {}
    held: LoadedRole | None = None
    for role in roles:
        reuse, held = (held if role.name == "model" else None), None  # never two models in memory
        if role_reusable(benchmark, role, config):
            models[role.name] = str(role.model)
            continue
        loaded = reuse or load_role(benchmark, role, processes.device, warn=processes.is_main)
        reuse = None
        held = loaded if same and role.name == "before" else None
        models[role.name] = benchmark.model_id(loaded.path, loaded.model, role.name)
        run_role(benchmark, role, loaded, config, processes)
        del loaded  # one model in memory at a time (the before model is held for the model role)
    if same:
        models.setdefault("model", models["before"])
    return models


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


def score_evaluation(eval_dir: str | Path) -> dict:
    """Recompute ``per_example.parquet`` and ``summary.json`` from an evaluation folder's stored outputs."""
    eval_dir = Path(eval_dir)
    for required in ("run.json", "examples.parquet"):
        if not (eval_dir / required).is_file():
            raise MissingInputError(f"{eval_dir} has no {required}: not an evaluation folder")
    run_info = read_json(eval_dir / "run.json", expect=dict)  # a damaged file: named, exit 2
    examples = read_parquet_frame(eval_dir / "examples.parquet")
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
    if run_info.get("notes"):
        summary["notes_memorization"] = score_notes(eval_dir, run_info["notes"])
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


__all__ = ["evaluate_unlearning", "evaluate_on_examples", "score_evaluation", "GENERATION", "TEACHER_FORCED"]
