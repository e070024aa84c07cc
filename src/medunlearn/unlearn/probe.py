"""Evaluation during unlearning [ours]: a small probe set scored every N steps, and the rule that picks the
step to keep (docs/methods/index.md, "Evaluation during unlearning").

With ``eval_probe_steps = N`` (``UnlearningConfig``), before the first step and every N steps (and at the last
step) the trainer scores a probe set drawn once, seeded by ``seed``:

- ``probe_patients`` forget patients (all their QA in the forget set) and ``probe_patients`` retained patients
  (all their QA in the retain set);
- each question answered by greedy generation of at most ``probe_max_new_tokens`` tokens, scored with the
  evaluation's answer similarity (ROUGE-L F1, ``medunlearn.metrics.similarity``). This is the evaluation's
  generation pass shortened, not its teacher-forced pass, and never a loss-based proxy;
- ``probe_afe``: AFE of the forget probe against its step-0 answers (``metrics.answer_forgetting``);
  ``probe_retain_mu``: MU of the retain probe (``medunlearn.metrics.model_utility``, QA-type balanced);
  ``probe_retain_mu_drop``: step-0 MU minus this step's.

They are logged through the Trainer's ``log`` (``state.log_history``, every logger). The rule
(:func:`select_probe_step`): among the probed steps after step 0 whose ``probe_retain_mu_drop`` is at most
``max_retain_mu_drop``, the one with the highest ``probe_afe`` (the earliest on a tie). Its weights are saved
(safetensors) in ``OUTPUT_DIR/best/``; the final model stays in ``OUTPUT_DIR``. When no probed step stays
within the bound, ``best/`` is not written and the record says so (``rule_met: false``).

>>> history = [
...     {"step": 0, "probe_afe": 0.0, "probe_retain_mu": 0.80},
...     {"step": 5, "probe_afe": 0.40, "probe_retain_mu": 0.79},
...     {"step": 10, "probe_afe": 0.90, "probe_retain_mu": 0.60},
... ]
>>> choice = select_probe_step(history, max_retain_mu_drop=0.05)
>>> choice.step, choice.rule_met
(5, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

RULE = (
    "highest probe AFE among the probed steps after step 0 whose retain-MU drop from step 0 is at most "
    "max_retain_mu_drop (earliest step on a tie)"
)


@dataclass(frozen=True)
class ProbeChoice:
    """The probed step the rule keeps (``step is None`` when no step after 0 stays within the bound)."""

    step: int | None
    probe_afe: float | None
    probe_retain_mu: float | None
    probe_retain_mu_drop: float | None
    rule_met: bool

    def to_dict(self) -> dict:
        return asdict(self)


def select_probe_step(history: Sequence[dict], max_retain_mu_drop: float) -> ProbeChoice:
    """Apply the rule (module docstring) to probe records ``{"step", "probe_afe", "probe_retain_mu"}``; the
    record of step 0 gives the reference MU. An AFE that is NaN (nothing known before: no answer to forget) is
    never chosen."""
    records = sorted(history, key=lambda record: record["step"])
    if not records or records[0]["step"] != 0:
        raise ValueError("the probe history must start with step 0 (the model before unlearning)")
    start_mu = records[0]["probe_retain_mu"]
    best = None
    for record in records[1:]:
        afe, drop = record["probe_afe"], start_mu - record["probe_retain_mu"]
        if afe is None or not math.isfinite(afe) or drop > max_retain_mu_drop + 1e-12:
            continue
        if best is None or afe > best[0]["probe_afe"]:
            best = (record, drop)
    if best is None:
        return ProbeChoice(None, None, None, None, rule_met=False)
    record, drop = best
    return ProbeChoice(record["step"], record["probe_afe"], record["probe_retain_mu"], drop, rule_met=True)


def probe_patient_rows(dataset, n_patients: int, seed: int, patient_column: str = "patient_id") -> list[int]:
    """Row indices of ``n_patients`` patients of ``dataset`` (a seeded draw over its sorted patient ids), all
    their rows; every row when the dataset has no patient column."""
    if patient_column not in dataset.column_names:
        return list(range(min(len(dataset), n_patients * 6)))
    patients = np.asarray(dataset[patient_column], dtype=str)
    unique = np.unique(patients)
    if len(unique) > n_patients:
        unique = np.sort(np.random.default_rng(seed).choice(unique, size=n_patients, replace=False))
    return np.flatnonzero(np.isin(patients, unique)).tolist()


@dataclass
class ProbeSet:
    """The probe's questions, gold answers and QA types, for the forget and the retain part."""

    forget_questions: list[str]
    forget_answers: list[str]
    retain_questions: list[str]
    retain_answers: list[str]
    retain_types: list[str]
    forget_patients: int
    retain_patients: int

    @classmethod
    def draw(cls, forget, retain, config) -> ProbeSet:
        """The probe of ``config`` (an ``UnlearningConfig``) from the raw forget and retain datasets."""

        def part(dataset):
            if dataset is None or len(dataset) == 0:
                return [], [], [], 0
            rows = dataset.select(probe_patient_rows(dataset, config.probe_patients, config.seed))
            types = rows["qa_type"] if "qa_type" in rows.column_names else ["all"] * len(rows)
            patients = len(set(rows["patient_id"])) if "patient_id" in rows.column_names else 0
            return list(rows[config.question_column]), list(rows[config.answer_column]), list(types), patients

        fq, fa, _, fp = part(forget)
        rq, ra, rt, rp = part(retain)
        return cls(fq, fa, rq, ra, rt, fp, rp)

    def describe(self) -> dict:
        return {
            "forget_patients": self.forget_patients,
            "forget_questions": len(self.forget_questions),
            "retain_patients": self.retain_patients,
            "retain_questions": len(self.retain_questions),
        }


