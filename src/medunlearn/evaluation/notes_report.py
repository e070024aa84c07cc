"""How notes memorization is shown (the section :mod:`medunlearn.evaluation.notes_scoring` writes into
``summary.json``): one line for ``medunlearn evaluate``, rows and a table for ``medunlearn report``, and a
Markdown section for the model card beside AFE and MU (``medunlearn evaluate --write-card``).

The intervals shown are the section's own: patient-cluster bootstrap percentile intervals (one note per
patient; docs/benchmarks/amnesia.md, "Notes memorization").
"""

from __future__ import annotations

from medunlearn.evaluation.notes_memorization import NOTE_POPULATIONS
from medunlearn.utils.tables import in_sections

POPULATION_LABELS = {
    "forget": "forget",
    "retain_same_disease": "retained same-disease",
    "retain_out_of_disease": "retained out-of-disease",
}
ROW_SCORES = (
    "verbmem",
    "verbmem_before",
    "verbmem_change",
    "extraction_strength",
    "extraction_strength_before",
)


def _estimate(interval: dict | None) -> float | None:
    return None if interval is None else interval.get("estimate")


def _bounds(interval: dict | None) -> list[float] | None:
    return None if interval is None else [interval["low"], interval["high"]]


def notes_rows(method: str, section: dict) -> list[dict]:
    """One row per note population of one evaluation: the estimates of ``ROW_SCORES`` and the intervals of
    verbmem and of its change (``*_ci`` = [low, high])."""
    rows = []
    for population in NOTE_POPULATIONS:
        cell = section.get("populations", {}).get(population)
        if not cell or not cell.get("n"):
            continue
        row = {"method": method, "population": population, "n": cell["n"]}
        row.update({score: _estimate(cell.get(score)) for score in ROW_SCORES})
        row["verbmem_ci"] = _bounds(cell.get("verbmem"))
        row["verbmem_change_ci"] = _bounds(cell.get("verbmem_change"))
        rows.append(row)
    return rows


def notes_payload(names: list[str], summaries: list[dict]) -> dict | None:
    """``report.json``'s ``notes_memorization``: the rows of every evaluation with notes scores and each one's
    membership test; ``None`` when none has them."""
    sections = [
        (name, s["notes_memorization"]) for name, s in zip(names, summaries) if s.get("notes_memorization")
    ]
    if not sections:
        return None
    return {
        "rows": [row for name, section in sections for row in notes_rows(name, section)],
        "privleak": {name: section.get("privleak", {}) for name, section in sections},
        "config": {name: section.get("config", {}) for name, section in sections},
        "bootstrap": sections[0][1].get("bootstrap"),
    }


