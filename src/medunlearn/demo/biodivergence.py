"""The demo's BioDivergence part: fictitious pair pool → v1.0 (article-disjoint) and v1.0-pairlevel splits →
audit → majority, lexical and fine-tuned baselines → metric table with the pair-level minus article-disjoint
gap, and its article-bootstrap interval (docs/getting-started.md, "What `medunlearn demo` does";
docs/biodivergence.md, "The leakage gap")."""

from __future__ import annotations

from pathlib import Path

from medunlearn import biodivergence
from medunlearn.biodivergence.baselines import fit_baseline, make_baseline
from medunlearn.biodivergence.finetuned import FinetunedConfig
from medunlearn.biodivergence.leakage_gap import ScoredVariant, leakage_gap
from medunlearn.demo.settings import DemoContext, DemoError
from medunlearn.metrics.contextual_contradiction import OUTPUT_KEYS, SPAN_KEYS, contextual_contradiction

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


def run_biodivergence(context: DemoContext, out: Path) -> dict:
    """Pool → splits → hub folder → audit → baselines scored on both splits; the figures the demo shows."""
    settings, seed = context.settings, context.seed
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
    epochs = settings.biodivergence_finetuned_epochs
    # The fine-tuned baseline: MiniLM, claims only, 128 tokens, `epochs` epochs (settings.py says why).
    finetuned = FinetunedConfig(epochs=max(epochs, 1), max_length=128, use_context=False, seed=seed)
    for baseline in ("majority", "lexical", "finetuned") if epochs > 0 else ("majority", "lexical"):
        scores[baseline], scored = {}, {}
        for config in ("v1.0-pairlevel", "v1.0"):
            gold = splits[config]["test"]
            references = gold[list(OUTPUT_KEYS + SPAN_KEYS)].to_dict(orient="records")
            for record in references:
                record["axes"] = list(record["axes"])
            options = {"config": finetuned} if baseline == "finetuned" else {}
            predictions = fit_baseline(make_baseline(baseline, **options), splits[config]).predict(gold)
            scores[baseline][config] = {
                "n": len(gold),
                "scores": contextual_contradiction(predictions, references),
                "predicted_types": sorted({p["conflict_type"] for p in predictions}),
            }
            scored[config] = ScoredVariant.of(predictions, gold)
        scores[baseline]["gap"] = split_gap(
            scores[baseline]["v1.0-pairlevel"]["scores"], scores[baseline]["v1.0"]["scores"]
        )
        intervals = leakage_gap(scored["v1.0-pairlevel"], scored["v1.0"], settings.bootstrap)
        scores[baseline]["interval"] = {key: intervals[key] for _, key in BIODIVERGENCE_METRICS}
    return {
        "folder": str(folder),
        "split_sizes": stats.split_sizes,
        "pairlevel_split_sizes": stats.pairlevel_split_sizes,
        "bridging_pairs_dropped": stats.bridging_pairs_dropped,
        "baselines": scores,
    }


def one_class_warning(scores: dict) -> str:
    """A sentence when a baseline predicts one conflict type on every test pair of both variants: it has not
    learned the task, and its gap is a gap of the label mix, as the majority baseline's is ("" otherwise)."""
    predicted = {tuple(scores[config]["predicted_types"]) for config in ("v1.0-pairlevel", "v1.0")}
    if len(predicted) != 1 or len(next(iter(predicted))) != 1:
        return ""
    only = next(iter(predicted))[0]
    return (
        f" Caution: the fine-tuned baseline predicts {only!r} on every test pair of both variants: at this "
        "training budget it has not learned the task, so its gap is the label mix's, as the majority "
        "baseline's."
    )


def gap_sentence(biodivergence: dict) -> str:
    lexical = biodivergence["baselines"]["lexical"]["gap"]
    key = "contextual_contradiction_f1"
    direction = "higher" if lexical[key] > 0 else "not higher"
    sentence = (
        f"Lexical baseline: contextual-contradiction F1 is {direction} on the leaky pair-level split than "
        f"on the article-disjoint v1.0 split (gap {lexical[key]:+.3f}; "
        f"accuracy gap {lexical['accuracy']:+.3f})."
    )
    if "finetuned" not in biodivergence["baselines"]:
        sentence += (
            " The fine-tuned baseline, whose memorised articles the paper's gap is about, is not run here "
            "(minutes per epoch on a CPU): `medunlearn biodivergence compare --baselines finetuned`."
        )
    else:
        sentence += one_class_warning(biodivergence["baselines"]["finetuned"])
    for baseline in ("lexical", "finetuned"):
        interval = biodivergence["baselines"].get(baseline, {}).get("interval")
        if interval:
            row = interval[key]
            sentence += (
                f" {baseline}: contextual-F1 gap {row['gap']:+.3f}, 95% article-bootstrap interval "
                f"[{row['low']:+.3f}, {row['high']:+.3f}]: {row['verdict']}."
            )
    return sentence


__all__ = [
    "BIODIVERGENCE_METRICS",
    "biodivergence_table",
    "gap_sentence",
    "one_class_warning",
    "run_biodivergence",
    "split_gap",
]
