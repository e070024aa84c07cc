"""Compare evaluation folders: one table of method × population × QA type, a JSON summary and PNG plots.

LS is always shown next to DS: a near-zero leakage score means little when the answers are degenerate
(docs/benchmarks/amnesia.md, "Findings").

Attack results (``attacks.json`` of ``medunlearn attack``, docs/attacks.md) are read here as plain JSON
(this layer does not import ``medunlearn.attacks``): a method with one gets its worst-case recovery and worst
attack beside AFE and MU. The AFE-vs-worst-case plot is drawn by the caller's ``robustness_plot`` (the CLI
passes ``medunlearn.attacks.summary.write_robustness_plot``). Evaluations with notes memorization
(``notes_memorization`` in their summary) get a second table, :mod:`medunlearn.evaluation.notes_report`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.errors import MedunlearnError
from medunlearn.evaluation.notes_report import notes_payload, print_notes
from medunlearn.evaluation.populations import FORGET_POPULATIONS, POPULATIONS
from medunlearn.evaluation.robustness import (
    NOT_DISTINGUISHABLE,
    ROBUSTNESS_PLOT,
    STUDY_ROBUSTNESS_PLOT,
    WORST_CASE_KEYS,
    read_attack_summary,
    seeds_worst_cases,
    worst_case_caption,
    worst_case_text,
)
from medunlearn.evaluation.uncertainty import PER_EXAMPLE, TRAINING_SEED, afe_interval, mu_interval
from medunlearn.metrics.bootstrap import BootstrapConfig
from medunlearn.utils.tables import in_sections
from medunlearn.utils.user_files import read_json, read_parquet_frame

# (column header, summary key). Cells where a metric does not apply (MU on forget rows) stay empty.
TABLE_COLUMNS = (
    ("MU", "model_utility"),
    ("AFE", "answer_forgetting"),
    ("LS", "leakage_score"),
    ("DS", "degeneration_score"),
    ("ROUGE-L", "rouge_l_f1"),
    ("Prob", "prob"),
)
QA_TYPE_ORDER = ("factual", "reasoning", "all")


class ReportError(MedunlearnError, ValueError):
    """An evaluation folder cannot be reported (message names the folder and the problem)."""


def load_summary(eval_dir: str | Path) -> dict:
    """The ``summary.json`` of one evaluation folder."""
    path = Path(eval_dir) / "summary.json"
    if not path.is_file():
        raise ReportError(
            f"{eval_dir}: no summary.json (run `medunlearn evaluate ... --out {eval_dir}` "
            "to completion first)"
        )
    summary = read_json(path, expect=dict)  # the shared reader: encoding, syntax, NaN, type named
    if not isinstance(summary.get("populations"), dict):
        raise ReportError(f"{path}: has no 'populations' section")
    return summary


def method_names(summaries: list[dict], eval_dirs: list[Path]) -> list[str]:
    """The name of each run, made unique with the folder name where two runs share a name."""
    names = [summary.get("name") or Path(folder).name for summary, folder in zip(summaries, eval_dirs)]
    counts = Counter(names)
    return [
        f"{name} ({Path(folder).name})" if counts[name] > 1 else name
        for name, folder in zip(names, eval_dirs)
    ]


def _per_example(folder: Path) -> pd.DataFrame | None:
    path = folder / PER_EXAMPLE
    if not path.is_file():
        return None
    return read_parquet_frame(path, columns=["population", "patient_id", "qa_type", "similarity"])


def report_rows(
    eval_dirs, bootstrap: BootstrapConfig | None = None, attack_dirs: tuple[str | Path, ...] = ()
) -> list[dict]:
    """One row per method × population × QA type with the table's metrics (None where not applicable).

    Retained populations also get ``model_utility_ci`` = [low, high], the patient-bootstrap interval of MU
    (:mod:`medunlearn.evaluation.uncertainty`), when the folder holds its per-example scores. The forget
    seen "all" row of a method with attack results (:func:`read_attack_summary`) gets
    ``worst_case_recovery`` and ``worst_case_attack``.
    """
    bootstrap = bootstrap or BootstrapConfig()
    eval_dirs = [Path(d) for d in eval_dirs]
    summaries = [load_summary(d) for d in eval_dirs]
    rows = []
    for name, summary, folder in zip(method_names(summaries, eval_dirs), summaries, eval_dirs):
        per_example = _per_example(folder)
        robustness = read_attack_summary(folder, summary.get("name") or name, attack_dirs)
        for population in POPULATIONS:
            cells = summary["populations"].get(population, {})
            for qa_type in QA_TYPE_ORDER:
                if qa_type not in cells:
                    continue
                cell = cells[qa_type]
                row = {
                    "method": name,
                    "eval_dir": str(folder),
                    "forget_config": summary.get("forget_config"),
                    "population": population,
                    "qa_type": qa_type,
                    "n": cell.get("n"),
                }
                row.update({key: cell.get(key) for _, key in TABLE_COLUMNS})
                interval = None
                if per_example is not None and population not in FORGET_POPULATIONS:
                    interval = mu_interval(per_example, population, qa_type, bootstrap)
                row["model_utility_ci"] = None if interval is None else [interval.low, interval.high]
                if robustness is not None and (population, qa_type) == ("forget_seen", "all"):
                    row.update({key: robustness.get(key) for key in WORST_CASE_KEYS})
                    row["attacks_file"] = robustness["attacks_file"]
                rows.append(row)
    return rows


def _format(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def _format_interval(interval) -> str:
    return "–" if interval is None else f"{interval[0]:.2f}–{interval[1]:.2f}"


def interval_header(level: float) -> str:
    """The MU interval column's header at a bootstrap ``level`` (``"MU 95% CI"``; ``"MU 97.5% CI"``)."""
    return f"MU {level * 100:.4g}% CI"


