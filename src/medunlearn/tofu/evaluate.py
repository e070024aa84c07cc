"""``evaluate_tofu``: a TOFU-format benchmark through the one-pass evaluation runner.

Every (question, answer variant) the TOFU metrics need becomes one example of **one** teacher-forced pass
(answers, paraphrased answers and every perturbed answer of the forget, retain, real-authors and world-facts
sets, plus the holdout answers for the MIA); every question gets **one** greedy generation. All metrics are
then computed from those stored outputs (:mod:`medunlearn.tofu.scoring`). The retain model, when given, runs
the teacher-forced pass on the forget and holdout sets only (forget quality, privleak).

An evaluation folder::

    run.json                       source, forget config, conventions, models
    examples.parquet               example_id, set, row, variant, variant_index, question, answer
    outputs/<role>-answers/        runner outputs of the teacher-forced pass (role: model, retain)
    outputs/model-questions/       runner outputs of the greedy generations
    per_example.parquet            the model's per-example statistics
    summary.json                   {"metrics": ours, "open_unlearning": reference names, "conventions": ...}
    TOFU_SUMMARY.json              the reference's names -> values only, the shape OpenUnlearning writes
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.chat import RENDERING_FIELDS, recorded_conventions
from medunlearn.data_loading import check_no_question_in_both, split_source
from medunlearn.errors import MissingInputError
from medunlearn.evaluation.outputs_folder import GENERATION, TEACHER_FORCED, read_outputs
from medunlearn.evaluation.roles import (
    LoadedRole,
    Role,
    RoleRun,
    check_role_names,
    model_name,
    named_model,
    resolve_or_build,
    run_role,
    run_roles,
)
from medunlearn.evaluation.settings import Overwrite, RunnerConfig
from medunlearn.tofu.conventions import ConventionTokenizer, TofuConventions
from medunlearn.tofu.data import load_tofu, tofu_splits
from medunlearn.tofu.scoring import (
    cut_at_stop_strings,
    reference_summary,
    rouge_recall,
    summarise_tofu,
    token_statistics,
)
from medunlearn.utils.files import relocated, staged_overwrite
from medunlearn.utils.user_files import read_json, read_parquet_frame

GENERATED_SETS = ("forget", "retain", "real_authors", "world_facts")
RETAIN_MODEL_SETS = ("forget", "holdout")


def _set_examples(set_name: str, dataset) -> pd.DataFrame:
    """One row per (question, answer variant) of one set; perturbed answers flattened with their index."""
    frame = dataset.to_pandas()
    n = len(frame)
    rows = np.arange(n)
    parts = [
        pd.DataFrame(
            {
                "row": rows,
                "variant": "answer",
                "variant_index": 0,
                "question": frame["question"],
                "answer": frame["answer"],
            }
        )
    ]
    if "paraphrased_answer" in frame:
        parts.append(
            pd.DataFrame(
                {
                    "row": rows,
                    "variant": "paraphrased",
                    "variant_index": 0,
                    "question": frame["question"],
                    "answer": frame["paraphrased_answer"],
                }
            )
        )
    if "perturbed_answer" in frame:
        counts = frame["perturbed_answer"].map(len).to_numpy()  # load_tofu: non-empty lists of texts
        parts.append(
            pd.DataFrame(
                {
                    "row": np.repeat(rows, counts),
                    "variant": "perturbed",
                    "variant_index": np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts),
                    "question": np.repeat(frame["question"].to_numpy(), counts),
                    "answer": np.concatenate(frame["perturbed_answer"].map(list).to_numpy()),
                }
            )
        )
    examples = pd.concat(parts, ignore_index=True)
    examples.insert(0, "set", set_name)
    examples.insert(
        0,
        "example_id",
        set_name
        + "/"
        + examples["row"].astype(str)
        + "/"
        + examples["variant"]
        + "/"
        + examples["variant_index"].astype(str),
    )
    return examples


def tofu_examples(source, forget: str = "forget10") -> pd.DataFrame:
    """Every example a TOFU evaluation of ``forget`` scores (see the module docstring)."""
    splits = tofu_splits(forget)
    configs = {
        "forget": splits.forget_perturbed,
        "retain": splits.retain_perturbed,
        "real_authors": splits.real_authors,
        "world_facts": splits.world_facts,
        "holdout": splits.holdout,
    }
    sets = {name: load_tofu(source, config) for name, config in configs.items()}
    check_no_question_in_both(
        sets["forget"],
        split_source(source, configs["forget"], "train"),
        sets["retain"],
        split_source(source, configs["retain"], "train"),
    )
    return pd.concat([_set_examples(name, dataset) for name, dataset in sets.items()], ignore_index=True)


def rendering_key(conventions: TofuConventions) -> str:
    """A short hash of the rendering conventions (what the stored outputs depend on besides the runner's
    settings)."""
    import hashlib

    payload = json.dumps({name: getattr(conventions, name) for name in RENDERING_FIELDS}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


class Tofu:
    """The TOFU mode of the shared role steps (:mod:`medunlearn.evaluation.roles`): prompts rendered by the
    conventions, whose rendering enters the model's id (the runner's fingerprint covers the model, the
    examples and its settings but not how prompts are rendered, so outputs of another rendering are never
    reused); ``tiny-llama`` is built fresh on a tokenizer of the benchmark's text."""

    def __init__(self, conventions: TofuConventions, examples: pd.DataFrame):
        self.conventions = conventions
        self.examples = examples

    def resolve(self, model, tokenizer, flag: str):
        return _resolve(model, tokenizer, self.examples, flag)

    def rendering(self, tokenizer):
        return ConventionTokenizer(tokenizer, self.conventions)

    def model_id(self, path, model, role: str) -> str:
        return f"{model_name(path, model)} | rendering {rendering_key(self.conventions)}"

    def named(self, model) -> bool:
        return named_model(model)

    def runner_config(self, runner_config: RunnerConfig | None) -> RunnerConfig:
        """The runner's settings of a TOFU run: the generation length is the conventions'."""
        return replace(runner_config or RunnerConfig(), max_new_tokens=self.conventions.max_new_tokens)


