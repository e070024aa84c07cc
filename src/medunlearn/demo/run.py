"""``run_demo``: every stage of the demo in order; prints the tables and their sentences, writes the report.

Stages: 1 build and audit the AMNESIA folder → 2 fine-tune → 3 unlearn → 4 evaluate → 5 comparison table →
6 report folder → 7 BioDivergence (:mod:`medunlearn.demo.biodivergence`) → 8 done. The notes run
(:mod:`medunlearn.demo.notes`: one method unlearning the disease-level forget patients' notes) joins stages 3
and 4, and its notes table follows the comparison table.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from medunlearn.amnesia.audit import audit_folder
from medunlearn.amnesia.hub import print_split_table
from medunlearn.amnesia.pipeline import build_amnesia
from medunlearn.config_names import folder_configs
from medunlearn.data_loading import retain_config_for
from medunlearn.demo.amnesia import (
    ForgetEvaluation,
    build_base_model,
    collateral_finding,
    collateral_or_none,
    comparison_row,
    comparison_table,
    evaluate_model,
    finding_sentence,
    finetune_model,
    is_disease_level,
    unlearn_model,
)
from medunlearn.demo.biodivergence import biodivergence_table, gap_sentence, run_biodivergence
from medunlearn.demo.notes import notes_run_name, notes_sentence, notes_table, unlearn_notes
from medunlearn.demo.settings import (
    BEFORE_NAME,
    DISEASE_FORGET,
    DISPLAY_NAMES,
    RANDOM_FORGET,
    RANDOM_METHODS,
    DemoContext,
    DemoError,
    DemoMethod,
    DemoSettings,
)
from medunlearn.evaluation.report import write_report

STAGES = 8
Run = tuple[DemoMethod, str]  # (method, forget config)


def run_demo(out: Path, settings: DemoSettings, seed: int, progress: bool, quiet: bool = False) -> dict:
    """Every stage; returns the demo summary (also written to ``out/report/demo_summary.json``).

    ``quiet``: only the result is printed (the tables, the sentences that read them, the report folder); the
    stages' own lines are dropped."""
    import contextlib
    import io
    import sys

    from rich.console import Console

    # The results go to the stdout of the call; with ``quiet`` everything else printed goes nowhere.
    console = Console(width=160, record=True, file=sys.stdout)
    chatter = contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext()
    with chatter:
        return _run_stages(DemoContext(settings, seed, progress and not quiet), out, console)


def _stage(number: int, text: str) -> None:
    print(f"\n[{number}/{STAGES}] {text}", flush=True)


@dataclass
class _Clock:
    """Seconds per stage (``demo_summary.json``'s ``seconds``)."""

    started: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.last = self.started

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = round(now - self.last, 1)
        self.last = now

    def total(self) -> dict[str, float]:
        return {**self.timings, "total": round(time.perf_counter() - self.started, 1)}