def render_table(rows: list[dict], level: float = 0.95):
    """A ``rich`` table of the rows (methods separated by a rule); ``level``: the MU intervals' level."""
    from rich.table import Table

    table = Table(title="medunlearn evaluation", show_lines=False)
    attacked = any("worst_case_recovery" in row for row in rows)
    for header in ("method", "population", "QA type", "n"):
        table.add_column(header, no_wrap=True)
    for header, _ in TABLE_COLUMNS:
        table.add_column(header, justify="right", no_wrap=True, min_width=5)
        if header == "MU":
            table.add_column(interval_header(level), justify="right", no_wrap=True)
        if header == "AFE" and attacked:  # beside AFE and MU: a method that recovers shows at once
            table.add_column("worst-case recovery", justify="right", no_wrap=True)
            table.add_column("worst attack", no_wrap=True)
    for row in in_sections(table, rows, "method"):
        robustness = []
        if attacked:
            robustness = [
                worst_case_text(row) if "worst_case_recovery" in row else "",
                row.get("worst_case_attack") or ("–" if "worst_case_recovery" in row else ""),
            ]
        table.add_row(
            row["method"],
            row["population"],
            row["qa_type"],
            str(row["n"]),
            _format(row["model_utility"]),
            _format_interval(row.get("model_utility_ci")),
            _format(row["answer_forgetting"]),
            *robustness,
            *(_format(row[key]) for _, key in TABLE_COLUMNS[2:]),
        )
    return table


def headline(rows: list[dict]) -> list[dict]:
    """Per method, the numbers the plots show: AFE, LS, DS on forget seen QA; MU same- and out-of-disease."""
    by_method: dict[str, dict] = {}
    lookup = {(r["method"], r["population"], r["qa_type"]): r for r in rows}
    for method in dict.fromkeys(r["method"] for r in rows):
        forget = lookup.get((method, "forget_seen", "all"), {})
        by_method[method] = {
            "method": method,
            "afe": forget.get("answer_forgetting"),
            "leakage_score": forget.get("leakage_score"),
            "degeneration_score": forget.get("degeneration_score"),
            "mu_same_disease": lookup.get((method, "retain_same_disease", "all"), {}).get("model_utility"),
            "mu_out_of_disease": lookup.get((method, "retain_out_of_disease", "all"), {}).get(
                "model_utility"
            ),
            # The table's MU intervals, drawn as error bars by the plots.
            "mu_same_disease_ci": lookup.get((method, "retain_same_disease", "all"), {}).get(
                "model_utility_ci"
            ),
            "mu_out_of_disease_ci": lookup.get((method, "retain_out_of_disease", "all"), {}).get(
                "model_utility_ci"
            ),
        }
        if "worst_case_recovery" in forget:
            by_method[method].update({key: forget.get(key) for key in WORST_CASE_KEYS})
    return list(by_method.values())


