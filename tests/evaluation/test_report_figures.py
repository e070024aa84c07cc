"""The report's figures draw the intervals its table shows, and their legends cover no data
(docs/evaluation.md, "Report")."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg", force=True)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402

from medunlearn.evaluation.plots import write_plots  # noqa: E402
from medunlearn.evaluation.report import headline  # noqa: E402

METHODS = [
    {
        "method": "fine-tuned",
        "afe": 0.05,
        "leakage_score": 0.9,
        "degeneration_score": 0.0,
        "mu_same_disease": 0.92,
        "mu_out_of_disease": 0.95,
        "mu_same_disease_ci": [0.85, 0.97],
        "mu_out_of_disease_ci": [0.91, 0.99],
    },
    {
        "method": "GradDiff",
        "afe": 0.7,
        "leakage_score": 0.1,
        "degeneration_score": 0.3,
        "mu_same_disease": 0.41,
        "mu_out_of_disease": 0.66,
        "mu_same_disease_ci": [0.30, 0.55],
        "mu_out_of_disease_ci": None,  # no interval: nothing drawn for it
    },
    {
        "method": "RMU",
        "afe": 0.98,
        "leakage_score": 0.0,
        "degeneration_score": 0.9,
        "mu_same_disease": 0.1,
        "mu_out_of_disease": 0.12,
        "mu_same_disease_ci": [0.02, 0.2],
        "mu_out_of_disease_ci": [0.05, 0.21],
    },
]
DRAWN_INTERVALS = {(0.85, 0.97), (0.91, 0.99), (0.30, 0.55), (0.02, 0.2), (0.05, 0.21)}


@pytest.fixture()
def figures(tmp_path, monkeypatch):
    """The figures ``write_plots`` drew, by file name (kept open instead of closed)."""
    kept = {}
    original_savefig = plt.Figure.savefig

    def savefig(figure, path, *args, **kwargs):
        kept[str(path).rsplit("/", 1)[-1]] = figure
        return original_savefig(figure, path, *args, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", savefig)
    monkeypatch.setattr(plt, "close", lambda *args: None)
    write_plots(METHODS, tmp_path)
    yield kept
    for figure in kept.values():
        figure.clf()


def drawn_intervals(axes) -> set[tuple[float, float]]:
    """(low, high) of every vertical error bar on ``axes``."""
    found = set()
    for container in axes.containers:
        if not isinstance(container, ErrorbarContainer):
            continue
        for collection in container.lines[2]:
            for (x0, y0), (x1, y1) in collection.get_segments():
                if x0 == x1:
                    found.add((round(min(y0, y1), 6), round(max(y0, y1), 6)))
    return found


@pytest.mark.parametrize("name", ["mu_same_vs_out_of_disease.png", "mu_afe_tradeoff.png"])
def test_every_mu_interval_of_the_table_is_drawn_as_an_error_bar(figures, name):
    (axes,) = figures[name].axes
    assert drawn_intervals(axes) == DRAWN_INTERVALS


def test_bars_without_an_interval_in_the_table_get_no_error_bar(figures):
    (axes,) = figures["leakage_vs_degeneration.png"].axes
    assert drawn_intervals(axes) == set()


@pytest.mark.parametrize(
    "name", ["mu_afe_tradeoff.png", "mu_same_vs_out_of_disease.png", "leakage_vs_degeneration.png"]
)
def test_the_legend_lies_outside_the_plotting_area(figures, name):
    figure = figures[name]
    figure.canvas.draw()
    (axes,) = figure.axes
    legend = axes.get_legend()
    assert legend is not None
    renderer = figure.canvas.get_renderer()
    assert not legend.get_window_extent(renderer).overlaps(axes.get_window_extent(renderer))


def test_the_headline_carries_the_tables_mu_intervals():
    rows = [
        {"method": "m", "population": "forget_seen", "qa_type": "all", "answer_forgetting": 0.5},
        {
            "method": "m",
            "population": "retain_same_disease",
            "qa_type": "all",
            "model_utility": 0.4,
            "model_utility_ci": [0.3, 0.5],
        },
        {
            "method": "m",
            "population": "retain_out_of_disease",
            "qa_type": "all",
            "model_utility": 0.6,
            "model_utility_ci": None,
        },
    ]
    (method,) = headline(rows)
    assert method["mu_same_disease_ci"] == [0.3, 0.5] and method["mu_out_of_disease_ci"] is None
