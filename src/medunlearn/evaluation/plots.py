"""PNG plots of a report (matplotlib, Agg backend: no display needed).

- ``mu_afe_tradeoff.png``: per method, MU of the retained same-disease and out-of-disease patients against
  AFE on the forget patients (top right is best: forgotten and still useful);
- ``mu_same_vs_out_of_disease.png``: the collateral damage of forgetting on patients with the same disease;
- ``leakage_vs_degeneration.png``: LS beside DS, so that a low LS bought by babbling is visible.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _value(x) -> float:
    return np.nan if x is None else float(x)


def _interval_bars(axes, x, intervals, color) -> None:
    """Vertical error bars from each interval's low to its high (the interval as given: a percentile
    bootstrap interval need not be centred on the estimate); ``None`` draws nothing."""
    drawn = [(position, interval) for position, interval in zip(x, intervals) if interval is not None]
    if not drawn:
        return
    positions = [position for position, _ in drawn]
    lows = np.array([_value(interval[0]) for _, interval in drawn])
    highs = np.array([_value(interval[1]) for _, interval in drawn])
    axes.errorbar(
        positions, (lows + highs) / 2, yerr=(highs - lows) / 2, fmt="none", ecolor=color, capsize=3, lw=1
    )


def _legend_outside(axes, **kwargs) -> None:
    """The legend right of the plotting area, where it covers no point or bar."""
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)


def plot_tradeoff(methods: list[dict], path: Path) -> Path:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7.5, 4.5))
    for index, method in enumerate(methods):
        color = f"C{index % 10}"
        afe = _value(method["afe"])
        axes.scatter(
            [afe], [_value(method["mu_same_disease"])], color=color, marker="o", label=f"{method['method']}"
        )
        axes.scatter([afe], [_value(method["mu_out_of_disease"])], color=color, marker="^", facecolors="none")
        for key in ("mu_same_disease_ci", "mu_out_of_disease_ci"):
            _interval_bars(axes, [afe], [method.get(key)], color)
    axes.set_xlabel("AFE on forget patients (seen QA)")
    axes.set_ylabel("MU of retained patients")
    axes.set_xlim(-0.05, 1.05)
    axes.set_ylim(-0.05, 1.05)
    axes.set_title("Forgetting vs utility (● same disease, △ out of disease)")
    _legend_outside(axes, title="method")
    _interval_caption(figure, _has_intervals(methods, ("mu_same_disease_ci", "mu_out_of_disease_ci")))
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return path


def _has_intervals(methods: list[dict], keys) -> bool:
    return any(method.get(key) for method in methods for key in keys)


def _interval_caption(figure, has_intervals: bool) -> None:
    if has_intervals:
        figure.text(
            0.01,
            0.0,
            "Error bars: the MU intervals of the report table (patient-cluster bootstrap, report.json).",
            fontsize="x-small",
            va="bottom",
        )


def _grouped_bars(
    methods: list[dict], series: list[tuple[str, str]], ylabel: str, title: str, path: Path
) -> Path:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(max(8, 1.4 * len(methods) + 3), 4))
    x = np.arange(len(methods))
    width = 0.8 / len(series)
    for offset, (key, label) in enumerate(series):
        values = np.array([_value(m[key]) for m in methods])
        positions = x + (offset - (len(series) - 1) / 2) * width
        bars = axes.bar(positions, np.nan_to_num(values), width, label=label)
        # Where the table has an interval for the bar (``<key>_ci``), it is drawn on it.
        _interval_bars(axes, positions, [m.get(f"{key}_ci") for m in methods], "black")
        # A missing value (e.g. no out-of-disease patient in a random forget set) is marked, not drawn as 0.
        for position, value in zip(positions, values):
            if np.isnan(value):
                axes.text(
                    position,
                    0.02,
                    "n/a",
                    ha="center",
                    va="bottom",
                    fontsize="small",
                    color=bars.patches[0].get_facecolor(),
                )
    axes.set_xticks(x, [m["method"] for m in methods], rotation=20, ha="right")
    axes.set_ylim(0, 1.05)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    _legend_outside(axes)
    _interval_caption(figure, _has_intervals(methods, [f"{key}_ci" for key, _ in series]))
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return path


def write_plots(methods: list[dict], out_dir: str | Path) -> list[Path]:
    """Write the three plots for ``report.headline`` rows; returns their paths."""
    out_dir = Path(out_dir)
    return [
        plot_tradeoff(methods, out_dir / "mu_afe_tradeoff.png"),
        _grouped_bars(
            methods,
            [("mu_same_disease", "same disease"), ("mu_out_of_disease", "out of disease")],
            "MU of retained patients",
            "Collateral damage: same-disease vs out-of-disease MU",
            out_dir / "mu_same_vs_out_of_disease.png",
        ),
        _grouped_bars(
            methods,
            [("leakage_score", "LS (leakage)"), ("degeneration_score", "DS (degeneration)")],
            "share",
            "Leakage beside degeneration (forget patients)",
            out_dir / "leakage_vs_degeneration.png",
        ),
    ]


# ---------------------------------------------------------------------------------------------------------
# Study figures: values against forget size, one panel per method, one line per split series (random forget
# sets and each disease's), 95% patient-bootstrap bands where an interval exists.

SERIES_STYLES = ("-", "--", ":", "-.")


def _series_lines(axes, points: list[dict], key: str, color: str, label: str, series_names: list[str]):
    for index, series in enumerate(series_names):
        rows = sorted(
            (p for p in points if p["series"] == series and p["forget_size"] is not None),
            key=lambda p: p["forget_size"],
        )
        if not rows:
            continue
        x = np.array([p["forget_size"] for p in rows], dtype=float)
        y = np.array([_value(p.get(key)) for p in rows])
        if np.isnan(y).all():
            continue
        style = SERIES_STYLES[index % len(SERIES_STYLES)]
        axes.plot(x, y, style, color=color, marker="o", markersize=3, label=f"{label} ({series})")
        intervals = [p.get(f"{key}_ci") for p in rows]
        if any(i is not None for i in intervals):
            low = np.array([_value(i[0]) if i else np.nan for i in intervals])
            high = np.array([_value(i[1]) if i else np.nan for i in intervals])
            axes.fill_between(x, low, high, color=color, alpha=0.15, linewidth=0)


def plot_against_forget_size(
    points: list[dict], lines: list[tuple[str, str]], ylabel: str, title: str, caption: str, path: Path
) -> Path:
    """One panel per method label; in each, every ``(key, legend label)`` of ``lines`` per split series."""
    plt = _pyplot()
    labels = list(dict.fromkeys(p["label"] for p in points))
    series_names = list(dict.fromkeys(p["series"] for p in points))
    columns = min(4, len(labels))
    rows = -(-len(labels) // columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(3.6 * columns, 3.0 * rows + 0.9), squeeze=False, sharey=True
    )
    for index, label in enumerate(labels):
        panel = axes[index // columns][index % columns]
        mine = [p for p in points if p["label"] == label]
        for line_index, (key, legend) in enumerate(lines):
            _series_lines(panel, mine, key, f"C{line_index}", legend, series_names)
        panel.set_title(label)
        panel.set_xlabel("forget size (% of patients)")
        panel.set_ylim(-0.05, 1.05)
        panel.grid(alpha=0.3)
        if index % columns == 0:
            panel.set_ylabel(ylabel)
    for index in range(len(labels), rows * columns):
        axes[index // columns][index % columns].axis("off")
    handles, names = axes[0][0].get_legend_handles_labels()
    for panel in axes.flat:
        for handle, name in zip(*panel.get_legend_handles_labels()):
            if name not in names:
                handles.append(handle)
                names.append(name)
    figure.suptitle(title)
    legend_rows = -(-len(names) // 4)
    bottom = (0.35 + 0.25 * legend_rows) / figure.get_figheight()  # inches → figure fraction
    figure.legend(
        handles,
        names,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.3 / figure.get_figheight()),
        ncol=min(4, max(1, len(names))),
        fontsize="small",
    )
    figure.text(0.5, 0.02 / figure.get_figheight(), caption, ha="center", va="bottom", fontsize="x-small")
    figure.tight_layout(rect=(0, bottom, 1, 0.95))
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def write_study_figures(
    points: list[dict], out_dir: str | Path, bootstrap, intervals: str | None = None
) -> list[Path]:
    """The study report's five figures (PNG) for ``medunlearn.evaluation.report.study_points``;
    ``intervals``: what the bands are (``report.study_interval_text``), default the patient bootstrap."""
    out_dir = Path(out_dir)
    intervals = intervals or (
        f"{bootstrap.level:.0%} patient-cluster bootstrap ({bootstrap.n_resamples} resamples, seed "
        f"{bootstrap.seed})"
    )
    bands = f"Bands: {intervals}; line style = split series."
    figures = (
        (
            "study_mu_vs_forget_size.png",
            [("mu_same", "MU same disease"), ("mu_out", "MU out of disease")],
            "MU of retained patients",
            "Collateral damage: retained patients' MU against forget size",
            bands,
        ),
        (
            "study_afe_vs_forget_size.png",
            [("afe", "AFE")],
            "AFE (forget patients, seen QA)",
            "Forgetting against forget size",
            bands,
        ),
        (
            "study_ls_ds.png",
            [("ls", "LS (leakage)"), ("ds", "DS (degeneration)")],
            "share (forget patients)",
            "Leakage beside degeneration",
            "No bands (summary values); line style = split series.",
        ),
        (
            "study_factual_vs_reasoning.png",
            [
                ("afe_factual", "AFE factual"),
                ("afe_reasoning", "AFE reasoning"),
                ("mu_same_factual", "MU same, factual"),
                ("mu_same_reasoning", "MU same, reasoning"),
            ],
            "AFE / MU",
            "Factual vs reasoning QA",
            bands,
        ),
        (
            "study_holdout.png",
            [("afe", "AFE seen QA"), ("afe_holdout", "AFE unseen (holdout) QA")],
            "AFE (forget patients)",
            "The forget patients' unseen questions",
            bands,
        ),
    )
    return [
        plot_against_forget_size(points, lines, ylabel, title, caption, out_dir / name)
        for name, lines, ylabel, title, caption in figures
    ]
