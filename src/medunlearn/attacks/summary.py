"""From attack results to one robustness summary per method: recovered shares, table, plot, card section.

Definitions (docs/attacks.md, "Recovered share") **[ours, after Zhang et al. ICLR 2025 and Hu et al. arXiv
2406.13356]**. With s the mean answer similarity (ROUGE-L F1 by default, docs/benchmarks/amnesia.md) of a
forget population (the forget patients' seen QA that the attack did not train on, or their holdout QA):

    recovered share = (s_attacked − s_unlearned) / (s_before − s_unlearned)

- 0: the attack brought nothing back; 1: the attacked model answers as well as the model before unlearning;
  below 0: the attack erased more; above 1: it answers better than before (relearning can overshoot).
  Values are not clipped, so an overshoot stays visible.
- s_before − s_unlearned < ``MIN_FORGOTTEN`` (0.01 of similarity; s_before == s_unlearned included, and
  an unlearning that raised the similarity): nothing was forgotten, so no share of it can be recovered: the
  value is ``None`` (``null`` in JSON, NaN in a frame), never a division by zero. A share of a difference
  that small is noise divided by noise (0.003 forgotten and a 0.2 swing under attack would read as a
  recovery of −6600%).
- A probe that asks other questions than the ones forgotten (the forget patients' holdout QA) compares
  similarities each normalised by the before model's similarity on the same questions (see
  :func:`normalised_recovered_share`); with one question set the normalisation cancels and both agree.

The robustness summary of a method puts its **worst-case recovery** (the largest recovered share over every
attack and forget population) beside its AFE and MU: a method that looks best on AFE but recovers under attack
shows at once, in the table and in the plot of AFE against worst-case recovery. Rows that carry their
per-example similarities (``_sample``, a :class:`medunlearn.attacks.recovery.ShareSample`) get a
patient-bootstrap interval, and the worst case a selection-aware interval, win shares and a verdict
(:mod:`medunlearn.attacks.recovery`): a worst case whose interval includes 0 reads "not distinguishable from
no recovery".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from medunlearn.attacks.recovery import (
    MIN_FORGOTTEN,
    NOT_DISTINGUISHABLE,
    RECOVERED,
    normalised_share_array,
    recovered_share_array,
    recovery_uncertainty,
)
from medunlearn.metrics.bootstrap import BootstrapConfig

# What attacks.json says of every recovered share (the rule of ``recovered_share``).
RECOVERED_SHARE_FORMULA = (
    "recovered share = (s_attacked - s_unlearned) / (s_before - s_unlearned); null when s_before - "
    f"s_unlearned < {MIN_FORGOTTEN} (MIN_FORGOTTEN: nothing forgotten, or unlearning raised the similarity) "
    "or a similarity is missing (docs/attacks.md)"
)


def _finite(value) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def _none_if_nan(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


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
    return _none_if_nan(recovered_share_array(before, unlearned, attacked))


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
    values = (attacked, attacked_before, unlearned, unlearned_before)
    if not all(_finite(value) for value in values):
        return None
    return _none_if_nan(normalised_share_array(*values))


def worst_case(results: Iterable[dict]) -> dict | None:
    """The result with the largest recovered share (``None`` when no result has one)."""
    scored = [r for r in results if _finite(r.get("recovered_share"))]
    return max(scored, key=lambda r: r["recovered_share"]) if scored else None


def robustness_summary(
    method: str,
    results: Sequence[dict],
    afe: float | None,
    mu: float | None,
    bootstrap: BootstrapConfig | None = None,
) -> dict:
    """One method's summary: worst-case recovery (and the attack that gave it) beside AFE and MU.

    ``results`` are attack rows (``attack``, ``variant``, ``population``, ``recovered_share``, …), ``afe``
    the method's AFE on the forget patients' seen QA, ``mu`` its MU (retained patients, all QA types).

    Rows with a defined share and a ``_sample`` (their per-example similarities) are resampled together
    (:func:`medunlearn.attacks.recovery.recovery_uncertainty`, settings ``bootstrap``): each such row gets
    ``recovered_share_ci`` and ``patients`` (set here, on the row), and the summary ``worst_case_ci``,
    ``worst_case_verdict`` and ``worst_case_wins``; without samples they are ``None`` / empty.
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
    sampled = [r for r in results if _finite(r.get("recovered_share")) and r.get("_sample") is not None]
    uncertainty = None
    if sampled:
        uncertainty = recovery_uncertainty(
            [r["_sample"] for r in sampled], [attack_label(r) for r in sampled], bootstrap
        )
        for row, interval, patients in zip(sampled, uncertainty["row_intervals"], uncertainty["n_patients"]):
            row["recovered_share_ci"], row["patients"] = interval, patients
    return {
        "method": method,
        "afe": afe,
        "mu": mu,
        "worst_case_recovery": None if worst is None else worst["recovered_share"],
        "worst_case_attack": None if worst is None else attack_label(worst),
        "worst_case_ci": None if uncertainty is None else uncertainty["worst_case_ci"],
        "worst_case_verdict": None if uncertainty is None else uncertainty["worst_case_verdict"],
        "worst_case_wins": {} if uncertainty is None else uncertainty["wins"],
        "worst_recovery_per_attack": per_attack,
        "bootstrap": None if uncertainty is None else uncertainty["bootstrap"],
    }


