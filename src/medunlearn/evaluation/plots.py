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


def plot_tradeoff(methods: list[dict], path: Path) -> Path:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6, 4.5))
    for index, method in enumerate(methods):
        color = f"C{index % 10}"
        afe = _value(method["afe"])
        axes.scatter(
            [afe], [_value(method["mu_same_disease"])], color=color, marker="o", label=f"{method['method']}"
        )
        axes.scatter([afe], [_value(method["mu_out_of_disease"])], color=color, marker="^", facecolors="none")
    axes.set_xlabel("AFE on forget patients (seen QA)")
    axes.set_ylabel("MU of retained patients")
    axes.set_xlim(-0.05, 1.05)
    axes.set_ylim(-0.05, 1.05)
    axes.set_title("Forgetting vs utility (● same disease, △ out of disease)")
    axes.legend(fontsize="small", loc="lower left")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _grouped_bars(
    methods: list[dict], series: list[tuple[str, str]], ylabel: str, title: str, path: Path
) -> Path:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(max(7, 1.4 * len(methods) + 2), 4))
    x = np.arange(len(methods))
    width = 0.8 / len(series)
    for offset, (key, label) in enumerate(series):
        values = np.array([_value(m[key]) for m in methods])
        positions = x + (offset - (len(series) - 1) / 2) * width
        bars = axes.bar(positions, np.nan_to_num(values), width, label=label)
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
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
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