def write_report(
    eval_dirs,
    out_dir: str | Path,
    *,
    console=None,
    bootstrap: BootstrapConfig | None = None,
    attack_dirs: tuple[str | Path, ...] = (),
    robustness_plot=None,
) -> dict:
    """Print the table, write ``report.json`` and the PNG plots into ``out_dir``; returns the JSON payload.

    ``attack_dirs``: attack folders to read besides those found next to each evaluation folder;
    ``robustness_plot(summaries, path)``: draws AFE against worst-case recovery (``ROBUSTNESS_PLOT``) when a
    method has attack results."""
    from medunlearn.evaluation.plots import write_plots

    bootstrap = bootstrap or BootstrapConfig()
    rows = report_rows(eval_dirs, bootstrap, tuple(attack_dirs))
    if not rows:
        raise ReportError("the evaluation folders hold no population results")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = headline(rows)
    plots = write_plots(summary, out_dir)
    attacked = [m for m in summary if "worst_case_recovery" in m]
    if attacked and robustness_plot is not None:
        plot = robustness_plot(attacked, out_dir / ROBUSTNESS_PLOT)
        plots += [plot] if plot is not None else []
    payload = {
        "columns": {header: key for header, key in TABLE_COLUMNS},
        "rows": rows,
        "methods": summary,
        "plots": [str(p.name) for p in plots],
        "bootstrap": {
            "n_resamples": bootstrap.n_resamples,
            "level": bootstrap.level,
            "seed": bootstrap.seed,
            "clusters": "patients",
            "applies_to": "model_utility_ci",
        },
    }
    summaries = [load_summary(d) for d in eval_dirs]
    notes = notes_payload(method_names(summaries, [Path(d) for d in eval_dirs]), summaries)
    if notes is not None:  # intervals: the summaries' own (patient-cluster bootstrap of the evaluation)
        payload["notes_memorization"] = notes
    (out_dir / "report.json").write_text(json.dumps(payload, indent=2))
    if console is not None:
        console.print(render_table(rows, bootstrap.level))
        if notes is not None:
            print_notes(console, notes, (notes.get("bootstrap") or {}).get("level", 0.95))
    return payload


# ---------------------------------------------------------------------------------------------------------
# A study folder (docs/study.md, "Figures and tables"): the grid's results against forget size.

STUDY_TABLE_COLUMNS = (
    ("AFE", "afe"),
    ("AFE holdout", "afe_holdout"),
    ("MU same", "mu_same"),
    ("MU out", "mu_out"),
    ("LS", "ls"),
    ("DS", "ds"),
)
# (point key, population, QA type, summary key) of every value the study report shows.
STUDY_VALUES = (
    ("afe", "forget_seen", "all", "answer_forgetting"),
    ("afe_factual", "forget_seen", "factual", "answer_forgetting"),
    ("afe_reasoning", "forget_seen", "reasoning", "answer_forgetting"),
    ("afe_holdout", "forget_holdout", "all", "answer_forgetting"),
    ("mu_same", "retain_same_disease", "all", "model_utility"),
    ("mu_same_factual", "retain_same_disease", "factual", "model_utility"),
    ("mu_same_reasoning", "retain_same_disease", "reasoning", "model_utility"),
    ("mu_out", "retain_out_of_disease", "all", "model_utility"),
    ("ls", "forget_seen", "all", "leakage_score"),
    ("ds", "forget_seen", "all", "degeneration_score"),
)


def split_series(row: dict) -> str:
    """The x-axis series of a forget config: ``random`` (forget_N) or ``disease <name>``."""
    return "random" if row.get("split") == "random" else f"disease {row.get('disease')}"


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _runs_per_example(rows: list[dict]) -> pd.DataFrame | None:
    """The per-example tables of a point's runs (one per seed), concatenated, each row tagged with its run's
    seed in ``TRAINING_SEED``; ``None`` when no run has one."""
    runs = {r["eval_dir"]: r["seed"] for r in rows}
    tables = [
        read_parquet_frame(Path(folder) / PER_EXAMPLE).assign(**{TRAINING_SEED: str(seed)})
        for folder, seed in runs.items()
        if (Path(folder) / PER_EXAMPLE).is_file()
    ]
    return pd.concat(tables, ignore_index=True) if tables else None


def _point_intervals(per_example, before, bootstrap: BootstrapConfig) -> dict:
    """``<key>_ci`` of every AFE and MU value of ``STUDY_VALUES`` (``None`` where there are no scores)."""
    intervals = {}
    for key, population, qa_type, summary_key in STUDY_VALUES:
        interval = None
        if per_example is not None and summary_key == "model_utility":
            interval = mu_interval(per_example, population, qa_type, bootstrap)
        elif per_example is not None and before is not None and summary_key == "answer_forgetting":
            interval = afe_interval(per_example, before, population, qa_type, bootstrap)
        if summary_key in ("model_utility", "answer_forgetting"):
            intervals[f"{key}_ci"] = None if interval is None else [interval.low, interval.high]
    return intervals


