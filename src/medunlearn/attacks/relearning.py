"""Relearning attack: fine-tune the unlearned model for a few steps, then ask the forgotten questions again.

Hu et al. (arXiv 2406.13356), Che et al. (arXiv 2502.05209) and Łucki et al. (arXiv 2409.18025) find that a
few gradient steps on a handful of related examples bring most of the "forgotten" knowledge back. Two kinds of
relearning data (docs/attacks.md, "Relearning"):

- ``forget-share``: every seen QA of a seeded share (default 25%) of the forget patients. The evaluation
  scores the *other* forget patients' seen QA and holdout QA: what comes back there was never trained on
  again. The share is drawn by patient, not by question, because one patient's QA restate each other (a
  reasoning answer quotes the factual answers it rests on, AMNESIA's ``R`` and ``F`` questions): relearning
  some of a patient's QA would teach the answers of the ones scored.
- ``same-disease-retain``: the retained patients' seen QA of the forget patients' disease(s), loosely related
  data a user could hold legitimately. Every forget QA is scored.

**One run through the steps [ours].** The attack trains once for ``max(steps)`` steps and evaluates at every
k in ``steps``. With a constant learning rate, no warm-up and a seeded data order, the model after step k of
that run is the model of a separate k-step run with the same seed (same batches, same optimiser state), so
the curve costs ``max(steps)`` steps instead of their sum and is exactly as deterministic. Evaluation inside
the run saves and restores the RNG state, so it does not change the training that follows.

The fine-tune is TRL's ``SFTTrainer`` on our QA rows (:func:`medunlearn.unlearn.run.qa_training_rows`, loss on
the answer only) with :func:`medunlearn.unlearn.run.default_sft_config` (CPU without CUDA), in the precision
its evaluations run in (``RunnerConfig.dtype``: float32 unless the caller says otherwise, as the study's
attack stage does with its ``dtype``; bf16 trains under autocast over float32 weights). A model
unlearned as a LoRA adapter is merged and relearned through a new LoRA adapter of the same rank.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from medunlearn.data_loading import load_split, retain_config_for
from medunlearn.errors import InputError, MedunlearnError
from medunlearn.evaluation.runner import RunnerConfig
from medunlearn.models import ModelArguments
from medunlearn.utils.numbers import positive_float
from medunlearn.utils.user_files import read_json

if TYPE_CHECKING:
    import pandas as pd

# pandas and the evaluation pipeline are imported by the functions that use them: `medunlearn attack --help`
# reads this module's defaults and must not pay for them.

RelearnData = Literal["forget-share", "same-disease-retain"]
RELEARN_DATA = ("forget-share", "same-disease-retain")
DEFAULT_STEPS = (5, 10, 20, 50)


class AttackInputError(MedunlearnError, ValueError):
    """An attack cannot run on what it was given (the message names the option, folder or config)."""


@dataclass
class RelearnConfig:
    """Settings of the relearning attack.

    Parameters:
        steps (`tuple[int, ...]`, *optional*, defaults to `(5, 10, 20, 50)`):
            Optimiser steps after which the model is evaluated (one run through all of them).
        data (`"forget-share"` or `"same-disease-retain"`, *optional*, defaults to `"forget-share"`):
            What the attacker fine-tunes on (see the module docstring).
        share (`float`, *optional*, defaults to `0.25`):
            With `forget-share`: the share of the forget patients whose seen QA are relearned (at least one
            patient, and at least one patient left to score).
        learning_rate (`float`, *optional*, defaults to `1e-5`):
            Constant learning rate (the order used to fine-tune 7B models; a tiny model trained from
            scratch needs 3e-4 to 1e-3).
        batch_size (`int`, *optional*, defaults to `4`):
            QA rows per step.
        seed (`int`, *optional*, defaults to `0`):
            Seeds the relearned share, the data order and the training.
    """

    steps: tuple[int, ...] = DEFAULT_STEPS
    data: RelearnData = "forget-share"
    share: float = 0.25
    learning_rate: float = 1e-5
    batch_size: int = 4
    seed: int = 0

    def __post_init__(self):
        self.steps = tuple(sorted(set(int(k) for k in self.steps)))
        if not self.steps or self.steps[0] < 1:
            raise AttackInputError(f"--relearn-steps must be positive integers, got {list(self.steps)}")
        if self.data not in RELEARN_DATA:
            raise AttackInputError(
                f"--relearn-data must be one of {', '.join(RELEARN_DATA)}, got {self.data!r}"
            )
        if not 0 < self.share < 1:
            raise AttackInputError(f"--relearn-share must be between 0 and 1, got {self.share}")
        # The option's own check, for the Python API and study files too: inf / nan / 0 would "relearn" into
        # NaN weights and a recovery of 0 that reads like a robust unlearning.
        try:
            positive_float(self.learning_rate)
        except argparse.ArgumentTypeError as error:
            raise AttackInputError(f"--relearn-learning-rate {error}") from None


def split_forget_share(
    forget_seen: pd.DataFrame, share: float, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(relearned, scored)``: every row of a seeded ``share`` of the patients (by ``patient_id``, sorted
    first, so row order does not matter), at least one patient, and the other patients' rows, at least one
    patient. No patient is on both sides (the module docstring says why).

    >>> import pandas as pd
    >>> rows = pd.DataFrame(
    ...     {"qa_id": [f"q{i}" for i in range(8)], "patient_id": [f"p{i // 2}" for i in range(8)]}
    ... )
    >>> relearned, scored = split_forget_share(rows, 0.25, seed=0)
    >>> len(relearned), len(scored), set(relearned.patient_id) & set(scored.patient_id)
    (2, 6, set())
    """
    patients = np.sort(forget_seen["patient_id"].astype(str).unique())
    if len(patients) < 2:
        raise AttackInputError(
            f"forget-share relearning needs at least 2 forget patients with seen QA (one to relearn, one to "
            f"score); the forget config has {len(patients)}; or use --relearn-data same-disease-retain"
        )
    count = min(max(1, round(share * len(patients))), len(patients) - 1)
    chosen = set(np.random.default_rng(seed).choice(patients, size=count, replace=False))
    is_chosen = forget_seen["patient_id"].astype(str).isin(chosen)
    return forget_seen[is_chosen].reset_index(drop=True), forget_seen[~is_chosen].reset_index(drop=True)


