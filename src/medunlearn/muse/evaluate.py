"""``evaluate_muse``: a MUSE-format benchmark through the one evaluation runner and its role steps.

The rows :func:`~medunlearn.muse.scoring.muse_examples` gives become runner examples rendered as raw text
(:mod:`medunlearn.muse.rendering`, which also says what each row's question and answer are). The model
runs three folders: the knowmem questions generated (``knowmem_max_new_tokens``), the verbmem prompts
generated (``verbmem_max_new_tokens``) and their ``" " + gt`` teacher-forced (argmax matches), and the
privleak forget and holdout texts teacher-forced (log-probs). Stop strings cut the knowmem generations when
they are scored, which gives the text the reference's stopping criteria give (greedy decoding continues a
row the same way whether or not it is stopped later). The retain model, when given, runs the privleak pass
only: its Min-K% AUC normalises PrivLeak (:func:`~medunlearn.muse.scoring.privleak_auc`). Every metric is
then computed from the stored outputs (:func:`score_muse_folder`, no model).

An evaluation folder::

    run.json                     source, conventions, models, the retain folder, complete
    examples.parquet             example_id, task, row, question, answer, reference
    ground_truths.parquet        example_id, ground_truth: the reference's ROUGE ground truths (tokenizer)
    outputs/model-knowmem/       runner outputs: greedy generations of the knowmem questions
    outputs/model-verbmem/       runner outputs: greedy continuations and teacher-forced ``" " + gt``
    outputs/<role>-privleak/     runner outputs: teacher-forced privleak texts (role: model, retain)
    per_example.parquet          per row: generation, ground truth, ROUGE-L F1, extraction strength, Min-K%
    summary.json                 {"metrics": ours, "open_unlearning": reference names, "conventions": ...}
    MUSE_SUMMARY.json            the reference's names -> values, as OpenUnlearning writes its summary
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.chat import recorded_conventions
from medunlearn.errors import MissingInputError
from medunlearn.evaluation.outputs_folder import GENERATION, PASSES, TEACHER_FORCED, read_outputs
from medunlearn.evaluation.roles import (
    Role,
    RoleRun,
    check_role_names,
    model_name,
    named_model,
    resolve_or_build,
    run_roles,
)
from medunlearn.evaluation.settings import Overwrite, RunnerConfig
from medunlearn.muse.conventions import MUSE_PRESETS, MuseConventions
from medunlearn.muse.rendering import RENDERING_ID, RawTextRendering, clean_up_spaces, reference_ground_truths
from medunlearn.muse.scoring import MuseOutputs, min_k_row_scores, muse_examples, privleak_auc, score_muse
from medunlearn.utils.files import relocated, staged_overwrite
from medunlearn.utils.user_files import read_json, read_parquet_frame

KNOWMEM = ("knowmem_forget", "knowmem_retain")
VERBMEM = "verbmem"
PRIVLEAK = ("privleak_forget", "privleak_holdout")
TASKS = (*KNOWMEM, VERBMEM, *PRIVLEAK)
GROUND_TRUTHS = "ground_truths.parquet"
# What OpenUnlearning calls its MUSE evaluator's summary: "<name>_SUMMARY.json" with name "MUSE"
# (open-unlearning@d3d7cf9 src/evals/base.py:19-22, src/evals/muse.py:6).
SUMMARY_FILE = "MUSE_SUMMARY.json"


def muse_runner_examples(folder) -> pd.DataFrame:
    """One runner example per MUSE row, in :func:`muse_examples`' order (the question / answer of each task:
    :mod:`medunlearn.muse.rendering`); ``reference`` is the row's own ROUGE reference (``""`` for privleak).
    Reading the folder checks it (a named error for a missing split or field)."""
    rows = muse_examples(folder)
    frames = []
    for task in TASKS:
        items = rows[task]
        if task in PRIVLEAK:
            question, answer, reference = [""] * len(items), [r["text"] for r in items], [""] * len(items)
        else:
            question, reference = [r["prompt"] for r in items], [r["reference"] for r in items]
            answer = [" " + r for r in reference] if task == VERBMEM else [""] * len(items)
        frames.append(
            pd.DataFrame(
                {
                    "example_id": [f"{task}/{i}" for i in range(len(items))],
                    "task": task,
                    "row": np.arange(len(items)),
                    "question": question,
                    "answer": answer,
                    "reference": reference,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _of(examples: pd.DataFrame, *tasks: str) -> pd.DataFrame:
    return examples[examples["task"].isin(tasks)].reset_index(drop=True)


class Muse:
    """The MUSE mode of the shared role steps (:mod:`medunlearn.evaluation.roles`): raw-text rendering, whose
    id enters the model's (the runner's fingerprint does not cover the rendering, so outputs rendered
    otherwise are never reused); ``tiny-llama`` is built fresh on a tokenizer of the benchmark's text.

    ``conventions`` are MUSE's, not a chat rendering: a checkpoint's recorded chat conventions are not
    compared with them (:func:`~medunlearn.evaluation.roles.run_roles` with ``warn=False``)."""

    def __init__(self, conventions: MuseConventions, examples: pd.DataFrame | None):
        self.conventions = conventions
        self.examples = examples

    def resolve(self, model, tokenizer, flag: str):
        return _resolve(model, tokenizer, self.examples, flag)

    def rendering(self, tokenizer):
        return RawTextRendering(tokenizer)

    def model_id(self, path, model, role: str) -> str:
        return f"{model_name(path, model)} | rendering {RENDERING_ID}"

    def named(self, model) -> bool:
        return named_model(model)

    def runner_config(self, runner_config: RunnerConfig | None) -> RunnerConfig:
        """The runner's settings of a MUSE run: the role's generation length is verbmem's (knowmem's folder
        sets its own)."""
        return replace(
            runner_config or RunnerConfig(), max_new_tokens=self.conventions.verbmem_max_new_tokens
        )


def _resolve(model, tokenizer, examples: pd.DataFrame, flag: str):
    return resolve_or_build(
        model,
        tokenizer,
        flag,
        lambda: examples["question"].tolist() + examples["answer"].tolist() + examples["reference"].tolist(),
    )


def model_runs(examples: pd.DataFrame, outputs_dir: Path, conventions: MuseConventions) -> list[RoleRun]:
    """The model's folders (module docstring): knowmem generated, verbmem generated and teacher-forced,
    privleak teacher-forced."""
    return [
        RoleRun(
            outputs_dir / "model-knowmem",
            _of(examples, *KNOWMEM),
            (GENERATION,),
            max_new_tokens=conventions.knowmem_max_new_tokens,
        ),
        RoleRun(outputs_dir / "model-verbmem", _of(examples, VERBMEM), PASSES),
        RoleRun(outputs_dir / "model-privleak", _of(examples, *PRIVLEAK), (TEACHER_FORCED,)),
    ]


def write_ground_truths(tokenizer, examples: pd.DataFrame, path: Path) -> None:
    """``ground_truths.parquet``: the reference's ROUGE ground truth of every knowmem and verbmem row (its
    labels: the prompt and gold answer of a question, the ``" " + gt`` tokens of a completion)."""
    rows = _of(examples, *KNOWMEM, VERBMEM)
    whole = rows["task"].isin(KNOWMEM).to_numpy()
    continuations = np.where(whole, rows["reference"], rows["answer"]).tolist()
    truths = reference_ground_truths(tokenizer, rows["question"].tolist(), continuations, whole.tolist())
    pd.DataFrame({"example_id": rows["example_id"], "ground_truth": truths}).to_parquet(path, index=False)


@dataclass
class MuseEvaluation:
    """Everything :func:`evaluate_muse` takes besides the model, data and folder: ``tokenizer`` (with a
    model object), ``retain_model``, ``conventions`` (default: the ``medunlearn`` preset),
    ``runner_config``, ``overwrite`` and ``retain_outputs`` (the retain model's privleak folder, default
    ``out_dir/outputs/retain-privleak``; share it between evaluations against one retain model)."""

    tokenizer: object = None
    retain_model: object = None
    conventions: MuseConventions | None = None
    runner_config: RunnerConfig | None = None
    overwrite: bool = False
    retain_outputs: str | Path | None = None


def _retain_folder(out_dir: Path, settings: MuseEvaluation) -> Path | None:
    """The retain model's privleak folder (``None`` without a retain model)."""
    if settings.retain_model is None:
        return None
    return Path(settings.retain_outputs or out_dir / "outputs" / "retain-privleak")