def public_rows(results: Sequence[dict]) -> list[dict]:
    """The rows without their in-memory keys (``_sample``): what attacks.json and callers get."""
    return [{k: v for k, v in row.items() if not k.startswith("_")} for row in results]


def attack_label(row: dict) -> str:
    """``relearn k=20 (forget_seen)``: attack, variant and population of a row."""
    variant = f" {row['variant']}" if row.get("variant") else ""
    return f"{row['attack']}{variant} ({row['population']})"


def _cell(value, signed: bool = False) -> str:
    if not _finite(value):
        return "–"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def interval_text(interval) -> str:
    """``−0.210…+0.660`` (an unbounded end, ``null`` in attacks.json: ``−∞`` / ``+∞``); ``–`` without an
    interval."""
    if not interval:
        return "–"
    low, high = (v if _finite(v) else None for v in interval)
    return f"{'−∞' if low is None else f'{low:+.3f}'}…{'+∞' if high is None else f'{high:+.3f}'}"


RESULT_HEADERS = (
    "attack",
    "variant",
    "population",
    "n",
    "s before",
    "s unlearned",
    "s attacked",
    "recovered",
    "recovered CI",
)
SUMMARY_HEADERS = (
    "method",
    "AFE",
    "MU",
    "worst-case recovery",
    "worst attack",
    "worst-case CI (selection-aware)",
    "verdict",
    "worst attack per resample",
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
        interval_text(row.get("recovered_share_ci")),
    ]


def wins_text(wins: dict, top: int = 3) -> str:
    """``relearn k=5 (forget_seen) 41%, paraphrase template (forget_seen) 22%``: the most frequent worst
    attacks over the resamples."""
    if not wins:
        return "–"
    return ", ".join(f"{label} {share:.0%}" for label, share in list(wins.items())[:top])