def same_disease_retain_rows(
    data_dir: str | Path, forget_config: str, diseases: Sequence[str]
) -> pd.DataFrame:
    """The retained patients' seen QA (the paired retain config's ``train`` split) of ``diseases``."""
    retain_config = retain_config_for(forget_config)
    retain = load_split(data_dir, retain_config).to_pandas()
    rows = retain[retain["disease"].isin(list(diseases))].reset_index(drop=True)
    if rows.empty:
        raise AttackInputError(
            f"{data_dir}: config {retain_config!r} has no retained patient of disease(s) "
            f"{', '.join(sorted(set(diseases)))}: same-disease-retain relearning has no data"
        )
    return rows


def relearning_sets(
    examples: pd.DataFrame, config: RelearnConfig, data_dir: str | Path | None = None, forget_config: str = ""
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(training QA rows, examples to score)`` for ``config.data``; ``examples`` is the populations table
    (``medunlearn.evaluation.load_populations``). The scored examples are forget rows only."""
    import pandas as pd

    from medunlearn.evaluation.populations import FORGET_HOLDOUT, FORGET_POPULATIONS, FORGET_SEEN

    forget = examples[examples["population"].isin(FORGET_POPULATIONS)]
    seen, holdout = (
        forget[forget["population"] == FORGET_SEEN],
        forget[forget["population"] == FORGET_HOLDOUT],
    )
    if config.data == "forget-share":
        relearned, scored_seen = split_forget_share(seen, config.share, config.seed)
        # the relearned patients' holdout QA are left out too: their seen answers state those facts
        relearned_patients = set(relearned["patient_id"].astype(str))
        scored_holdout = holdout[~holdout["patient_id"].astype(str).isin(relearned_patients)]
        scored = pd.concat([scored_seen, scored_holdout], ignore_index=True)
        return relearned, scored
    if data_dir is None:
        raise AttackInputError("same-disease-retain relearning needs the AMNESIA folder (data_dir)")
    rows = same_disease_retain_rows(data_dir, forget_config, forget["disease"].unique().tolist())
    return rows, forget.reset_index(drop=True)


def model_arguments_for(model_path: str | Path) -> ModelArguments:
    """Full fine-tuning for a full model; LoRA of the adapter's own rank and alpha for a LoRA adapter."""
    adapter = Path(model_path) / "adapter_config.json"
    if not adapter.is_file():
        return ModelArguments(str(model_path))
    settings = read_json(adapter, expect=dict, allow_non_finite=True)
    defaults = ModelArguments("")
    return ModelArguments(
        str(model_path),
        lora=True,
        lora_r=int(settings.get("r", defaults.lora_r)),
        lora_alpha=int(settings.get("lora_alpha", defaults.lora_alpha)),
    )


def _evaluate_at_steps_callback(steps, evaluate):
    """A ``TrainerCallback`` calling ``evaluate(k, model)`` after step k for every k in ``steps``, with the
    RNG state put back afterwards (evaluation must not change the rest of the run)."""
    import torch
    from transformers import TrainerCallback

    class EvaluateAtSteps(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step in steps:
                rng = torch.random.get_rng_state()
                evaluate(state.global_step, model)
                torch.random.set_rng_state(rng)
            return control

    return EvaluateAtSteps()


def relearning_attack(
    model_path: str | Path,
    train_rows: pd.DataFrame,
    scored_examples: pd.DataFrame,
    out_dir: str | Path,
    config: RelearnConfig | None = None,
    *,
    runner_config: RunnerConfig | None = None,
    name: str = "model",
    progress: bool = True,
) -> list[dict]:
    """Relearn ``model_path`` on ``train_rows`` (QA rows: ``question``, ``answer``) and evaluate
    ``scored_examples`` after every k in ``config.steps``, each into ``out_dir/relearn-k{k}`` (an evaluation
    folder, docs/evaluation.md). Returns one ``{"steps": k, "eval_dir": …, "summary": …}`` per k."""
    import datasets
    import torch
    from trl import SFTTrainer

    from medunlearn.chat import read_model_conventions, resolve_conventions
    from medunlearn.evaluation.pipeline import evaluate_on_examples
    from medunlearn.models import load_model
    from medunlearn.unlearn.run import default_sft_config, qa_training_rows
    from medunlearn.utils.progress import bar_without_logs

    config = config or RelearnConfig()
    if train_rows.empty:
        raise AttackInputError("relearning has no training rows")
    if scored_examples.empty:
        raise InputError("relearning has no examples to score")
    runner_config = runner_config or RunnerConfig()
    out_dir = Path(out_dir)
    model_args = model_arguments_for(model_path)
    conventions = resolve_conventions(read_model_conventions(model_path) or "medunlearn")
    torch.manual_seed(config.seed)
    model, tokenizer = load_model(model_args, merge_adapter=True)
    # The attack trains in the precision it evaluates in (the runner's dtype; docs/scaling.md, "Precision").
    sft_config = default_sft_config(model_args, out_dir / "relearn-trainer", dtype=runner_config.dtype)
    sft_config.max_steps = max(config.steps)
    sft_config.learning_rate = config.learning_rate
    sft_config.lr_scheduler_type = "constant"  # step k of this run == a separate k-step run (docstring)
    sft_config.warmup_steps = 0
    sft_config.weight_decay = 0.0
    sft_config.per_device_train_batch_size = config.batch_size
    sft_config.seed = sft_config.data_seed = config.seed
    sft_config.logging_steps = max(config.steps) + 1
    sft_config.disable_tqdm = not progress
    rows = datasets.Dataset.from_pandas(train_rows[["question", "answer"]].reset_index(drop=True))
    results: list[dict] = []

    def evaluate(step: int, trained) -> None:
        eval_dir = out_dir / f"relearn-k{step}"
        summary = evaluate_on_examples(
            (trained, tokenizer),
            scored_examples,
            eval_dir,
            name=f"{name} relearn k={step}",
            runner_config=runner_config,
            overwrite=True,
        )
        results.append({"steps": step, "eval_dir": str(eval_dir), "summary": summary})

    trainer = SFTTrainer(
        model=model,
        args=sft_config,
        train_dataset=qa_training_rows(rows, tokenizer, conventions, sft_config.max_length),
        processing_class=tokenizer,
        peft_config=model_args.lora_config(),
        callbacks=[_evaluate_at_steps_callback(set(config.steps), evaluate)],
    )
    bar_without_logs(trainer)
    trainer.train()
    trainer_dir = out_dir / "relearn-trainer"
    if trainer_dir.is_dir() and not any(trainer_dir.iterdir()):
        trainer_dir.rmdir()
    missing = [k for k in config.steps if k not in {r["steps"] for r in results}]
    if missing:  # the Trainer stops at max_steps; an early stop would leave a k unscored
        raise AttackInputError(f"relearning stopped before step(s) {missing}")
    return results


__all__ = [
    "DEFAULT_STEPS",
    "RELEARN_DATA",
    "AttackInputError",
    "RelearnConfig",
    "model_arguments_for",
    "relearning_attack",
    "relearning_sets",
    "same_disease_retain_rows",
    "split_forget_share",
]
