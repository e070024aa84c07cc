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
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.chat import warn_if_conventions_differ
from medunlearn.errors import MissingInputError
from medunlearn.evaluation.engines import check_engine_serves, make_engine
from medunlearn.evaluation.runner import (
    GENERATION,
    TEACHER_FORCED,
    RunnerConfig,
    outputs_current,
    outputs_fingerprint,
    read_outputs,
    run_model,
)
from medunlearn.models import check_model_name, load_model, resolve_model
from medunlearn.tofu.conventions import ConventionTokenizer, TofuConventions
from medunlearn.tofu.data import TofuInputError, load_tofu, tofu_splits
from medunlearn.tofu.scoring import (
    cut_at_stop_strings,
    reference_summary,
    rouge_recall,
    summarise_tofu,
    token_statistics,
)
from medunlearn.utils.digest import folder_weights_digest, start_folder_digest

GENERATED_SETS = ("forget", "retain", "real_authors", "world_facts")
RETAIN_MODEL_SETS = ("forget", "holdout")


def _set_examples(set_name: str, dataset, config: str) -> pd.DataFrame:
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
        counts = frame["perturbed_answer"].map(len).to_numpy()
        empty = np.flatnonzero(counts == 0)
        if len(empty):
            raise TofuInputError(f"config {config!r} row {int(empty[0])}: field 'perturbed_answer' is empty")
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
    return pd.concat(
        [_set_examples(name, load_tofu(source, config), config) for name, config in configs.items()],
        ignore_index=True,
    )