def _run_stages(context: DemoContext, out: Path, console) -> dict:
    clock = _Clock()
    data_dir = _build(context, out)
    clock.lap("build")
    models = out / "models"
    finetuned = _finetune(context, data_dir, models)
    clock.lap("finetune")
    runs: list[Run] = [(method, RANDOM_FORGET) for method in RANDOM_METHODS]
    runs += [(method, DISEASE_FORGET) for method in context.settings.disease_methods]
    unlearned = _unlearn(context, data_dir, models, finetuned, runs)
    notes_model = _unlearn_notes(context, data_dir, models, finetuned)
    clock.lap("unlearn")
    evaluated = _evaluate(context, data_dir, out / "evaluations", finetuned, unlearned, notes_model)
    eval_dirs, rows, notes = evaluated
    clock.lap("evaluate")

    _stage(5, "comparison table")
    console.print(comparison_table(rows))
    finding = collateral_finding(rows)
    sentence = finding_sentence(finding)
    console.print(sentence, highlight=False)
    console.print(
        "LS is shown beside DS: a low leakage score from degenerate answers is not forgetting.",
        highlight=False,
    )
    if notes is not None:
        console.print(notes_table(notes["name"], notes["section"]))
        console.print(notes["sentence"], highlight=False, markup=False)
    report_dir = out / "report"
    _stage(6, f"writing the report folder ({report_dir})")
    payload = write_report(eval_dirs, report_dir)
    clock.lap("report")

    biodivergence, gap = _biodivergence(context, out, console)
    clock.lap("biodivergence")
    timings = clock.total()
    summary = {
        "settings": asdict(context.settings),
        "seed": context.seed,
        "data": str(data_dir),
        "models": {"finetuned": str(finetuned), **{f"{m}/{f}": str(p) for (m, f), p in unlearned.items()}},
        "amnesia_rows": rows,
        "finding": {**finding, "sentence": sentence},
        "notes_memorization": notes,
        "biodivergence": {**biodivergence, "sentence": gap},
        "report_plots": payload["plots"],
        "seconds": timings,
    }
    (report_dir / "demo_summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (report_dir / "table.txt").write_text(console.export_text())
    _stage(8, "done")
    console.print(f"report folder: {report_dir.resolve()}", highlight=False, soft_wrap=True)
    print(f"  demo_summary.json, table.txt, report.json, {', '.join(payload['plots'])}")
    print(f"  stages (s): {', '.join(f'{k} {v}' for k, v in timings.items())}")
    return summary


def _build(context: DemoContext, out: Path) -> Path:
    """Stage 1: the fictitious cohort's AMNESIA folder, audited, with both forget configs the demo uses."""
    patients, seed = context.settings.patients, context.seed
    _stage(1, f"building the AMNESIA folder from the fictitious cohort ({patients:,} patients, seed {seed})")
    data_dir = build_amnesia(
        out / "amnesia", overwrite=True, source="synthetic", patients=patients, seed=seed
    )
    # The configs the demo trains and scores on; the card lists the others (36 at the default sizes).
    used = ["notes", "full"] + [c for f in (RANDOM_FORGET, DISEASE_FORGET) for c in (f, retain_config_for(f))]
    print_split_table(data_dir, configs=used)
    checks = audit_folder(data_dir).checks  # raises AuditFailure naming the first violation
    print(f"  audit passed: {len(checks)} checks ({', '.join(invariant for invariant, _ in checks)})")
    configs = folder_configs(data_dir)
    for forget in (RANDOM_FORGET, DISEASE_FORGET):
        if forget not in configs:
            raise DemoError(
                f"{data_dir}: config {forget} is missing for this cohort size; use more --patients"
            )
    return data_dir


def _finetune(context: DemoContext, data_dir: Path, models: Path) -> Path:
    """Stage 2: a tiny Llama built for the cohort, then notes pretraining and QA SFT."""
    _stage(
        2, "fine-tuning tiny-llama on the cohort: notes pretraining, then QA SFT (the model to unlearn from)"
    )
    base = build_base_model(context, data_dir, models / "base")
    return finetune_model(context, base, data_dir, models / "finetuned")


def _unlearn(
    context: DemoContext, data_dir: Path, models: Path, finetuned: Path, runs: list[Run]
) -> dict[Run, Path]:
    """Stage 3: every (method, forget config) of ``runs`` from the fine-tuned model."""
    _stage(3, f"unlearning: {', '.join(f'{DISPLAY_NAMES[m]} on {f}' for m, f in runs)}")
    unlearned = {}
    for method, forget in runs:
        print(f"  {DISPLAY_NAMES[method]} on {forget}", flush=True)
        unlearned[method, forget] = unlearn_model(
            context, method, finetuned, data_dir, forget, models / f"{method}-{forget}"
        )
    return unlearned


def _unlearn_notes(context: DemoContext, data_dir: Path, models: Path, finetuned: Path) -> Path | None:
    """Stage 3, the notes run: ``notes_method`` unlearns the disease-level forget patients' notes."""
    method = context.settings.notes_method
    if method is None:
        return None
    print(f"  {DISPLAY_NAMES[method]} on the notes of {DISEASE_FORGET} (--forget-on notes)", flush=True)
    return unlearn_notes(
        context, finetuned, data_dir, DISEASE_FORGET, models / f"{method}-notes-{DISEASE_FORGET}"
    )


def _evaluate(
    context: DemoContext,
    data_dir: Path,
    evals: Path,
    finetuned: Path,
    unlearned: dict[Run, Path],
    notes_model: Path | None = None,
) -> tuple[list[Path], list[dict], dict | None]:
    """Stage 4: per forget config, the fine-tuned model (the "no unlearning" row, and ``before`` for AFE),
    then every method unlearned on it, then the notes run (its notes scored too); returns the evaluation
    folders, the comparison rows and the notes run's table data (``None`` without one)."""
    from tqdm.auto import tqdm

    _stage(4, "evaluating every model (the fine-tuned model is `before` for AFE and the no-unlearning row)")
    forgets = (RANDOM_FORGET, DISEASE_FORGET)
    # One bar for the stage, a step per model: the runner's two bars per model (and its line for the `before`
    # outputs every model reuses) stay off.
    total = len(forgets) + len(unlearned) + (notes_model is not None)
    bar = tqdm(total=total, desc="evaluating", unit="model", disable=not context.progress)
    quiet_runs = replace(context, progress=False)
    eval_dirs, rows = [], []
    for forget in forgets:
        plan = ForgetEvaluation(data_dir, forget, finetuned, evals / f"before-{forget}")
        before_dir = evals / f"finetuned-{forget}"
        before = evaluate_model(quiet_runs, plan, finetuned, f"{BEFORE_NAME} [{forget}]", before_dir)
        bar.update()
        eval_dirs.append(before_dir)
        methods = [method for method, method_forget in unlearned if method_forget == forget]
        summaries = {}
        for method in methods:
            eval_dirs.append(evals / f"{method}-{forget}")
            name = f"{DISPLAY_NAMES[method]} [{forget}]"
            model = unlearned[method, forget]
            summaries[method] = evaluate_model(quiet_runs, plan, model, name, eval_dirs[-1])
            bar.update()
        rows.append({**comparison_row(BEFORE_NAME, forget, before, before), "baseline": True})
        for method in methods:
            row = comparison_row(DISPLAY_NAMES[method], forget, summaries[method], before)
            if is_disease_level(forget):  # the comparison the paper's finding is about, with an interval
                row["collateral"] = collateral_or_none(
                    evals / f"{method}-{forget}", before_dir, context.settings.bootstrap
                )
            rows.append(row)
    notes = None
    if notes_model is not None:
        plan = ForgetEvaluation(data_dir, DISEASE_FORGET, finetuned, evals / f"before-{DISEASE_FORGET}")
        name = notes_run_name(context.settings.notes_method, DISEASE_FORGET)
        eval_dirs.append(evals / f"notes-{DISEASE_FORGET}")
        notes_config = quiet_runs.settings.notes_memorization
        summary = evaluate_model(quiet_runs, plan, notes_model, name, eval_dirs[-1], notes_config)
        section = summary["notes_memorization"]
        notes = {"name": name, "section": section, "sentence": notes_sentence(name, section)}
        bar.update()
    bar.close()
    return eval_dirs, rows, notes


def _biodivergence(context: DemoContext, out: Path, console) -> tuple[dict, str]:
    """Stage 7: the BioDivergence split comparison, its table and the sentence that reads it."""
    _stage(
        7,
        f"BioDivergence: fictitious pool ({context.settings.biodivergence_pairs} pairs) → v1.0 and "
        "pair-level splits → audit → baselines",
    )
    biodivergence = run_biodivergence(context, out / "biodivergence")
    console.print(biodivergence_table(biodivergence["baselines"]))
    gap = gap_sentence(biodivergence)
    console.print(gap, highlight=False)
    return biodivergence, gap


__all__ = ["run_demo"]