def _roles(model, examples: pd.DataFrame, out_dir: Path, settings: MuseEvaluation, conventions) -> list[Role]:
    outputs_dir = out_dir / "outputs"
    roles = [
        Role(
            "model",
            "--model",
            model,
            model_runs(examples, outputs_dir, conventions),
            settings.tokenizer,
            Overwrite.for_folder(settings.overwrite, shared=False),
        )
    ]
    folder = _retain_folder(out_dir, settings)
    if folder is not None:
        runs = [RoleRun(folder, _of(examples, *PRIVLEAK), (TEACHER_FORCED,))]
        overwrite = Overwrite.for_folder(settings.overwrite, shared=settings.retain_outputs is not None)
        roles.append(Role("retain", "--retain-model", settings.retain_model, runs, overwrite=overwrite))
    return roles


def evaluate_muse(model, source, out_dir, **settings) -> dict:
    """Evaluate ``model`` (a folder or name, ``tiny-llama``, or an object with ``tokenizer=``) on the
    MUSE-format folder ``source`` into ``out_dir``; ``settings`` are :class:`MuseEvaluation`'s fields.

    The folder is read and checked before any model loads. A role whose outputs are all in their folders is
    not loaded (a named model), and a rerun resumes where a run stopped. Returns the summary (also in
    ``out_dir/summary.json``), or ``{}`` when batches are left (``stop_after_batches``).
    """
    settings = MuseEvaluation(**settings)
    conventions = settings.conventions or MUSE_PRESETS["medunlearn"]
    models = {"--model": model, "--retain-model": settings.retain_model}
    check_role_names(Muse(conventions, None), settings.runner_config or RunnerConfig(), models, ("--model",))
    examples = muse_runner_examples(source)
    benchmark = Muse(conventions, examples)
    out_dir = Path(out_dir)
    # --overwrite of a folder holding outputs: staged beside it, swapped in when done (evaluate_unlearning).
    with staged_overwrite(out_dir, settings.overwrite, records=["run.json"]) as work:
        settings.retain_outputs = relocated(settings.retain_outputs, out_dir, work)
        return _evaluate_muse_into(work, model, source, settings, benchmark)