def score_answers(model, tokenizer, questions, answers, conventions, max_new_tokens: int) -> np.ndarray:
    """Similarity of the model's greedy answers to the gold ones (the evaluation's ROUGE-L F1)."""
    from medunlearn.chat import render_prompts
    from medunlearn.generation import generate_texts
    from medunlearn.metrics.similarity import answer_similarity

    if not questions:
        return np.zeros(0)
    prompts = render_prompts(tokenizer, questions, conventions)
    predictions = generate_texts(model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=16)
    return answer_similarity(predictions, answers)["similarity"]


def probe_metrics(probe: ProbeSet, model, tokenizer, conventions, max_new_tokens: int, start=None) -> dict:
    """``probe_afe``, ``probe_retain_mu`` (and the raw forget similarities, to pair later steps with step 0).

    ``start``: step 0's result (``None`` at step 0, where AFE is 0 by definition)."""
    from medunlearn.metrics.answer_forgetting import answer_forgetting
    from medunlearn.metrics.model_utility import model_utility

    forget = score_answers(
        model, tokenizer, probe.forget_questions, probe.forget_answers, conventions, max_new_tokens
    )
    retain = score_answers(
        model, tokenizer, probe.retain_questions, probe.retain_answers, conventions, max_new_tokens
    )
    mu = model_utility(retain, probe.retain_types)["model_utility"] if len(retain) else float("nan")
    if start is None:
        afe = 0.0
    elif len(forget):
        afe = answer_forgetting(forget, start["forget_similarity"])["answer_forgetting"]
    else:
        afe = float("nan")
    return {"probe_afe": float(afe), "probe_retain_mu": float(mu), "forget_similarity": forget}


class ProbeCallback:
    """Scores the probe at step 0, every ``eval_probe_steps`` steps and at the last step; logs the metrics
    through ``trainer.log`` and saves the rule's best step so far into ``OUTPUT_DIR/best/``.

    A ``transformers.TrainerCallback`` (built by :func:`make_probe_callback`, so that this module imports
    transformers only when probing is on). ``trainer.probe_record`` holds the history and the choice.
    """

    def __init__(self, trainer, probe: ProbeSet):
        self.trainer = trainer
        self.probe = probe
        self.start: dict | None = None
        self.history: list[dict] = []
        self.saved_step: int | None = None

    def _score(self, step: int) -> None:
        trainer, args = self.trainer, self.trainer.args
        model = trainer.accelerator.unwrap_model(trainer.model)
        result = probe_metrics(
            self.probe,
            model,
            trainer.processing_class,
            trainer.conventions,
            args.probe_max_new_tokens,
            self.start,
        )
        if self.start is None:
            self.start = result
        record = {
            "step": step,
            "probe_afe": round(result["probe_afe"], 6),
            "probe_retain_mu": round(result["probe_retain_mu"], 6),
            "probe_retain_mu_drop": round(self.start["probe_retain_mu"] - result["probe_retain_mu"], 6),
        }
        self.history.append(record)
        trainer.log({k: v for k, v in record.items() if k != "step"})
        choice = select_probe_step(self.history, args.max_retain_mu_drop)
        if choice.step == step and step > 0:
            self._save_best(step)

    def _save_best(self, step: int) -> None:
        from pathlib import Path

        best = Path(self.trainer.args.output_dir) / "best"
        self.trainer.save_model(str(best))
        (best / "training_args.bin").unlink(missing_ok=True)
        self.saved_step = step

    def on_train_begin(self, args, state, control, **kwargs):
        if not self.history:
            self._score(0)

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if step % args.eval_probe_steps == 0 or step == state.max_steps:
            self._score(step)

    def record(self) -> dict:
        """What the model card and ``probe.json`` hold: the rule, the probe's size, every probed step, the
        choice and where its weights are."""
        args = self.trainer.args
        choice = select_probe_step(self.history, args.max_retain_mu_drop) if self.history else None
        return {
            "rule": RULE,
            "max_retain_mu_drop": args.max_retain_mu_drop,
            "eval_probe_steps": args.eval_probe_steps,
            "probe_max_new_tokens": args.probe_max_new_tokens,
            "scoring": "greedy generation + ROUGE-L F1 (the evaluation's answer similarity)",
            "probe": self.probe.describe(),
            "history": self.history,
            "choice": None if choice is None else choice.to_dict(),
            "saved": "best/" if choice is not None and choice.rule_met else None,
        }


def make_probe_callback(trainer, forget, retain):
    """A ``TrainerCallback`` probing ``trainer`` on a probe drawn from the raw ``forget`` / ``retain`` QA."""
    from transformers import TrainerCallback

    callback_class = type("ProbeTrainerCallback", (ProbeCallback, TrainerCallback), {})
    return callback_class(trainer, ProbeSet.draw(forget, retain, trainer.args))
