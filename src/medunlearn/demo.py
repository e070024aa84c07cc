"""``medunlearn demo``: the whole AMNESIA study, then a BioDivergence split comparison, on a laptop CPU.

AMNESIA part: build the fictitious cohort's folder and audit it → fine-tune a ``tiny-llama`` sized to memorise
the cohort (notes pretraining, then QA SFT) → unlearn the random ``forget_10`` split with the paper's four
methods (GradDiff, KL-Min, SimNPO, RMU) and the disease-level ``disease_cancer_forget_10`` split with GradDiff
(and SimNPO in the full run) → evaluate every model, with the fine-tuned model as ``before`` for AFE, and the
fine-tuned model itself as the "no unlearning" row → print the comparison table, write the report folder and
say, from the numbers, whether the paper's collateral-damage finding shows up in this run.

BioDivergence part: fictitious pair pool → v1.0 (article-disjoint) and v1.0-pairlevel splits → audit →
majority and lexical baselines → metric table with the pair-level minus article-disjoint gap.

The demo settings (model size, learning rates) are ours: a 0.5M-parameter model trained from scratch needs far
larger steps than the recipes' 1e-5, which are meant for pretrained 8B models.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from medunlearn import biodivergence
from medunlearn.amnesia.audit import audit_folder
from medunlearn.amnesia.build import build_amnesia
from medunlearn.amnesia.hub import print_split_table
from medunlearn.biodivergence.baselines import make_baseline
from medunlearn.data_loading import load_config
from medunlearn.errors import MedunlearnError
from medunlearn.evaluation.pipeline import evaluate_unlearning
from medunlearn.evaluation.populations import PopulationConfig
from medunlearn.evaluation.report import write_report
from medunlearn.evaluation.runner import RunnerConfig
from medunlearn.evaluation.uncertainty import (
    APPEARS,
    NOT_DISTINGUISHABLE,
    OPPOSITE,
    UncertaintyInputError,
    collateral_comparison,
)
from medunlearn.metrics.bootstrap import BootstrapConfig
from medunlearn.metrics.contextual_contradiction import OUTPUT_KEYS, SPAN_KEYS, contextual_contradiction
from medunlearn.models import ModelArguments, TinyLlamaConfig, build_tiny_llama_for_texts
from medunlearn.unlearn.run import (
    FinetuneArguments,
    UnlearningDataArguments,
    default_sft_config,
    make_method_config,
    notes_texts,
    run_finetune,
    run_unlearning,
)

# The paper's four methods (method-table stems) and how they are shown.
RANDOM_METHODS = ("grad_diff", "kl_min", "simnpo", "rmu")
DISPLAY_NAMES = {"grad_diff": "GradDiff", "kl_min": "KL-Min", "simnpo": "SimNPO", "rmu": "RMU"}
RANDOM_FORGET = "forget_10"
DISEASE_FORGET = "disease_cancer_forget_10"
BEFORE_NAME = "fine-tuned (no unlearning)"


@dataclass
class DemoSettings:
    """Sizes and steps of one demo run (ours; chosen so the model memorises the cohort within the time
    budget)."""

    patients: int = 100
    hidden_size: int = 128
    num_hidden_layers: int = 2
    vocab_size: int = 2048
    notes_epochs: float = 1.0
    qa_epochs: float = 12.0
    finetune_learning_rate: float = 3e-3
    finetune_batch_size: int = 16
    # Per method: the forget-loss methods move a memorised answer with 5e-4; SimNPO's length-normalised loss
    # and RMU's activation steering need a larger step to move a model this small.
    unlearn_learning_rates: dict[str, float] = field(
        default_factory=lambda: {"grad_diff": 5e-4, "kl_min": 5e-4, "simnpo": 2e-3, "rmu": 2e-3}
    )
    unlearn_max_steps: int | None = None  # None: the method config's epochs (5)
    disease_methods: tuple[str, ...] = ("grad_diff", "simnpo")
    max_new_tokens: int = 32
    max_retain_patients: int | None = 100
    biodivergence_pairs: int = 2000
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)


FULL = DemoSettings()
QUICK = DemoSettings(
    patients=40,
    hidden_size=64,
    vocab_size=600,
    qa_epochs=8.0,
    finetune_learning_rate=5e-3,
    unlearn_max_steps=2,
    disease_methods=("grad_diff",),
    max_new_tokens=8,
    max_retain_patients=10,
    biodivergence_pairs=400,
)


class DemoError(MedunlearnError, ValueError):
    """A demo option the run cannot honour (the message says which)."""


# ---------------------------------------------------------------------------------------------------------
# Pure pieces (tested on hand-made numbers)


def model_utility(summary: dict, population: str) -> float | None:
    """MU of one retained population ("all" QA types) from an evaluation ``summary.json``."""
    return summary.get("populations", {}).get(population, {}).get("all", {}).get("model_utility")


def forget_cell(summary: dict, key: str) -> float | None:
    return summary.get("populations", {}).get("forget_seen", {}).get("all", {}).get(key)


def comparison_row(method: str, forget_config: str, summary: dict, before: dict | None) -> dict:
    """One line of the comparison table; ΔMU = MU after unlearning − MU of the fine-tuned model (ours)."""
    row = {
        "method": method,
        "forget_config": forget_config,
        "afe": forget_cell(summary, "answer_forgetting"),
        "leakage_score": forget_cell(summary, "leakage_score"),
        "degeneration_score": forget_cell(summary, "degeneration_score"),
        "mu_same_disease": model_utility(summary, "retain_same_disease"),
        "mu_out_of_disease": model_utility(summary, "retain_out_of_disease"),
    }
    for key in ("mu_same_disease", "mu_out_of_disease"):
        base = model_utility(before, "retain_" + key.removeprefix("mu_")) if before else None
        row["delta_" + key] = None if base is None or row[key] is None else row[key] - base
    return row


DEGENERATE_SHARE = (
    0.5  # ours: above this DS, a method's MU drop says more about collapse than about collateral damage
)


def collateral_finding(rows: list[dict]) -> dict:
    """Does same-disease retained MU fall more than out-of-disease MU after disease-level forgetting?

    For each disease-level unlearning row (not the ``baseline`` row of the fine-tuned model) that carries a
    ``collateral`` comparison (:meth:`medunlearn.evaluation.uncertainty.CollateralComparison.to_dict`: the
    interval of D = ΔMU_same − ΔMU_out over a patient bootstrap), the method's verdict is that comparison's:
    "appears" only when the whole interval of D is below 0, "opposite" when above 0, otherwise
    "not distinguishable at this size". ``appears`` is True when every method's verdict is "appears", False
    when every one is "opposite", "not distinguishable" when every one is, "mixed" otherwise, and None when no
    row can tell. Computed, never assumed.
    """
    per_method = []
    for row in rows:
        collateral = row.get("collateral")
        if row.get("baseline") or not row["forget_config"].startswith("disease_") or not collateral:
            continue
        per_method.append(
            {
                "method": row["method"],
                "forget_config": row["forget_config"],
                "delta_mu_same_disease": collateral["delta_mu_same_disease"]["estimate"],
                "delta_mu_out_of_disease": collateral["delta_mu_out_of_disease"]["estimate"],
                "difference": collateral["difference"],
                "verdict": collateral["verdict"],
                "degeneration_score": row.get("degeneration_score"),
            }
        )
    verdicts = {entry["verdict"] for entry in per_method}
    overall = {
        frozenset({APPEARS}): True,
        frozenset({OPPOSITE}): False,
        frozenset({NOT_DISTINGUISHABLE}): "not distinguishable",
    }
    appears = None if not verdicts else overall.get(frozenset(verdicts), "mixed")
    bootstrap = next((row["collateral"]["bootstrap"] for row in rows if row.get("collateral")), None)
    return {"appears": appears, "per_method": per_method, "bootstrap": bootstrap}


def _collateral_or_none(after_dir: Path, before_dir: Path, config: BootstrapConfig) -> dict | None:
    """The comparison with its interval, or ``None`` when a population is empty at this cohort size."""
    try:
        return collateral_comparison(after_dir, before_dir, config).to_dict()
    except UncertaintyInputError as error:
        print(f"  no interval for {after_dir.name}: {error}")
        return None


def _interval_text(difference: dict) -> str:
    return f"D {difference['estimate']:+.3f} [{difference['low']:+.3f}, {difference['high']:+.3f}]"


def finding_sentence(finding: dict) -> str:
    """The verdict, with the interval of every difference it judges and the resampling that gave it."""
    if finding["appears"] is None:
        return "The paper's finding cannot be checked in this run: no disease-level run has both MU deltas."
    details = "; ".join(
        f"{e['method']} on {e['forget_config']}: ΔMU same-disease {e['delta_mu_same_disease']:+.3f}, "
        f"out-of-disease {e['delta_mu_out_of_disease']:+.3f}, {_interval_text(e['difference'])} "
        f"({e['verdict']})"
        for e in finding["per_method"]
    )
    verdict = {
        True: "APPEARS in this run (same-disease retained MU fell more than out-of-disease MU, the interval "
        "of the difference D = ΔMU same − ΔMU out lies below 0)",
        False: "does NOT appear in this run (the interval of D = ΔMU same − ΔMU out lies above 0)",
        "not distinguishable": "is not distinguishable at this size (the interval of D = ΔMU same − ΔMU out "
        "contains 0)",
        "mixed": "differs between methods",
    }[finding["appears"]]
    sentence = f"The paper's collateral-damage finding {verdict}. {details}."
    bootstrap = finding.get("bootstrap")
    if bootstrap:
        sentence += (
            f" Intervals: {bootstrap['level']:.0%} percentile, cluster bootstrap over patients, "
            f"{bootstrap['n_resamples']} resamples, seed {bootstrap['seed']}."
        )
    collapsed = [
        e["method"]
        for e in finding["per_method"]
        if e.get("degeneration_score") is not None and e["degeneration_score"] > DEGENERATE_SHARE
    ]
    if collapsed:
        sentence += (
            f" Caution: {', '.join(collapsed)} answers the forget questions degenerately "
            f"(DS > {DEGENERATE_SHARE}), so its MU drop reflects collapse more than targeted collateral "
            "damage."
        )
    return sentence


BIODIVERGENCE_METRICS = (
    ("accuracy", "accuracy"),
    ("macro-F1", "macro_f1"),
    ("contextual F1", "contextual_contradiction_f1"),
    ("axis micro-F1", "axis_micro_f1"),
    ("confounder acc", "confounder_accuracy"),
    ("reconciliation ROUGE-L", "reconciliation_rougeL"),
)


def split_gap(pairlevel: dict, article_disjoint: dict) -> dict:
    """Per metric: pair-level score − article-disjoint score (positive: the leaky split flatters the
    system)."""
    return {key: pairlevel[key] - article_disjoint[key] for _, key in BIODIVERGENCE_METRICS}


# ---------------------------------------------------------------------------------------------------------
# Stages


def _stage(number: int, total: int, text: str) -> None:
    print(f"\n[{number}/{total}] {text}", flush=True)


def build_base_model(data_dir: Path, out: Path, settings: DemoSettings, seed: int) -> Path:
    """A randomly initialised tiny Llama with a BPE tokenizer trained on the cohort, saved as a model
    folder."""
    notes = load_config(data_dir, "notes", "train")
    qa = load_config(data_dir, "full", "train")
    texts = notes_texts(notes) + list(qa["question"]) + list(qa["answer"])
    config = TinyLlamaConfig(
        hidden_size=settings.hidden_size,
        intermediate_size=2 * settings.hidden_size,
        num_hidden_layers=settings.num_hidden_layers,
        seed=seed,
    )
    model, tokenizer = build_tiny_llama_for_texts(texts, vocab_size=settings.vocab_size, config=config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    parameters = sum(p.numel() for p in model.parameters())
    print(
        f"  tiny-llama: {parameters / 1e6:.2f}M parameters, vocabulary {len(tokenizer)}, "
        f"{config.num_hidden_layers} layers"
    )
    return out


def finetune_model(
    base: Path, data_dir: Path, out: Path, settings: DemoSettings, seed: int, progress: bool
) -> Path:
    model_args = ModelArguments(str(base))
    sft_config = default_sft_config(model_args, out)
    sft_config.learning_rate = settings.finetune_learning_rate
    sft_config.per_device_train_batch_size = settings.finetune_batch_size
    sft_config.logging_steps, sft_config.seed, sft_config.disable_tqdm = 100, seed, not progress
    arguments = FinetuneArguments(str(data_dir), str(out), settings.notes_epochs, settings.qa_epochs)
    return run_finetune(arguments, model_args, sft_config, overwrite=True)  # a rerun replaces, as the build


def unlearn_model(
    method: str,
    model: Path,
    data_dir: Path,
    forget: str,
    out: Path,
    settings: DemoSettings,
    seed: int,
    progress: bool,
) -> Path:
    fields = {
        "learning_rate": settings.unlearn_learning_rates[method],
        "logging_steps": 100,
        "seed": seed,
        "disable_tqdm": not progress,
    }
    if method == "rmu":
        # The demo steers the last layer of its small model; the default (7/32 of the depth) would be layer 0.
        fields["layer"] = settings.num_hidden_layers - 1
    if settings.unlearn_max_steps is not None:
        fields["max_steps"] = settings.unlearn_max_steps
    config = make_method_config(method, out, **fields)
    data_args = UnlearningDataArguments(str(data_dir), forget)
    return run_unlearning(config, ModelArguments(str(model)), data_args, overwrite=True)


def evaluate_model(
    model: Path,
    name: str,
    data_dir: Path,
    forget: str,
    out: Path,
    before: Path,
    before_outputs: Path,
    settings: DemoSettings,
    seed: int,
    progress: bool,
) -> dict:
    return evaluate_unlearning(
        str(model),
        data_dir,
        forget,
        out,
        before=str(before),
        before_outputs=before_outputs,
        name=name,
        runner_config=RunnerConfig(max_new_tokens=settings.max_new_tokens, progress=progress),
        population_config=PopulationConfig(max_retain_patients=settings.max_retain_patients, seed=seed),
        overwrite=True,
    )


def comparison_table(rows: list[dict]):
    from rich.table import Table

    def fmt(value, signed=False):
        return "–" if value is None else (f"{value:+.3f}" if signed else f"{value:.3f}")

    table = Table(title="AMNESIA demo: forget seen QA (AFE, LS, DS) and retained patients' MU")
    for header in ("method", "forget config"):
        table.add_column(header, no_wrap=True)
    for header in ("AFE", "LS", "DS", "MU same-dis.", "MU out-of-dis.", "ΔMU same", "ΔMU out"):
        table.add_column(header, justify="right", no_wrap=True)
    previous = None
    for row in rows:
        if previous is not None and row["forget_config"] != previous:
            table.add_section()
        previous = row["forget_config"]
        table.add_row(
            row["method"],
            row["forget_config"],
            fmt(row["afe"]),
            fmt(row["leakage_score"]),
            fmt(row["degeneration_score"]),
            fmt(row["mu_same_disease"]),
            fmt(row["mu_out_of_disease"]),
            fmt(row["delta_mu_same_disease"], True),
            fmt(row["delta_mu_out_of_disease"], True),
        )
    return table


def biodivergence_table(scores: dict):
    from rich.table import Table

    table = Table(title="BioDivergence demo: test split, pair-level vs article-disjoint (v1.0)")
    table.add_column("baseline", no_wrap=True)
    table.add_column("split", no_wrap=True)
    table.add_column("n", justify="right")
    for header, _ in BIODIVERGENCE_METRICS:
        table.add_column(header, justify="right")
    for baseline, by_config in scores.items():
        for config in ("v1.0-pairlevel", "v1.0"):
            cell = by_config[config]
            table.add_row(
                baseline,
                config,
                str(cell["n"]),
                *(f"{cell['scores'][key]:.3f}" for _, key in BIODIVERGENCE_METRICS),
            )
        table.add_row(baseline, "gap (pair − v1.0)", "", *(f"{v:+.3f}" for v in by_config["gap"].values()))
        table.add_section()
    return table


def run_biodivergence(out: Path, settings: DemoSettings, seed: int) -> dict:
    pool = biodivergence.generate_pair_pool(n_pairs=settings.biodivergence_pairs, seed=seed)
    configs, stats = biodivergence.build_splits(pool, biodivergence.SplitConfig(seed=seed))
    folder = biodivergence.write_hub_folder(
        configs, stats, out, {"seed": seed, "pairs": settings.biodivergence_pairs}
    )
    print(
        f"  v1.0 (article-disjoint) {stats.split_sizes}; v1.0-pairlevel {stats.pairlevel_split_sizes}; "
        f"bridging pairs dropped: {stats.bridging_pairs_dropped}"
    )
    report = biodivergence.audit_folder(folder)
    for line in report.lines():
        if line.startswith("info") or not line.startswith("ok"):
            print("  " + line)
    if not report.ok:
        raise DemoError(
            f"BioDivergence audit failed: {report.first_violation.name}: {report.first_violation.detail}"
        )
    print(f"  audit passed: {sum(c.ok for c in report.checks)} checks")
    splits = biodivergence.read_hub_folder(folder)
    scores: dict = {}
    for baseline in ("majority", "lexical"):
        scores[baseline] = {}
        for config in ("v1.0-pairlevel", "v1.0"):
            gold = splits[config]["test"]
            references = gold[list(OUTPUT_KEYS + SPAN_KEYS)].to_dict(orient="records")
            for record in references:
                record["axes"] = list(record["axes"])
            predictions = make_baseline(baseline).fit(splits[config]["train"]).predict(gold)
            scores[baseline][config] = {
                "n": len(gold),
                "scores": contextual_contradiction(predictions, references),
            }
        scores[baseline]["gap"] = split_gap(
            scores[baseline]["v1.0-pairlevel"]["scores"], scores[baseline]["v1.0"]["scores"]
        )
    return {
        "folder": str(folder),
        "split_sizes": stats.split_sizes,
        "pairlevel_split_sizes": stats.pairlevel_split_sizes,
        "bridging_pairs_dropped": stats.bridging_pairs_dropped,
        "baselines": scores,
    }


def gap_sentence(biodivergence: dict) -> str:
    lexical = biodivergence["baselines"]["lexical"]["gap"]
    key = "contextual_contradiction_f1"
    direction = "higher" if lexical[key] > 0 else "not higher"
    return (
        f"Lexical baseline: contextual-contradiction F1 is {direction} on the leaky pair-level split than "
        f"on the article-disjoint v1.0 split (gap {lexical[key]:+.3f}; "
        f"accuracy gap {lexical['accuracy']:+.3f})."
    )


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
        return _run_stages(out, settings, seed, progress and not quiet, console)


def _run_stages(out: Path, settings: DemoSettings, seed: int, progress: bool, console) -> dict:
    timings: dict[str, float] = {}
    started = time.perf_counter()
    total = 8

    def lap(name: str, since: float) -> float:
        now = time.perf_counter()
        timings[name] = round(now - since, 1)
        return now

    clock = started
    _stage(
        1,
        total,
        f"building the AMNESIA folder from the fictitious cohort "
        f"({settings.patients:,} patients, seed {seed})",
    )
    data_dir = build_amnesia(
        out / "amnesia", overwrite=True, source="synthetic", patients=settings.patients, seed=seed
    )
    print_split_table(data_dir)
    for invariant, detail in audit_folder(data_dir).checks:  # raises AuditFailure naming the first violation
        print(f"  ok  {invariant}: {detail}")
    card = (data_dir / "README.md").read_text()
    for forget in (RANDOM_FORGET, DISEASE_FORGET):
        if f"config_name: {forget}\n" not in card:
            raise DemoError(
                f"{data_dir}: config {forget} is missing for this cohort size; use more --patients"
            )
    clock = lap("build", clock)

    models = out / "models"
    _stage(
        2,
        total,
        "fine-tuning tiny-llama on the cohort: notes pretraining, then QA SFT (the model to unlearn from)",
    )
    base = build_base_model(data_dir, models / "base", settings, seed)
    finetuned = finetune_model(base, data_dir, models / "finetuned", settings, seed, progress)
    clock = lap("finetune", clock)

    runs = [(method, RANDOM_FORGET) for method in RANDOM_METHODS]
    runs += [(method, DISEASE_FORGET) for method in settings.disease_methods]
    _stage(3, total, f"unlearning: {', '.join(f'{DISPLAY_NAMES[m]} on {f}' for m, f in runs)}")
    unlearned = {}
    for method, forget in runs:
        print(f"  {DISPLAY_NAMES[method]} on {forget}", flush=True)
        unlearned[method, forget] = unlearn_model(
            method, finetuned, data_dir, forget, models / f"{method}-{forget}", settings, seed, progress
        )
    clock = lap("unlearn", clock)

    _stage(
        4,
        total,
        "evaluating every model (the fine-tuned model is `before` for AFE and the no-unlearning row)",
    )
    evals = out / "evaluations"
    eval_dirs, rows, summaries = [], [], {}
    for forget in (RANDOM_FORGET, DISEASE_FORGET):
        shared_before = evals / f"before-{forget}"
        summaries[BEFORE_NAME, forget] = evaluate_model(
            finetuned,
            f"{BEFORE_NAME} [{forget}]",
            data_dir,
            forget,
            evals / f"finetuned-{forget}",
            finetuned,
            shared_before,
            settings,
            seed,
            progress,
        )
        eval_dirs.append(evals / f"finetuned-{forget}")
        for method, method_forget in runs:
            if method_forget != forget:
                continue
            name = f"{DISPLAY_NAMES[method]} [{forget}]"
            summaries[method, forget] = evaluate_model(
                unlearned[method, forget],
                name,
                data_dir,
                forget,
                evals / f"{method}-{forget}",
                finetuned,
                shared_before,
                settings,
                seed,
                progress,
            )
            eval_dirs.append(evals / f"{method}-{forget}")
        before = summaries[BEFORE_NAME, forget]
        rows.append({**comparison_row(BEFORE_NAME, forget, before, before), "baseline": True})
        for method, method_forget in runs:
            if method_forget != forget:
                continue
            row = comparison_row(DISPLAY_NAMES[method], forget, summaries[method, forget], before)
            if forget.startswith("disease_"):  # the comparison the paper's finding is about, with an interval
                row["collateral"] = _collateral_or_none(
                    evals / f"{method}-{forget}", evals / f"finetuned-{forget}", settings.bootstrap
                )
            rows.append(row)
    clock = lap("evaluate", clock)

    _stage(5, total, "comparison table")
    console.print(comparison_table(rows))
    finding = collateral_finding(rows)
    sentence = finding_sentence(finding)
    console.print(sentence, highlight=False)
    console.print(
        "LS is shown beside DS: a low leakage score from degenerate answers is not forgetting.",
        highlight=False,
    )

    report_dir = out / "report"
    _stage(6, total, f"writing the report folder ({report_dir})")
    payload = write_report(eval_dirs, report_dir)
    clock = lap("report", clock)

    _stage(
        7,
        total,
        f"BioDivergence: fictitious pool ({settings.biodivergence_pairs} pairs) → v1.0 and pair-level "
        "splits → audit → baselines",
    )
    biodivergence = run_biodivergence(out / "biodivergence", settings, seed)
    console.print(biodivergence_table(biodivergence["baselines"]))
    gap = gap_sentence(biodivergence)
    console.print(gap, highlight=False)
    clock = lap("biodivergence", clock)

    timings["total"] = round(time.perf_counter() - started, 1)
    summary = {
        "settings": asdict(settings),
        "seed": seed,
        "data": str(data_dir),
        "models": {"finetuned": str(finetuned), **{f"{m}/{f}": str(p) for (m, f), p in unlearned.items()}},
        "amnesia_rows": rows,
        "finding": {**finding, "sentence": sentence},
        "biodivergence": {**biodivergence, "sentence": gap},
        "report_plots": payload["plots"],
        "seconds": timings,
    }
    (report_dir / "demo_summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (report_dir / "table.txt").write_text(console.export_text())
    _stage(8, total, "done")
    console.print(f"report folder: {report_dir.resolve()}", highlight=False, soft_wrap=True)
    print(f"  demo_summary.json, table.txt, report.json, {', '.join(payload['plots'])}")
    print(f"  stages (s): {', '.join(f'{k} {v}' for k, v in timings.items())}")
    return summary
