"""The demo's AMNESIA part: the stages (tiny model, fine-tune, unlearn, evaluate) and the pure pieces that
read their numbers (comparison rows, the collateral-damage finding and its sentence, the table).

The demo settings (model size, learning rates) are ours: a 0.5M-parameter model trained from scratch needs far
larger steps than the recipes' 1e-5, which are meant for pretrained 8B models.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from medunlearn.config_names import ConfigNameError, SplitName
from medunlearn.data_loading import load_config
from medunlearn.demo.settings import DemoContext, DemoMethod
from medunlearn.evaluation.notes_settings import NotesMemorizationConfig
from medunlearn.evaluation.pipeline import evaluate_unlearning
from medunlearn.evaluation.populations import PopulationConfig
from medunlearn.evaluation.runner import RunnerConfig
from medunlearn.evaluation.uncertainty import (
    APPEARS,
    NOT_DISTINGUISHABLE,
    OPPOSITE,
    UncertaintyInputError,
    collateral_comparison,
)
from medunlearn.metrics.bootstrap import BootstrapConfig
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
from medunlearn.utils.tables import in_sections

# ---------------------------------------------------------------------------------------------------------
# Pure pieces (tested on hand-made numbers)


def is_disease_level(forget_config: str) -> bool:
    """Whether a forget config is a disease-level one (``disease_cancer_forget_10``); False for any name
    outside the grammar (medunlearn.config_names)."""
    try:
        return SplitName.parse(forget_config).disease is not None
    except ConfigNameError:
        return False


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
        if row.get("baseline") or not is_disease_level(row["forget_config"]) or not collateral:
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


def collateral_or_none(after_dir: Path, before_dir: Path, config: BootstrapConfig) -> dict | None:
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


def comparison_table(rows: list[dict]):
    from rich.table import Table

    def fmt(value, signed=False):
        return "–" if value is None else (f"{value:+.3f}" if signed else f"{value:.3f}")

    table = Table(title="AMNESIA demo: forget seen QA (AFE, LS, DS) and retained patients' MU")
    for header in ("method", "forget config"):
        table.add_column(header, no_wrap=True)
    for header in ("AFE", "LS", "DS", "MU same-dis.", "MU out-of-dis.", "ΔMU same", "ΔMU out"):
        table.add_column(header, justify="right", no_wrap=True)
    for row in in_sections(table, rows, "forget_config"):
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


# ---------------------------------------------------------------------------------------------------------
# Stages


def build_base_model(context: DemoContext, data_dir: Path, out: Path) -> Path:
    """A randomly initialised tiny Llama with a BPE tokenizer trained on the cohort, saved as a model
    folder."""
    settings = context.settings
    notes = load_config(data_dir, "notes", "train")
    qa = load_config(data_dir, "full", "train")
    texts = notes_texts(notes) + list(qa["question"]) + list(qa["answer"])
    config = TinyLlamaConfig(
        hidden_size=settings.hidden_size,
        intermediate_size=2 * settings.hidden_size,
        num_hidden_layers=settings.num_hidden_layers,
        seed=context.seed,
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


def finetune_model(context: DemoContext, base: Path, data_dir: Path, out: Path) -> Path:
    settings = context.settings
    model_args = ModelArguments(str(base))
    sft_config = default_sft_config(model_args, out)
    sft_config.learning_rate = settings.finetune_learning_rate
    sft_config.per_device_train_batch_size = settings.finetune_batch_size
    sft_config.logging_steps, sft_config.seed, sft_config.disable_tqdm = (
        100,
        context.seed,
        not context.progress,
    )
    arguments = FinetuneArguments(str(data_dir), str(out), settings.notes_epochs, settings.qa_epochs)
    return run_finetune(arguments, model_args, sft_config, overwrite=True)  # a rerun replaces, as the build


def unlearn_model(
    context: DemoContext, method: DemoMethod, model: Path, data_dir: Path, forget: str, out: Path
) -> Path:
    settings = context.settings
    fields = {
        "learning_rate": settings.unlearn_learning_rates[method],
        "logging_steps": 100,
        "seed": context.seed,
        "disable_tqdm": not context.progress,
    }
    if method == "rmu":
        # The demo steers the last layer of its small model; the default (7/32 of the depth) would be layer 0.
        fields["layer"] = settings.num_hidden_layers - 1
    if settings.unlearn_max_steps is not None:
        fields["max_steps"] = settings.unlearn_max_steps
    config = make_method_config(method, out, **fields)
    data_args = UnlearningDataArguments(str(data_dir), forget)
    return run_unlearning(config, ModelArguments(str(model)), data_args, overwrite=True)


@dataclass(frozen=True)
class ForgetEvaluation:
    """What every evaluation on one forget config shares: the data, the fine-tuned model as ``before``
    (for AFE) and the folder of its outputs, run once for all of them."""

    data_dir: Path
    forget: str
    before: Path
    before_outputs: Path


def evaluate_model(
    context: DemoContext,
    plan: ForgetEvaluation,
    model: Path,
    name: str,
    out: Path,
    notes_memorization: NotesMemorizationConfig | None = None,
) -> dict:
    """``model``'s evaluation against the fine-tuned model, whose before outputs ``plan`` holds (QA, and the
    notes too when ``notes_memorization`` is given)."""
    return evaluate_unlearning(
        str(model),
        plan.data_dir,
        plan.forget,
        out,
        before=str(plan.before),
        before_outputs=plan.before_outputs,
        name=name,
        runner_config=RunnerConfig(max_new_tokens=context.settings.max_new_tokens, progress=context.progress),
        population_config=PopulationConfig(
            max_retain_patients=context.settings.max_retain_patients, seed=context.seed
        ),
        overwrite=True,
        notes_memorization=notes_memorization,
    )


__all__ = [
    "DEGENERATE_SHARE",
    "ForgetEvaluation",
    "build_base_model",
    "collateral_finding",
    "collateral_or_none",
    "comparison_row",
    "comparison_table",
    "evaluate_model",
    "finding_sentence",
    "finetune_model",
    "forget_cell",
    "is_disease_level",
    "model_utility",
    "unlearn_model",
]