def study_interval_text(points: list[dict], bootstrap: BootstrapConfig) -> str:
    """What the study report's intervals are, for its captions: patient-cluster bootstrap when every point
    is one run, else the two-level bootstrap over training seeds and patients (docs/study.md, "Intervals")."""
    level = f"{bootstrap.level * 100:.4g}%"
    settings = f"{bootstrap.n_resamples} resamples, seed {bootstrap.seed}"
    if all(len(p["seeds"]) <= 1 for p in points):
        return f"{level} patient-cluster bootstrap, {settings}"
    return (
        f"{level} two-level bootstrap: training seeds, then patients, {settings} (so an interval includes "
        "the variation between a point's seeds; one-seed points: patients only)"
    )


def study_points(results: dict, bootstrap: BootstrapConfig | None = None) -> list[dict]:
    """One point per (method label, series, forget size): every value of ``STUDY_VALUES`` from the summaries
    (mean over seeds) and, for AFE and MU, ``<key>_ci`` = [low, high] from the per-example scores (AFE paired
    with the fine-tuned model's scores of the same examples): the patient-cluster bootstrap for one seed, the
    two-level bootstrap (seeds, then patients; :mod:`medunlearn.metrics.bootstrap`) for several."""
    bootstrap = bootstrap or BootstrapConfig()
    groups: dict[tuple, list[dict]] = {}
    for row in results["rows"]:
        groups.setdefault((row["label"], row["forget_config"]), []).append(row)
    baseline_dirs = {r["forget_config"]: r["eval_dir"] for r in results["rows"] if r["kind"] == "baseline"}
    points = []
    for (label, forget_config), rows in groups.items():
        first = rows[0]
        point = {
            "label": label,
            "kind": first["kind"],
            "forget_config": forget_config,
            "series": split_series(first),
            "forget_size": first["forget_size"],
            "seeds": sorted({r["seed"] for r in rows if r["seed"] is not None}),
        }
        for key, population, qa_type, summary_key in STUDY_VALUES:
            point[key] = _mean(
                [
                    r.get(summary_key)
                    for r in rows
                    if r["population"] == population and r["qa_type"] == qa_type
                ]
            )
        if any("worst_case_recovery" in r for r in rows):  # a study with an attack stage (one per seed)
            seen = [r for r in rows if r["population"] == "forget_seen" and r["qa_type"] == "all"]
            point["worst_case_recovery"] = _mean([r.get("worst_case_recovery") for r in seen])
            worst = [r for r in seen if r.get("worst_case_recovery") is not None]
            point["worst_case_attack"] = (
                max(worst, key=lambda r: r["worst_case_recovery"])["worst_case_attack"] if worst else None
            )
            point.update(seeds_worst_cases(seen, label))
        before_dir = baseline_dirs.get(forget_config)
        before = None
        if before_dir is not None and (Path(before_dir) / PER_EXAMPLE).is_file():
            before = read_parquet_frame(Path(before_dir) / PER_EXAMPLE)
        point.update(_point_intervals(_runs_per_example(rows), before, bootstrap))
        points.append(point)
    order = {"baseline": 0, "cell": 1}
    return sorted(points, key=lambda p: (p["series"], order[p["kind"]], p["label"], p["forget_size"] or 0))


def _study_cell(point: dict, key: str, latex: bool = False) -> str:
    """A study table cell; a worst case that is not distinguishable from no recovery in every seed is
    marked "n.d." (the caption says so)."""
    text = _cell_text(point.get(key), latex)
    if key == "worst_case_recovery" and point.get("worst_case_verdict") == NOT_DISTINGUISHABLE:
        text += " (n.d.)"
    return text


def _cell_text(value, latex: bool = False) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "--" if latex else "–"
    return f"{value:.3f}"


def study_columns(points: list[dict]) -> tuple[tuple[str, str], ...]:
    """``STUDY_TABLE_COLUMNS``, and the worst-case recovery when the study ran its attack stage."""
    if any("worst_case_recovery" in p for p in points):
        return (*STUDY_TABLE_COLUMNS, ("Worst-case recovery", "worst_case_recovery"))
    return STUDY_TABLE_COLUMNS


def study_table_markdown(points: list[dict]) -> str:
    """The paper's Table 2 layout, one table per series: methods × forget sizes, AFE (seen and holdout), MU of
    same- and out-of-disease retained patients, LS beside DS (and the worst-case recovery under attack)."""
    lines = []
    columns = study_columns(points)
    for series in dict.fromkeys(p["series"] for p in points):
        lines += [f"**{series}**", ""]
        lines.append("| Method | Forget % | " + " | ".join(h for h, _ in columns) + " |")
        lines.append("|---|---:|" + "---:|" * len(columns))
        for p in points:
            if p["series"] == series:
                values = " | ".join(_study_cell(p, key) for _, key in columns)
                lines.append(f"| {p['label']} | {p['forget_size']} | {values} |")
        lines.append("")
    return "\n".join(lines)


