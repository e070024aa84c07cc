"""From attack results to one robustness summary per method: recovered shares, table, plot, card section.

Definitions (docs/attacks.md, "Recovered share") **[ours, after Zhang et al. ICLR 2025 and Hu et al. arXiv
2406.13356]**. With s the mean answer similarity (ROUGE-L F1 by default, docs/benchmarks/amnesia.md) of a
forget population (the forget patients' seen QA that the attack did not train on, or their holdout QA):

    recovered share = (s_attacked − s_unlearned) / (s_before − s_unlearned)

- 0: the attack brought nothing back; 1: the attacked model answers as well as the model before unlearning;
  below 0: the attack erased more; above 1: it answers better than before (relearning can overshoot).
  Values are not clipped, so an overshoot stays visible.
- s_before == s_unlearned (unlearning removed nothing, or both are 0): nothing was forgotten, so no share of
  it can be recovered: the value is ``None`` (``null`` in JSON, NaN in a frame), never a division by zero.
  The same holds when unlearning removed less than ``MIN_FORGOTTEN`` (0.01 of similarity) or raised the
  similarity: a share of a difference that small is noise divided by noise (0.003 forgotten and a 0.2 swing
  under attack would read as a recovery of −6600%).
- A probe that asks other questions than the ones forgotten (the forget patients' holdout QA) compares
  similarities each normalised by the before model's similarity on the same questions (see
  :func:`normalised_recovered_share`); with one question set the normalisation cancels and both agree.

The robustness summary of a method puts its **worst-case recovery** (the largest recovered share over every
attack and forget population) beside its AFE and MU: a method that looks best on AFE but recovers under attack
shows at once, in the table and in the plot of AFE against worst-case recovery.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

# s_before − s_unlearned below this is "nothing forgotten" [ours]: 0.01 of ROUGE-L F1 is about one word in a
# hundred answer words, under what a few examples' greedy answers vary by.
MIN_FORGOTTEN = 0.01


def _finite(value) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def recovered_share(before: float | None, unlearned: float | None, attacked: float | None) -> float | None:
    """``(attacked − unlearned) / (before − unlearned)``; ``None`` when a value is missing or not finite,
    or when ``before − unlearned`` is below ``MIN_FORGOTTEN`` (``before == unlearned`` included): nothing was
    forgotten, so nothing can be recovered.

    >>> recovered_share(0.75, 0.25, 0.5)
    0.5
    >>> recovered_share(0.75, 0.25, 0.125)  # the attack erased more
    -0.25
    >>> recovered_share(0.4, 0.4, 0.6) is None  # before == after unlearning: undefined, no ZeroDivisionError
    True
    >>> recovered_share(0.8, None, 0.5) is None
    True
    """
    if not (_finite(before) and _finite(unlearned) and _finite(attacked)):
        return None
    forgotten = before - unlearned
    if forgotten < MIN_FORGOTTEN:
        return None
    return (attacked - unlearned) / forgotten


def normalised_recovered_share(
    attacked: float | None,
    attacked_before: float | None,
    unlearned: float | None,
    unlearned_before: float | None,
) -> float | None:
    """The recovered share of a probe whose questions differ from the forgotten ones.

    Each similarity is divided by the before model's similarity on the same questions (ŝ = s / s_before, so
    ŝ_before = 1): ``(ŝ_attacked − ŝ_unlearned) / (1 − ŝ_unlearned)``. ``None`` when a before similarity is 0
    or missing, or when 1 − ŝ_unlearned is below ``MIN_FORGOTTEN`` (here: 1% of the before similarity).

    >>> normalised_recovered_share(0.3, 0.6, 0.2, 0.8)  # ŝ: holdout 0.5, seen 0.25
    0.3333333333333333
    """
    if not (_finite(attacked_before) and _finite(unlearned_before)):
        return None
    if attacked_before <= 0 or unlearned_before <= 0:
        return None
    if not (_finite(attacked) and _finite(unlearned)):
        return None
    return recovered_share(1.0, unlearned / unlearned_before, attacked / attacked_before)


def worst_case(results: Iterable[dict]) -> dict | None:
    """The result with the largest recovered share (``None`` when no result has one)."""
    scored = [r for r in results if _finite(r.get("recovered_share"))]
    return max(scored, key=lambda r: r["recovered_share"]) if scored else None


def robustness_summary(method: str, results: Sequence[dict], afe: float | None, mu: float | None) -> dict:
    """One method's summary: worst-case recovery (and the attack that gave it) beside AFE and MU.

    ``results`` are attack rows (``attack``, ``variant``, ``population``, ``recovered_share``, …), ``afe``
    the method's AFE on the forget patients' seen QA, ``mu`` its MU (retained patients, all QA types).
    """
    worst = worst_case(results)
    per_attack: dict[str, float | None] = {}
    for row in results:
        value = row.get("recovered_share")
        if not _finite(value):
            per_attack.setdefault(row["attack"], None)
            continue
        current = per_attack.get(row["attack"])
        per_attack[row["attack"]] = value if current is None else max(current, value)
    return {
        "method": method,
        "afe": afe,
        "mu": mu,
        "worst_case_recovery": None if worst is None else worst["recovered_share"],
        "worst_case_attack": None if worst is None else attack_label(worst),
        "worst_recovery_per_attack": per_attack,
    }


def attack_label(row: dict) -> str:
    """``relearn k=20 (forget_seen)``: attack, variant and population of a row."""
    variant = f" {row['variant']}" if row.get("variant") else ""
    return f"{row['attack']}{variant} ({row['population']})"


def _cell(value, signed: bool = False) -> str:
    if not _finite(value):
        return "–"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


RESULT_HEADERS = (
    "attack",
    "variant",
    "population",
    "n",
    "s before",
    "s unlearned",
    "s attacked",
    "recovered",
)


def result_cells(row: dict) -> list[str]:
    """The table cells of one attack row (``RESULT_HEADERS``)."""
    return [
        row["attack"],
        str(row.get("variant") or ""),
        row["population"],
        "" if row.get("n") is None else str(row["n"]),
        _cell(row.get("before")),
        _cell(row.get("unlearned")),
        _cell(row.get("attacked")),
        _cell(row.get("recovered_share"), signed=True),
    ]


def markdown_table(results: Sequence[dict], summaries: Sequence[dict] = ()) -> str:
    """The attack rows as a Markdown table (with a ``method`` column when the rows carry one), then one line
    per method summary."""
    by_method = any("method" in row for row in results)
    headers = ("method", *RESULT_HEADERS) if by_method else RESULT_HEADERS
    first_numeric = headers.index("n")
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" if i < first_numeric else "---:" for i in range(len(headers))) + "|",
    ]
    for row in results:
        cells = ([str(row.get("method", ""))] if by_method else []) + result_cells(row)
        lines.append("| " + " | ".join(cells) + " |")
    if summaries:
        lines += [
            "",
            "| method | AFE | MU | worst-case recovery | worst attack |",
            "|---|---:|---:|---:|---|",
        ]
        for summary in summaries:
            lines.append(
                f"| {summary['method']} | {_cell(summary.get('afe'))} | {_cell(summary.get('mu'))} | "
                f"{_cell(summary.get('worst_case_recovery'), signed=True)} | "
                f"{summary.get('worst_case_attack') or '–'} |"
            )
    return "\n".join(lines) + "\n"


def write_robustness_plot(summaries: Sequence[dict], path: str | Path) -> Path | None:
    """AFE (x) against worst-case recovery (y), one labelled point per method; ``None`` when no method has
    both values (the methods without one are named in a corner). Top right is the trap: forgotten by AFE,
    recovered under attack; the dashed line is a full recovery."""
    points = [s for s in summaries if _finite(s.get("afe")) and _finite(s.get("worst_case_recovery"))]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.5, 4.2))
    for summary in points:
        axes.scatter(summary["afe"], summary["worst_case_recovery"], s=40)
        axes.annotate(
            summary["method"],
            (summary["afe"], summary["worst_case_recovery"]),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=8,
        )
    axes.axhline(0.0, color="grey", linewidth=0.8)
    axes.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")  # as well as before unlearning
    left_out = [s["method"] for s in summaries if s not in points]
    if left_out:  # a method with nothing forgotten (or no attack scored) has no recovered share
        axes.text(
            0.01,
            0.01,
            f"no recovered share (nothing forgotten): {', '.join(left_out)}",
            transform=axes.transAxes,
            fontsize=7,
            color="grey",
        )
    axes.set_xlabel("AFE (forget seen QA; higher = more forgotten)")
    axes.set_ylabel("worst-case recovered share under attack")
    axes.set_xlim(-0.05, 1.05)
    axes.set_title("Forgetting vs recovery under attack")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def model_card_section(summary: dict, results: Sequence[dict]) -> str:
    """A Markdown section for a model card: the worst-case recovery beside AFE and MU, and the attack rows."""
    worst = summary.get("worst_case_recovery")
    verdict = (
        "no attack could be scored"
        if not _finite(worst)
        else f"the strongest attack ({summary['worst_case_attack']}) recovered {worst:+.1%} of what "
        "unlearning removed"
    )
    return (
        "## Robustness of forgetting\n\n"
        f"AFE {_cell(summary.get('afe'))}, MU {_cell(summary.get('mu'))}; {verdict}. Recovered share = "
        "(s after the attack − s after unlearning) / (s before − s after unlearning), s the mean answer "
        "similarity on the forget patients' questions (see docs/attacks.md).\n\n" + markdown_table(results)
    )


__all__ = [
    "attack_label",
    "markdown_table",
    "model_card_section",
    "normalised_recovered_share",
    "recovered_share",
    "robustness_summary",
    "worst_case",
    "write_robustness_plot",
]