def _evaluate_muse_into(out_dir: Path, model, source, settings: MuseEvaluation, benchmark) -> dict:
    """:func:`evaluate_muse`'s run into ``out_dir``: the evaluation folder, or the staging folder that
    replaces it."""
    examples, conventions = benchmark.examples, benchmark.conventions
    config = benchmark.runner_config(settings.runner_config)
    out_dir.mkdir(parents=True, exist_ok=True)
    ground_truths = out_dir / GROUND_TRUTHS

    def after_load(role: Role, loaded) -> None:
        if role.name == "model":
            write_ground_truths(loaded.tokenizer, examples, ground_truths)

    finished, names = run_roles(
        benchmark,
        _roles(model, examples, out_dir, settings, conventions),
        config,
        after_load=after_load,
        # The ground truths come from the model's tokenizer: a folder without them loads the model again.
        always_load=() if ground_truths.is_file() else ("model",),
        warn=False,  # a checkpoint's chat conventions say nothing of raw-text rendering
    )
    examples.to_parquet(out_dir / "examples.parquet", index=False)  # once the roles ran (see evaluate_tofu)
    retain = _retain_folder(out_dir, settings)
    run_info = {
        "source": str(source),
        "conventions": conventions.to_dict(),
        "models": names,
        "outputs": {} if retain is None else {"retain": str(retain)},
        "complete": bool(finished),
    }
    (out_dir / "run.json").write_text(json.dumps(run_info, indent=2))
    return score_muse_folder(out_dir) if finished else {}


def _read_folder(eval_dir: Path) -> tuple[dict, pd.DataFrame]:
    for required in ("run.json", "examples.parquet"):
        if not (eval_dir / required).is_file():
            raise MissingInputError(f"{eval_dir} has no {required}: not a MUSE evaluation folder")
    return read_json(eval_dir / "run.json", expect=dict), read_parquet_frame(eval_dir / "examples.parquet")


def _references(eval_dir: Path, examples: pd.DataFrame, conventions: MuseConventions) -> pd.Series:
    """The ROUGE reference of every knowmem and verbmem row, by example id: the row's own, or the
    reference's ground truth (``ground_truths.parquet``) under ``reference_ground_truth``."""
    if not conventions.reference_ground_truth:
        return examples.set_index("example_id")["reference"]
    path = eval_dir / GROUND_TRUTHS
    if not path.is_file():
        raise MissingInputError(
            f"{path} is missing: rerun the evaluation to write it (the model's tokenizer)"
        )
    return read_parquet_frame(path).set_index("example_id")["ground_truth"]


def _task_outputs(outputs_dir: Path, examples: pd.DataFrame, folder: str, tasks) -> dict[str, pd.DataFrame]:
    """A folder's outputs split by task, each in its rows' order."""
    rows = _of(examples, *tasks)
    outputs = read_outputs(outputs_dir / folder, rows["example_id"])
    return {task: outputs[(rows["task"] == task).to_numpy()].reset_index(drop=True) for task in tasks}