def _number(value, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _range(bounds, signed: bool = False) -> str:
    """An interval as the report writes MU's (``0.12–0.34``), or bracketed when signed (a change)."""
    if bounds is None:
        return "–"
    return f"[{bounds[0]:+.3f}, {bounds[1]:+.3f}]" if signed else f"{bounds[0]:.2f}–{bounds[1]:.2f}"


def privleak_text(privleak: dict) -> str:
    """The notes membership test in words: the model's Min-K% AUC (forget notes vs held-out notes) with its
    interval, the before and retain models' AUC, and privleak when there is a reference."""
    auc = privleak.get("auc")
    if auc is None:
        return f"notes membership: {privleak.get('reason', 'not measured')}"
    text = (
        f"notes Min-K% AUC {auc['estimate']:.3f} [{auc['low']:.3f}, {auc['high']:.3f}] "
        f"({privleak.get('n_forget')} forget vs {privleak.get('n_holdout')} held-out notes; 0.5 = as unseen)"
    )
    for key, label in (("auc_before", "before"), ("auc_retain_model", "retain model")):
        if privleak.get(key):
            text += f", {label} {privleak[key]['estimate']:.3f}"
    if privleak.get("privleak") is not None:
        text += f"; privleak {privleak['privleak']:+.1f}%"
    return text


def render_notes_table(rows: list[dict], level: float = 0.95):
    """A ``rich`` table of :func:`notes_rows` (methods separated by a rule)."""
    from rich.markup import escape
    from rich.table import Table

    percent = f"{level * 100:.4g}%"
    table = Table(title="notes verbatim memorization (prefix → greedy continuation, ROUGE-L F1)")
    for header in ("method", "note population", "n"):
        table.add_column(header, no_wrap=True)
    for header in ("verbmem", f"{percent} CI", "before", "Δ", f"Δ {percent} CI", "ES", "ES before"):
        table.add_column(header, justify="right", no_wrap=True)
    for row in in_sections(table, rows, "method"):
        table.add_row(
            escape(row["method"]),  # a name like "GradDiff [forget_10]" is text, not rich markup
            POPULATION_LABELS[row["population"]],
            str(row["n"]),
            _number(row["verbmem"]),
            _range(row["verbmem_ci"]),
            _number(row["verbmem_before"]),
            _number(row["verbmem_change"], signed=True),
            escape(_range(row["verbmem_change_ci"], signed=True)),
            _number(row["extraction_strength"]),
            _number(row["extraction_strength_before"]),
        )
    return table


def print_notes(console, payload: dict, level: float = 0.95) -> None:
    """The table and one membership line per method (``medunlearn report``)."""
    console.print(render_notes_table(payload["rows"], level))
    for name, privleak in payload["privleak"].items():
        console.print(f"{name}: {privleak_text(privleak)}", highlight=False, markup=False, soft_wrap=True)


def notes_headline(section: dict) -> str:
    """One line: each population's verbmem (and before), then the membership test (``medunlearn
    evaluate``)."""
    parts = []
    for row in notes_rows("", section):
        before = "" if row["verbmem_before"] is None else f" (before {row['verbmem_before']:.3f})"
        parts.append(f"{POPULATION_LABELS[row['population']]} {_number(row['verbmem'])}{before}")
    membership = privleak_text(section.get("privleak", {}))
    return f"notes verbmem: {', '.join(parts) or 'no note scored'} · {membership}"


def _cell_with_interval(interval: dict | None, signed: bool = False) -> str:
    if interval is None:
        return "–"
    low, high = _number(interval["low"], signed), _number(interval["high"], signed)
    return f"{_number(interval['estimate'], signed)} [{low}, {high}]"


def notes_card_section(summary: dict) -> str:
    """The model card's evaluation section: AFE and MU of the QA populations, then notes memorization per
    population (after, before, change, each with its interval) and the notes membership test."""
    populations = summary.get("populations", {})

    def qa(population: str, key: str) -> str:
        return _number(populations.get(population, {}).get("all", {}).get(key))

    lines = [
        f"## Evaluation on `{summary.get('forget_config')}`",
        "",
        f"AFE {qa('forget_seen', 'answer_forgetting')} (forget patients' seen QA), MU "
        f"{qa('retain_same_disease', 'model_utility')} (retained same-disease patients) and "
        f"{qa('retain_out_of_disease', 'model_utility')} (out-of-disease), from `medunlearn evaluate`.",
    ]
    section = summary.get("notes_memorization")
    if section:
        config, bootstrap = section.get("config", {}), section.get("bootstrap") or {}
        lines += [
            "",
            f"Notes verbatim memorization: the first {config.get('prefix_words')} words of each note → the "
            f"greedy continuation (≤ {config.get('max_new_tokens')} tokens, cut to "
            f"{config.get('continuation_words')} words), ROUGE-L F1 against the note's next "
            f"{config.get('continuation_words')} words; intervals: {bootstrap.get('level', 0.95):.0%} "
            "patient-cluster bootstrap.",
            "",
            "| note population | n | verbmem | before | change | extraction strength |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for population in NOTE_POPULATIONS:
            cell = section.get("populations", {}).get(population)
            if not cell or not cell.get("n"):
                continue
            lines.append(
                f"| {POPULATION_LABELS[population]} | {cell['n']} "
                f"| {_cell_with_interval(cell.get('verbmem'))} "
                f"| {_cell_with_interval(cell.get('verbmem_before'))} "
                f"| {_cell_with_interval(cell.get('verbmem_change'), signed=True)} "
                f"| {_cell_with_interval(cell.get('extraction_strength'))} |"
            )
        lines += ["", privleak_text(section.get("privleak", {})) + "."]
    return "\n".join(lines) + "\n"


__all__ = [
    "POPULATION_LABELS",
    "notes_card_section",
    "notes_headline",
    "notes_payload",
    "notes_rows",
    "print_notes",
    "privleak_text",
    "render_notes_table",
]