def summary_cells(summary: dict) -> list[str]:
    """The table cells of one method's summary (``SUMMARY_HEADERS``)."""
    return [
        str(summary["method"]),
        _cell(summary.get("afe")),
        _cell(summary.get("mu")),
        _cell(summary.get("worst_case_recovery"), signed=True),
        summary.get("worst_case_attack") or "–",
        interval_text(summary.get("worst_case_ci")),
        summary.get("worst_case_verdict") or "–",
        wins_text(summary.get("worst_case_wins") or {}),
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
        lines += ["", "| " + " | ".join(SUMMARY_HEADERS) + " |", "|---|---:|---:|---:|---|---:|---|---|"]
        lines += ["| " + " | ".join(summary_cells(summary)) + " |" for summary in summaries]
    return "\n".join(lines) + "\n"


def _clipped(value: float | None, bounds: tuple[float, float], default: float) -> float:
    return min(max(value, bounds[0]), bounds[1]) if _finite(value) else default


PLOT_RANGE = (-2.0, 3.0)  # interval bars are drawn within this, widened to the points (an interval can be
# unbounded)


def write_robustness_plot(summaries: Sequence[dict], path: str | Path) -> Path | None:
    """AFE (x) against worst-case recovery (y), one labelled point per method, with the worst case's
    selection-aware interval as a bar; a hollow point is "not distinguishable from no recovery" (its interval
    includes 0). ``None`` when no method has both values (the methods without one are named in a corner).
    Top right is the trap: forgotten by AFE, recovered under attack; the dashed line is a full recovery."""
    points = [s for s in summaries if _finite(s.get("afe")) and _finite(s.get("worst_case_recovery"))]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.8, 4.4))
    values = [s["worst_case_recovery"] for s in points]
    bounds = (min(PLOT_RANGE[0], min(values) - 0.2), max(PLOT_RANGE[1], max(values) + 0.2))
    for summary in points:
        x, y = summary["afe"], summary["worst_case_recovery"]
        interval = summary.get("worst_case_ci")
        if interval:
            low, high = _clipped(interval[0], bounds, bounds[0]), _clipped(interval[1], bounds, bounds[1])
            axes.plot([x, x], [low, high], color="grey", linewidth=1.0)
        verdict = summary.get("worst_case_verdict")
        # filled only for a claimed recovery; an interval without a verdict (an unbounded one, in an
        # attacks.json written before one was set) claims nothing either
        hollow = verdict != RECOVERED and (verdict is not None or bool(interval))
        (dot,) = axes.plot([x], [y], "o", markersize=6, fillstyle="none" if hollow else "full")
        label = summary["method"] + (" (not distinguishable)" if hollow else "")
        axes.annotate(label, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    axes.axhline(0.0, color="grey", linewidth=0.8)
    axes.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")  # as well as before unlearning
    notes = []
    if any(s.get("worst_case_ci") for s in points):
        notes.append(
            f"bars: selection-aware interval (clipped to {bounds[0]:.3g}…{bounds[1]:.3g}); hollow: "
            f"{NOT_DISTINGUISHABLE}"
        )
    left_out = [s["method"] for s in summaries if s not in points]
    if left_out:  # a method with nothing forgotten (or no attack scored) has no recovered share
        notes.append(f"no recovered share (nothing forgotten): {', '.join(left_out)}")
    if notes:
        axes.text(0.01, 0.01, "\n".join(notes), transform=axes.transAxes, fontsize=6.5, color="grey")
    axes.set_xlabel("AFE (forget seen QA; higher = more forgotten)")
    axes.set_ylabel("worst-case recovered share under attack")
    axes.set_xlim(-0.05, 1.05)
    axes.set_title("Forgetting vs recovery under attack")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def worst_case_sentence(summary: dict) -> str:
    """The worst case in words, with its selection-aware interval and verdict when it has one."""
    worst = summary.get("worst_case_recovery")
    if not _finite(worst):
        return "no attack could be scored"
    attack = summary["worst_case_attack"]
    interval, verdict = summary.get("worst_case_ci"), summary.get("worst_case_verdict")
    if not interval or verdict is None:
        return f"the strongest attack ({attack}) recovered {worst:+.1%} of what unlearning removed"
    level = (summary.get("bootstrap") or {}).get("level", 0.95)
    bounds = f"selection-aware {level:.0%} interval {interval_text(interval)} over every attack"
    if verdict == NOT_DISTINGUISHABLE:
        return (
            f"the worst case, {worst:+.1%} of what unlearning removed ({attack}), is {NOT_DISTINGUISHABLE} "
            f"({bounds} includes 0)"
        )
    removed = f"{worst:+.1%} of what unlearning removed"
    return f"the strongest attack ({attack}) recovered {removed} ({bounds}: {verdict})"


def model_card_section(summary: dict, results: Sequence[dict]) -> str:
    """A Markdown section for a model card: the worst-case recovery beside AFE and MU, and the attack rows."""
    return (
        "## Robustness of forgetting\n\n"
        f"AFE {_cell(summary.get('afe'))}, MU {_cell(summary.get('mu'))}; {worst_case_sentence(summary)}. "
        "Recovered share = (s after the attack − s after unlearning) / (s before − s after unlearning), s "
        "the mean answer similarity on the forget patients' questions; intervals resample patients (see "
        "docs/attacks.md).\n\n" + markdown_table(results)
    )


__all__ = [
    "MIN_FORGOTTEN",
    "RECOVERED_SHARE_FORMULA",
    "attack_label",
    "interval_text",
    "markdown_table",
    "model_card_section",
    "normalised_recovered_share",
    "public_rows",
    "recovered_share",
    "robustness_summary",
    "worst_case",
    "worst_case_sentence",
    "write_robustness_plot",
]