def _role_runs(examples: pd.DataFrame, outputs_dir: Path, role: str, generate: bool, answers_dir=None):
    """A role's folders: the teacher-forced pass over every example into ``outputs_dir/<role>-answers`` (or
    ``answers_dir``), the greedy pass over the questions into ``outputs_dir/<role>-questions``."""
    answers = Path(answers_dir) if answers_dir is not None else outputs_dir / f"{role}-answers"
    runs = [RoleRun(answers, examples, (TEACHER_FORCED,))]
    if generate:
        questions = examples[(examples["variant"] == "answer") & examples["set"].isin(GENERATED_SETS)]
        runs.append(
            RoleRun(outputs_dir / f"{role}-questions", questions.reset_index(drop=True), (GENERATION,))
        )
    return runs


@dataclass
class TofuRunOptions:
    """:func:`run_tofu_model`'s options: ``generate`` (the greedy pass too), ``model_id`` / ``checkpoint``
    (the folder the model was loaded from, which a vLLM engine serves; ``None``: in memory, served from a
    temporary copy), ``overwrite``, ``weights`` (the folder's digest; ``None`` hashes the tensors) and
    ``answers_dir`` (the teacher-forced folder, default ``outputs_dir/<role>-answers``)."""

    generate: bool = True
    model_id: str | None = None
    overwrite: bool | str | Overwrite = Overwrite.KEEP
    weights: str | None = None
    answers_dir: str | Path | None = None
    checkpoint: str | None = None