def rendering_key(conventions: TofuConventions) -> str:
    """A short hash of the rendering conventions (what the stored outputs depend on besides the runner's
    settings)."""
    import hashlib

    fields = (
        "chat_template",
        "system_prompt",
        "prompt_prefix",
        "user_start_tag",
        "user_end_tag",
        "assistant_start_tag",
    )
    payload = json.dumps({name: getattr(conventions, name) for name in fields}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def _tofu_settings(model, model_id: str | None, conventions: TofuConventions, runner_config):
    """The model id and runner settings of a TOFU run: the generation length is the convention's, and the
    rendering goes into the model id (the runner's fingerprint covers the model, the examples and its
    settings but not how prompts are rendered, so outputs of another rendering are never reused)."""
    runner_config = runner_config or RunnerConfig()
    runner_config = RunnerConfig(**{**runner_config.__dict__, "max_new_tokens": conventions.max_new_tokens})
    model_id = model_id or str(
        getattr(getattr(model, "config", None), "name_or_path", "") or "in-memory model"
    )
    return f"{model_id} | rendering {rendering_key(conventions)}", runner_config


def run_tofu_model(
    model,
    tokenizer,
    examples: pd.DataFrame,
    outputs_dir,
    role: str,
    conventions: TofuConventions,
    runner_config: RunnerConfig | None = None,
    *,
    generate: bool = True,
    model_id: str | None = None,
    overwrite: bool | str = False,
    weights: str | None = None,
    answers_dir=None,
    checkpoint: str | None = None,
) -> bool:
    """The runner's passes for one model (``role``): teacher-forced over every example into
    ``outputs_dir/<role>-answers`` (or ``answers_dir``), greedy over the questions into
    ``outputs_dir/<role>-questions``. ``weights``: the digest of the folder the model was loaded from
    (``run_model``'s; ``None`` hashes the tensors). ``checkpoint``: that folder, which a vLLM generation
    engine (``runner_config.engine``) serves; ``None`` serves the in-memory model from a temporary copy."""
    model_id, runner_config = _tofu_settings(model, model_id, conventions, runner_config)
    rendering = ConventionTokenizer(tokenizer, conventions)
    outputs_dir = Path(outputs_dir)
    finished = run_model(
        model,
        rendering,
        examples,
        Path(answers_dir) if answers_dir is not None else outputs_dir / f"{role}-answers",
        runner_config,
        model_id=model_id,
        passes=(TEACHER_FORCED,),
        overwrite=overwrite,
        weights=weights,
    )
    if generate:
        questions = examples[(examples["variant"] == "answer") & examples["set"].isin(GENERATED_SETS)]
        with make_engine(runner_config, model, checkpoint) as engine:  # a vLLM server stops here
            finished &= run_model(
                model,
                rendering,
                questions.reset_index(drop=True),
                outputs_dir / f"{role}-questions",
                runner_config,
                model_id=model_id,
                passes=(GENERATION,),
                overwrite=overwrite,
                weights=weights,
                engine=engine,
            )
    return finished


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
    if (
        isinstance(model, str) and model == "tiny-llama"
    ):  # fresh, on a tokenizer of the benchmark's text: smoke runs
        texts = examples["question"].tolist() + examples["answer"].tolist()
        return (*load_model("tiny-llama", texts=texts, flag=flag), None)
    return resolve_model(model, tokenizer, flag)


def evaluate_tofu(
    model,
    source,
    forget: str,
    out_dir,
    *,
    tokenizer=None,
    retain_model=None,
    conventions: TofuConventions | None = None,
    runner_config: RunnerConfig | None = None,
    overwrite: bool = False,
    retain_outputs=None,
) -> dict:
    """Evaluate ``model`` (a path or name, or an object with ``tokenizer=``) on a TOFU-format ``source``.

    ``tiny-llama`` builds a fresh tiny model on a tokenizer of the benchmark's text (smoke runs only).

    ``retain_model`` (a path or a ``(model, tokenizer)`` pair) is a model fine-tuned without the forget set;
    it enables forget quality and privleak. ``retain_outputs`` is where its teacher-forced outputs live
    (default ``out_dir/outputs/retain-answers``): evaluations of several models against one retain model,
    data, forget config and conventions given the same folder score the retain model once, as the reference
    reads its saved retain logs (a retain model folder whose outputs are all there is not even loaded;
    ``overwrite`` leaves that folder alone unless it is stale). Returns the summary (also written to
    ``out_dir/summary.json``).
    """
    conventions = conventions or TofuConventions()
    for flag, value in (("--model", model), ("--retain-model", retain_model)):
        if isinstance(value, (str, Path)) and str(value) != "tiny-llama":
            check_model_name(str(value), flag)  # before any work: a bad name fails at once, plainly
    examples = tofu_examples(source, forget)  # validates the data before any model loads
    if str(model) != "tiny-llama":  # built in memory here: it never goes to a server at a URL
        check_engine_serves(runner_config or RunnerConfig(), {"--model": model})  # before anything is written
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    examples.to_parquet(out_dir / "examples.parquet", index=False)
    # A folder's weights are hashed from its files, once (cached beside it), while the model loads.
    digest = start_folder_digest(model) if isinstance(model, (str, Path)) else None
    loaded, loaded_tokenizer, path = _resolve(model, tokenizer, examples, "--model")
    if path is not None:
        warn_if_conventions_differ(path, conventions, "--model")
    models = {"model": path or "in-memory model"}
    finished = run_tofu_model(
        loaded,
        loaded_tokenizer,
        examples,
        out_dir / "outputs",
        "model",
        conventions,
        runner_config,
        model_id=path,
        overwrite=overwrite,
        weights=digest.result() if digest is not None and path is not None else None,
        checkpoint=path,
    )
    outputs = {}
    if retain_model is not None:
        retain_answers = Path(retain_outputs or out_dir / "outputs" / "retain-answers")
        outputs["retain"] = str(retain_answers)
        retain_examples = examples[examples["set"].isin(RETAIN_MODEL_SETS)]
        shared = retain_outputs is not None
        if _retain_outputs_current(retain_model, retain_examples, retain_answers, conventions, runner_config):
            models["retain"] = str(retain_model)
        else:
            digest = start_folder_digest(retain_model) if isinstance(retain_model, (str, Path)) else None
            retain, retain_tokenizer, retain_path = _resolve(retain_model, None, examples, "--retain-model")
            if retain_path is not None:
                warn_if_conventions_differ(retain_path, conventions, "--retain-model")
            models["retain"] = retain_path or "in-memory model"
            finished &= run_tofu_model(
                retain,
                retain_tokenizer,
                retain_examples,
                out_dir / "outputs",
                "retain",
                conventions,
                runner_config,
                generate=False,
                model_id=retain_path,
                overwrite="stale" if overwrite and shared else overwrite,
                weights=digest.result() if digest is not None and retain_path is not None else None,
                answers_dir=retain_answers,
            )
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


def _retain_outputs_current(retain_model, examples, folder: Path, conventions, runner_config) -> bool:
    """Whether ``folder`` holds every teacher-forced output of a retain model named by its folder (its
    weights digest gives the fingerprint without loading it)."""
    if not isinstance(retain_model, (str, Path)) or str(retain_model) == "tiny-llama":
        return False
    weights = folder_weights_digest(retain_model, cached_only=True)  # never hashed: no complete outputs
    if weights is None:
        return False
    model_id, config = _tofu_settings(None, str(retain_model), conventions, runner_config)
    fingerprint = outputs_fingerprint(model_id, examples, config, weights, passes=(TEACHER_FORCED,))
    return outputs_current(folder, fingerprint, (TEACHER_FORCED,))


def score_tofu(eval_dir) -> dict:
    """Recompute ``per_example.parquet`` and ``summary.json`` of a TOFU evaluation folder from its outputs."""
    eval_dir = Path(eval_dir)
    for required in ("run.json", "examples.parquet"):
        if not (eval_dir / required).is_file():
            raise MissingInputError(f"{eval_dir} has no {required}: not a TOFU evaluation folder")
    run_info = json.loads((eval_dir / "run.json").read_text())
    conventions = TofuConventions.from_dict(run_info["conventions"])
    examples = pd.read_parquet(eval_dir / "examples.parquet")
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