def read_muse_outputs(eval_dir, examples: pd.DataFrame, conventions: MuseConventions) -> MuseOutputs:
    """The model's :class:`MuseOutputs` from an evaluation folder's stored outputs (no model)."""
    eval_dir = Path(eval_dir)
    outputs_dir = eval_dir / "outputs"
    knowmem = _task_outputs(outputs_dir, examples, "model-knowmem", KNOWMEM)
    verbmem = _task_outputs(outputs_dir, examples, "model-verbmem", (VERBMEM,))[VERBMEM]
    privleak = _task_outputs(outputs_dir, examples, "model-privleak", PRIVLEAK)
    references = _references(eval_dir, examples, conventions)

    def generations(frame: pd.DataFrame) -> list[str]:
        texts = frame["generated_text"].astype(str).tolist()
        return [clean_up_spaces(text) for text in texts] if conventions.clean_up_decodes else texts

    def reference(frame: pd.DataFrame) -> list[str]:
        return references.loc[frame["example_id"]].astype(str).tolist()

    return MuseOutputs(
        knowmem_forget_generations=generations(knowmem["knowmem_forget"]),
        knowmem_forget_references=reference(knowmem["knowmem_forget"]),
        knowmem_retain_generations=generations(knowmem["knowmem_retain"]),
        knowmem_retain_references=reference(knowmem["knowmem_retain"]),
        verbmem_generations=generations(verbmem),
        verbmem_references=reference(verbmem),
        verbmem_argmax_match=[list(row) for row in verbmem["token_is_argmax"]],
        privleak_forget_logprobs=list(privleak["privleak_forget"]["token_logprobs"]),
        privleak_holdout_logprobs=list(privleak["privleak_holdout"]["token_logprobs"]),
    )


def _retain_auc(run_info: dict, examples: pd.DataFrame, conventions: MuseConventions) -> float | None:
    """The retain model's Min-K% AUC from its privleak folder (``None`` without a retain model)."""
    folder = run_info.get("outputs", {}).get("retain")
    if folder is None:
        return None
    privleak = _task_outputs(Path(folder).parent, examples, Path(folder).name, PRIVLEAK)
    return privleak_auc(
        list(privleak["privleak_forget"]["token_logprobs"]),
        list(privleak["privleak_holdout"]["token_logprobs"]),
        conventions,
    )


def per_example_table(
    examples: pd.DataFrame, outputs: MuseOutputs, scored: dict, conventions: MuseConventions
) -> pd.DataFrame:
    """One row per example: the scored generation and its ROUGE reference, ROUGE-L F1 (knowmem, verbmem),
    extraction strength (verbmem) and the Min-K% score (privleak; higher: less likely a member)."""
    per_row = scored["per_example"]
    columns = {
        "knowmem_forget": {
            "generated_text": outputs.knowmem_forget_generations,
            "ground_truth": outputs.knowmem_forget_references,
            "rouge_l_f1": per_row["knowmem_f"],
        },
        "knowmem_retain": {
            "generated_text": outputs.knowmem_retain_generations,
            "ground_truth": outputs.knowmem_retain_references,
            "rouge_l_f1": per_row["knowmem_r"],
        },
        VERBMEM: {
            "generated_text": outputs.verbmem_generations,
            "ground_truth": outputs.verbmem_references,
            "rouge_l_f1": per_row["verbmem_f"],
            "extraction_strength": per_row["extraction_strength"],
        },
        "privleak_forget": {"min_k_score": min_k_row_scores(outputs.privleak_forget_logprobs, conventions)},
        "privleak_holdout": {"min_k_score": min_k_row_scores(outputs.privleak_holdout_logprobs, conventions)},
    }
    frames = [
        pd.DataFrame({"example_id": _of(examples, task)["example_id"], **values})
        for task, values in columns.items()
    ]
    table = examples[["example_id", "task", "row"]].merge(pd.concat(frames), on="example_id", how="left")
    return table


def score_muse_folder(eval_dir) -> dict:
    """Recompute ``per_example.parquet``, ``summary.json`` and ``MUSE_SUMMARY.json`` of a MUSE evaluation
    folder from its stored outputs (no model)."""
    eval_dir = Path(eval_dir)
    run_info, examples = _read_folder(eval_dir)
    conventions = recorded_conventions(
        run_info.get("conventions"), str(eval_dir / "run.json"), kind=MuseConventions
    )
    outputs = read_muse_outputs(eval_dir, examples, conventions)
    scored = score_muse(outputs, conventions, _retain_auc(run_info, examples, conventions))
    per_example_table(examples, outputs, scored, conventions).to_parquet(eval_dir / "per_example.parquet")
    summary = {
        "source": run_info["source"],
        "models": run_info["models"],
        "conventions": scored["conventions"],
        "metrics": scored["metrics"],
        "open_unlearning": scored["open_unlearning"],
    }
    (eval_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    # As the reference writes its summary: metrics without a value left out, names sorted, indent 4
    # (open-unlearning@d3d7cf9 src/evals/base.py:35-39, 59-61).
    reference = {
        name: value for name, value in sorted(summary["open_unlearning"].items()) if value is not None
    }
    (eval_dir / SUMMARY_FILE).write_text(json.dumps(reference, indent=4))
    return summary


__all__ = [
    "Muse",
    "MuseEvaluation",
    "evaluate_muse",
    "muse_runner_examples",
    "per_example_table",
    "read_muse_outputs",
    "score_muse_folder",
]