def run_tofu_model(
    model,
    tokenizer,
    examples: pd.DataFrame,
    outputs_dir,
    role: str,
    conventions,
    runner_config=None,
    **options,
) -> bool:
    """The runner's passes for one loaded model (``role``) into its folders (:func:`_role_runs`);
    ``options`` are :class:`TofuRunOptions`' fields. Returns whether every batch is done."""
    options = TofuRunOptions(**options)
    benchmark = Tofu(conventions, examples)
    runs = _role_runs(examples, Path(outputs_dir), role, options.generate, options.answers_dir)
    overwrite = Overwrite.of(options.overwrite)
    loaded = LoadedRole(model, tokenizer, options.checkpoint or options.model_id, options.weights)
    config = benchmark.runner_config(runner_config)
    return run_role(benchmark, Role(role, f"--{role}", model, runs, overwrite=overwrite), loaded, config)


def per_example_table(
    examples: pd.DataFrame,
    outputs_dir,
    role: str,
    conventions: TofuConventions,
    *,
    generated: bool,
    answers_dir=None,
) -> pd.DataFrame:
    """Per-example statistics from a role's stored outputs (no model); the teacher-forced ones from
    ``answers_dir`` when given (a shared ``retain_outputs`` folder), else ``outputs_dir/<role>-answers``."""
    outputs_dir = Path(outputs_dir)
    answers_dir = Path(answers_dir) if answers_dir is not None else outputs_dir / f"{role}-answers"
    outputs = read_outputs(answers_dir, examples["example_id"])
    table = examples.merge(
        token_statistics(outputs, conventions, examples["answer"]), on="example_id", how="left"
    )
    if generated:
        questions = table[(table["variant"] == "answer") & table["set"].isin(GENERATED_SETS)]
        generations = read_outputs(outputs_dir / f"{role}-questions", questions["example_id"])
        texts = cut_at_stop_strings(generations["generated_text"].tolist(), conventions.stop_strings)
        scored = pd.DataFrame(
            {
                "example_id": questions["example_id"].to_numpy(),
                "generated_text": texts,
                "rouge_recall": rouge_recall(texts, questions["answer"].tolist()),
            }
        )
        table = table.merge(scored, on="example_id", how="left")
    return table


def _resolve(model, tokenizer, examples: pd.DataFrame, flag: str):
    return resolve_or_build(
        model, tokenizer, flag, lambda: examples["question"].tolist() + examples["answer"].tolist()
    )


@dataclass
class TofuEvaluation:
    """Everything :func:`evaluate_tofu` takes besides the model, data, forget config and folder."""

    tokenizer: object = None
    retain_model: object = None
    conventions: TofuConventions | None = None
    runner_config: RunnerConfig | None = None
    overwrite: bool = False
    retain_outputs: str | Path | None = None


def evaluate_tofu(model, source, forget: str, out_dir, **settings) -> dict:
    """Evaluate ``model`` (a path or name, or an object with ``tokenizer=``) on a TOFU-format ``source``.

    ``settings`` are :class:`TofuEvaluation`'s fields. ``tiny-llama`` builds a fresh tiny model on a
    tokenizer of the benchmark's text (smoke runs only).

    ``retain_model`` (a path or a ``(model, tokenizer)`` pair) is a model fine-tuned without the forget set;
    it enables forget quality and privleak. ``retain_outputs`` is where its teacher-forced outputs live
    (default ``out_dir/outputs/retain-answers``): evaluations of several models against one retain model,
    data, forget config and conventions given the same folder score the retain model once, as the reference
    reads its saved retain logs (a retain model folder whose outputs are all there is not even loaded;
    ``overwrite`` leaves that folder alone unless it is stale). A model folder whose outputs are all in
    ``out_dir`` is not loaded either. Returns the summary (also written to ``out_dir/summary.json``).
    """
    settings = TofuEvaluation(**settings)
    conventions = settings.conventions or TofuConventions()
    models = {"--model": model, "--retain-model": settings.retain_model}
    check_role_names(Tofu(conventions, None), settings.runner_config or RunnerConfig(), models, ("--model",))
    examples = tofu_examples(source, forget)  # validates the data before any model loads
    benchmark = Tofu(conventions, examples)
    out_dir = Path(out_dir)
    # --overwrite of a folder holding outputs: staged beside it, swapped in when done (evaluate_unlearning).
    with staged_overwrite(out_dir, settings.overwrite, records=["run.json"]) as work:
        settings.retain_outputs = relocated(settings.retain_outputs, out_dir, work)
        return _evaluate_tofu_into(work, model, source, forget, settings, benchmark)