def _latex_escape(text: str) -> str:
    return (
        str(text)
        .replace("\\", r"\textbackslash{}")
        .replace("_", r"\_")
        .replace("%", r"\%")
        .replace("&", r"\&")
    )


def study_table_latex(points: list[dict], caption: str) -> str:
    """The same table in LaTeX (booktabs): one block per series, a rule between methods."""
    columns = study_columns(points)
    headers = " & ".join(_latex_escape(h) for h, _ in columns)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        r"\begin{tabular}{ll" + "r" * (1 + len(columns)) + "}",
        r"\toprule",
        rf"Split & Method & Forget \% & {headers} \\",
    ]
    for series in dict.fromkeys(p["series"] for p in points):
        lines.append(r"\midrule")
        previous = None
        for p in (p for p in points if p["series"] == series):
            if previous is not None and p["label"] != previous:
                lines.append(r"\cmidrule(l){2-" + str(3 + len(columns)) + "}")
            split = _latex_escape(series) if previous is None else ""
            previous = p["label"]
            values = " & ".join(_study_cell(p, key, latex=True) for _, key in columns)
            lines.append(rf"{split} & {_latex_escape(p['label'])} & {p['forget_size']} & {values} \\")
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{_latex_escape(caption)}}}",
        r"\end{table}",
        "",
    ]
    return "\n".join(lines)


def write_study_report(
    results: dict,
    out_dir: str | Path,
    *,
    console=None,
    bootstrap: BootstrapConfig | None = None,
    robustness_plot=None,
) -> dict:
    """Figures and tables of a study's results (``medunlearn.study.collect.collect_results``'s payload):
    ``study_report.json``, ``table2.md``, ``table2.tex`` and the ``study_*.png`` figures in ``out_dir``.

    With an attack stage (cells with ``worst_case_recovery``) the tables get its column and
    ``robustness_plot(summaries, path)`` draws ``STUDY_ROBUSTNESS_PLOT``: AFE against worst-case recovery, one
    point per method and forget config."""
    from medunlearn.evaluation.plots import write_study_figures

    bootstrap = bootstrap or BootstrapConfig()
    if not results.get("rows"):
        raise ReportError(f"{results.get('study_dir', 'the study')}: no finished stage has results yet")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    points = study_points(results, bootstrap)
    intervals = study_interval_text(points, bootstrap)
    caption = (
        f"Study {results.get('study')}: AFE (forget patients' seen and holdout QA), MU of retained same- and "
        "out-of-disease patients, LS beside DS, per method and forget size ('finetuned': the model before "
        f"unlearning); with several seeds, the mean over seeds. Intervals: {intervals}."
    )
    caption += worst_case_caption(points)
    (out_dir / "table2.md").write_text(f"{caption}\n\n{study_table_markdown(points)}")
    (out_dir / "table2.tex").write_text(study_table_latex(points, caption))
    figures = write_study_figures(points, out_dir, bootstrap, intervals=intervals)
    attacked = [p for p in points if p["kind"] == "cell" and "worst_case_recovery" in p]
    if attacked and robustness_plot is not None:
        summaries = [
            {
                "method": f"{p['label']} {p['forget_config']}",
                "afe": p["afe"],
                "mu": p["mu_same"],
                "worst_case_recovery": p["worst_case_recovery"],
                "worst_case_attack": p.get("worst_case_attack"),
                "worst_case_ci": p.get("worst_case_ci"),
                "worst_case_verdict": p.get("worst_case_verdict"),
            }
            for p in attacked
        ]
        plot = robustness_plot(summaries, out_dir / STUDY_ROBUSTNESS_PLOT)
        figures = [*figures, *([plot] if plot is not None else [])]
    payload = {
        "study": results.get("study"),
        "study_dir": results.get("study_dir"),
        "points": points,
        "missing": results.get("missing", []),
        "tables": ["table2.md", "table2.tex"],
        "figures": [p.name for p in figures],
        "caption": caption,
        "bootstrap": {
            "n_resamples": bootstrap.n_resamples,
            "level": bootstrap.level,
            "seed": bootstrap.seed,
            "clusters": (
                "patients" if all(len(p["seeds"]) <= 1 for p in points) else "training seeds, then patients"
            ),
            "applies_to": "every *_ci (AFE and MU)",
        },
    }
    (out_dir / "study_report.json").write_text(json.dumps(payload, indent=2, default=str))
    if console is not None:
        console.print(study_table_markdown(points), markup=False, highlight=False)
    return payload
