"""The two figures of a MUSE protocol study [MUSE: Shi et al. 2024, C5 scalability and C6 sustainability]:
utility (KnowMem on the retain set, ``knowmem_r``) and PrivLeak against the forget set's size (scalability:
the documents of ``scal/forget_k``) or the request number (sustainability: request k unlearns
``sust/forget_k``).

One line per method through its mean over seeds. With two seeds or more each point has a bar from the lowest
to the highest seed: their spread, not a confidence interval (a handful of training runs is too few for one;
docs/study.md, "MUSE protocols"). With one seed the points are single runs. The target model (before
unlearning) and the retain model (never trained on a fold) are horizontal reference lines; the legend sits
right of the plotting area, where it covers no point. Matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from medunlearn.config_names import MUSE_FOLDS

# name, row key, y label, title
FIGURES = (
    ("utility", "knowmem_r", "KnowMem on retain (ROUGE-L F1)", "utility"),
    ("privleak", "privleak", "PrivLeak (%; 0 = the retain model)", "privacy leakage"),
)
# protocol -> (row key of the x value, x label, what the x axis is in a title)
X_AXES = {
    "scalability": ("fold_documents", "forget set size (documents in scal/forget_k)", "forget set size"),
    "sustainability": (
        "request",
        "unlearning request k (unlearns sust/forget_k from request k - 1's model)",
        "unlearning requests",
    ),
}
REFERENCES = (("finetuned", "target model (before unlearning)", "--"), ("retain", "retain model", ":"))


def _x(row: dict, x_key: str) -> float:
    """The row's x value; a fold whose size is unknown is placed at its number."""
    value = row.get(x_key)
    return float(MUSE_FOLDS.index(row["fold"]) + 1 if value is None else value)


def method_points(rows: list[dict], key: str, x_key: str) -> dict[str, list[tuple]]:
    """Per method label: ``(x, fold, mean, lowest, highest, seeds)`` at each x, over the seeds that have a
    value there."""
    points: dict[str, dict[float, list]] = {}
    folds: dict[float, str] = {}
    for row in rows:
        if row["kind"] != "cell" or row.get(key) is None:
            continue
        x = _x(row, x_key)
        folds[x] = row["fold"]
        points.setdefault(row["label"], {}).setdefault(x, []).append(float(row[key]))
    return {
        label: [
            (x, folds[x], float(np.mean(v)), float(np.min(v)), float(np.max(v)), len(v))
            for x, v in sorted(by_x.items())
        ]
        for label, by_x in points.items()
    }


def _spacing(xs: list[float]) -> float:
    gaps = np.diff(sorted(set(xs)))
    return float(gaps.min()) if len(gaps) else 1.0


def _caption(points: dict[str, list[tuple]]) -> str:
    seeds = sorted({p[5] for series in points.values() for p in series})
    if seeds and seeds[-1] >= 2:
        return (
            f"Lines: mean over seeds ({'/'.join(map(str, seeds))} per point); bars: lowest to highest seed "
            "(spread of the runs, not a confidence interval)."
        )
    return "One seed: each point is one run (no interval)."


def plot_protocol(rows: list[dict], figure: tuple, protocol: str, title: str, path: Path) -> Path:
    """One figure (``figure``: a :data:`FIGURES` entry) of a protocol study's ``rows``."""
    from medunlearn.evaluation.plots import _pyplot

    plt = _pyplot()
    _, key, ylabel, what = figure
    x_key, xlabel, against = X_AXES[protocol]
    points = method_points(rows, key, x_key)
    xs = [p[0] for series in points.values() for p in series]
    dodge = 0.06 * _spacing(xs)  # methods side by side at each x, so that their bars do not overlap
    fig, axes = plt.subplots(figsize=(8.5, 4.2))
    for index, (label, series) in enumerate(points.items()):
        x = np.array([p[0] for p in series]) + (index - (len(points) - 1) / 2) * dodge
        mean = np.array([p[2] for p in series])
        color = f"C{index % 10}"
        axes.plot(x, mean, "-o", color=color, markersize=5, label=label)
        spread = [i for i, p in enumerate(series) if p[5] >= 2]
        if spread:
            low = mean[spread] - np.array([series[i][3] for i in spread])
            high = np.array([series[i][4] for i in spread]) - mean[spread]
            axes.errorbar(x[spread], mean[spread], yerr=(low, high), fmt="none", ecolor=color, capsize=4)
    for name, legend, style in REFERENCES:
        value = next((r[key] for r in rows if r["stage"] == name and r.get(key) is not None), None)
        if value is not None:
            axes.axhline(
                value, color="0.35" if name == "finetuned" else "black", linestyle=style, label=legend
            )
    ticks = sorted({(p[0], p[1]) for series in points.values() for p in series})
    axes.set_xticks([t[0] for t in ticks], [f"{t[0]:g}\n({t[1]})" for t in ticks])
    if ticks:
        axes.set_xlim(ticks[0][0] - 0.5 * _spacing(xs), ticks[-1][0] + 0.5 * _spacing(xs))
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    axes.set_title(f"MUSE {protocol} (study {title}): {what} against {against}")
    axes.legend(
        fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, title="method"
    )
    fig.text(0.01, 0.005, _caption(points), fontsize="x-small", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def figure_values(rows: list[dict], protocol: str) -> dict:
    """Every value the figures draw, by figure: each method's points (``x``, ``fold``, ``mean``, ``lowest``,
    ``highest``, ``seeds``) and the reference lines (``muse_<protocol>_figures.json``)."""
    x_key = X_AXES[protocol][0]
    values = {}
    for name, key, _, _ in FIGURES:
        points = method_points(rows, key, x_key)
        fields = ("x", "fold", "mean", "lowest", "highest", "seeds")
        values[name] = {
            "metric": key,
            "x": x_key,
            "methods": {label: [dict(zip(fields, p)) for p in series] for label, series in points.items()},
            "references": {r["stage"]: r.get(key) for r in rows if r["kind"] == "baseline"},
        }
    return values


def write_muse_figures(rows: list[dict], out_dir: str | Path, protocol: str, title: str) -> list[Path]:
    """``muse_<protocol>_utility.png`` and ``muse_<protocol>_privleak.png`` in ``out_dir``, and what they draw
    in ``muse_<protocol>_figures.json`` (nothing until a cell has finished)."""
    if not any(row["kind"] == "cell" for row in rows):
        return []
    out_dir = Path(out_dir)
    values = json.dumps(figure_values(rows, protocol), indent=2)
    (out_dir / f"muse_{protocol}_figures.json").write_text(values)
    return [
        plot_protocol(rows, figure, protocol, title, out_dir / f"muse_{protocol}_{figure[0]}.png")
        for figure in FIGURES
    ]


__all__ = ["FIGURES", "X_AXES", "figure_values", "method_points", "plot_protocol", "write_muse_figures"]