def _evaluate_tofu_into(
    out_dir: Path, model, source, forget: str, settings: TofuEvaluation, benchmark
) -> dict:
    """:func:`evaluate_tofu`'s run into ``out_dir``: the evaluation folder, or the staging folder that
    replaces it."""
    examples, conventions = benchmark.examples, benchmark.conventions
    config = benchmark.runner_config(settings.runner_config)
    out_dir.mkdir(parents=True, exist_ok=True)
    roles = [
        Role(
            "model",
            "--model",
            model,
            _role_runs(examples, out_dir / "outputs", "model", generate=True),
            settings.tokenizer,
            Overwrite.for_folder(settings.overwrite, shared=False),
        )
    ]
    outputs = {}
    if settings.retain_model is not None:
        answers = Path(settings.retain_outputs or out_dir / "outputs" / "retain-answers")
        outputs["retain"] = str(answers)
        retain_examples = examples[examples["set"].isin(RETAIN_MODEL_SETS)]
        runs = _role_runs(retain_examples, out_dir / "outputs", "retain", generate=False, answers_dir=answers)
        overwrite = Overwrite.for_folder(settings.overwrite, shared=settings.retain_outputs is not None)
        roles.append(Role("retain", "--retain-model", settings.retain_model, runs, overwrite=overwrite))
    finished, models = run_roles(benchmark, roles, config)
    # Written once the roles ran: a run refused on stale outputs leaves an existing folder as it was.
    examples.to_parquet(out_dir / "examples.parquet", index=False)
    run_info = {
        "source": str(source),
        "forget": forget,
        "conventions": conventions.to_dict(),
        "models": models,
        "outputs": outputs,
        "complete": bool(finished),
    }
    (out_dir / "run.json").write_text(json.dumps(run_info, indent=2))
    if not finished:
        return {}
    return score_tofu(out_dir)


def score_tofu(eval_dir) -> dict:
    """Recompute ``per_example.parquet`` and ``summary.json`` of a TOFU evaluation folder from its outputs."""
    eval_dir = Path(eval_dir)
    for required in ("run.json", "examples.parquet"):
        if not (eval_dir / required).is_file():
            raise MissingInputError(f"{eval_dir} has no {required}: not a TOFU evaluation folder")
    run_info = read_json(eval_dir / "run.json", expect=dict)  # a damaged file: named, exit 2
    examples = read_parquet_frame(eval_dir / "examples.parquet")  # both files read before either is used
    conventions = recorded_conventions(run_info.get("conventions"), str(eval_dir / "run.json"))
    table = per_example_table(examples, eval_dir / "outputs", "model", conventions, generated=True)
    retain_table = None
    retain_answers = Path(run_info.get("outputs", {}).get("retain", eval_dir / "outputs" / "retain-answers"))
    if retain_answers.is_dir():
        retain_examples = examples[examples["set"].isin(RETAIN_MODEL_SETS)].reset_index(drop=True)
        retain_table = per_example_table(
            retain_examples,
            eval_dir / "outputs",
            "retain",
            conventions,
            generated=False,
            answers_dir=retain_answers,
        )
    table.to_parquet(eval_dir / "per_example.parquet", index=False)
    metrics = summarise_tofu(table, conventions, retain_table)
    summary = {
        "source": run_info["source"],
        "forget": run_info["forget"],
        "models": run_info["models"],
        "conventions": run_info["conventions"],
        "metrics": metrics,
        "open_unlearning": reference_summary(metrics),
    }
    (eval_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    (eval_dir / "TOFU_SUMMARY.json").write_text(json.dumps(summary["open_unlearning"], indent=4))
    return summary


__all__ = ["evaluate_tofu", "per_example_table", "run_tofu_model", "score_tofu", "tofu_examples"]
