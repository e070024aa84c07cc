"""Compare evaluation folders: one table of method × population × QA type, a JSON summary and PNG plots.

LS is always shown next to DS: a near-zero leakage score means little when the answers are degenerate
(docs/benchmarks/amnesia.md, "Findings").
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd

from medunlearn.errors import MedunlearnError
from medunlearn.evaluation.populations import FORGET_POPULATIONS, POPULATIONS
from medunlearn.evaluation.uncertainty import PER_EXAMPLE, mu_interval
from medunlearn.metrics.bootstrap import BootstrapConfig

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
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ReportError(f"{path}: not valid JSON ({error})") from None
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
    return pd.read_parquet(path, columns=["population", "patient_id", "qa_type", "similarity"])


def report_rows(eval_dirs, bootstrap: BootstrapConfig | None = None) -> list[dict]:
    """One row per method × population × QA type with the table's metrics (None where not applicable).

    Retained populations also get ``model_utility_ci`` = [low, high], the patient-bootstrap interval of MU
    (:mod:`medunlearn.evaluation.uncertainty`), when the folder holds its per-example scores.
    """
    bootstrap = bootstrap or BootstrapConfig()
    eval_dirs = [Path(d) for d in eval_dirs]
    summaries = [load_summary(d) for d in eval_dirs]
    rows = []
    for name, summary, folder in zip(method_names(summaries, eval_dirs), summaries, eval_dirs):
        per_example = _per_example(folder)
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
                rows.append(row)
    return rows


def _format(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def _format_interval(interval) -> str:
    return "–" if interval is None else f"{interval[0]:.2f}–{interval[1]:.2f}"


def render_table(rows: list[dict]):
    """A ``rich`` table of the rows (methods separated by a rule)."""
    from rich.table import Table

    table = Table(title="medunlearn evaluation", show_lines=False)
    for header in ("method", "population", "QA type", "n"):
        table.add_column(header, no_wrap=True)
    for header, _ in TABLE_COLUMNS:
        table.add_column(header, justify="right", no_wrap=True, min_width=5)
        if header == "MU":
            table.add_column("MU 95% CI", justify="right", no_wrap=True)
    previous = None
    for row in rows:
        if previous is not None and row["method"] != previous:
            table.add_section()
        previous = row["method"]
        table.add_row(
            row["method"],
            row["population"],
            row["qa_type"],
            str(row["n"]),
            _format(row["model_utility"]),
            _format_interval(row.get("model_utility_ci")),
            *(_format(row[key]) for _, key in TABLE_COLUMNS[1:]),
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
        }
    return list(by_method.values())


def write_report(
    eval_dirs, out_dir: str | Path, *, console=None, bootstrap: BootstrapConfig | None = None
) -> dict:
    """Print the table, write ``report.json`` and the PNG plots into ``out_dir``; returns the JSON payload."""
    from medunlearn.evaluation.plots import write_plots

    bootstrap = bootstrap or BootstrapConfig()
    rows = report_rows(eval_dirs, bootstrap)
    if not rows:
        raise ReportError("the evaluation folders hold no population results")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = headline(rows)
    plots = write_plots(summary, out_dir)
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
    (out_dir / "report.json").write_text(json.dumps(payload, indent=2))
    if console is not None:
        console.print(render_table(rows))
    return payload
