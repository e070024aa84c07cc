"""A MUSE protocol study's results: one row per finished stage, the target and retain models' evaluations
(``kind`` ``baseline``) and every (method, fold, seed) cell, holding the MUSE metric set of its
``eval/summary.json`` (docs/muse.md, "Metrics"); written as ``results.parquet`` and ``results.json``, with the
protocol's two figures beside them (:mod:`medunlearn.study.muse_figures`).

A row: ``study``, ``stage``, ``kind``, ``label``, ``method``, ``protocol``, ``fold`` (``forget_k``),
``corpus`` (``scal/forget_k`` or ``sust/forget_k``), ``fold_documents`` (the fold's rows), ``request``
(sustainability: k), ``seed``, ``fingerprint``, :data:`METRICS`, ``mia_min_k_auc``, ``retain_auc``,
``preset``, ``start_model`` (the model the cell unlearned from), ``eval_dir``, ``model_dir``. A baseline row
has no fold, request or seed.
"""

from __future__ import annotations

import json
from pathlib import Path

from medunlearn.study.muse_grid import RETAIN_BASELINE, RETAIN_MODEL, TARGET_MODEL
from medunlearn.utils.numbers import finite_number
from medunlearn.utils.stage_marker import is_done
from medunlearn.utils.user_files import read_json

METRICS = ("knowmem_f", "knowmem_r", "verbmem_f", "privleak", "extraction_strength")
EXTRA = ("mia_min_k_auc", "retain_auc")


def _stages(study_dir: Path, grid: dict) -> list[dict]:
    """Every stage of the grid (``study.json``'s) with what its row says of it, and its folder."""
    stages = []
    for baseline in grid["baselines"]:
        model = RETAIN_MODEL if baseline["name"] == RETAIN_BASELINE else TARGET_MODEL
        stages.append(
            {
                "stage": baseline["name"],
                "kind": "baseline",
                "label": baseline["name"],
                "method": baseline["name"],
                "fingerprint": baseline["fingerprint"],
                "folder": f"baseline/{baseline['name']}",
                "model_dir": str(study_dir / model),
            }
        )
    for cell in grid["cells"]:
        stages.append(
            {
                "stage": cell["name"],
                "kind": "cell",
                "label": cell["label"],
                "method": cell["method"],
                "fold": cell["fold"],
                "corpus": cell["forget"],
                "fold_documents": cell.get("fold_documents"),
                "request": cell.get("request"),
                "seed": cell["seed"],
                "fingerprint": cell["fingerprint"],
                "start_model": str(study_dir / cell["start_model"]),
                "folder": f"cells/{cell['name']}",
                "model_dir": str(study_dir / "cells" / cell["name"] / "model"),
            }
        )
    return stages


def stage_row(study: str, protocol: str, stage: dict, summary: dict, eval_dir: Path) -> dict:
    """One results row: the stage's description and its summary's metrics (``None`` where it has none)."""
    metrics = summary.get("metrics", {})
    row = {"study": study, "protocol": protocol, "fold": None, "corpus": None, "fold_documents": None}
    row.update({"request": None, "seed": None, "start_model": None, **stage})
    row.update({name: finite_number(metrics.get(name)) for name in (*METRICS, *EXTRA)})
    row["preset"] = summary.get("conventions", {}).get("name")
    row["eval_dir"] = str(eval_dir)
    return row


def collect_muse_results(study_dir: str | Path, state: dict) -> dict:
    """Write ``results.parquet``, ``results.json`` and the figures for the finished stages of a MUSE study
    folder (``state``: its ``study.json``); returns ``{"rows", "stages", "missing", "figures", ...}``
    (``missing``: stages without a summary yet)."""
    import pandas as pd

    from medunlearn.study.collect import stage_threads
    from medunlearn.study.muse_figures import write_muse_figures

    study_dir = Path(study_dir)
    protocol = state["grid"]["protocol"]
    rows, missing = [], []
    for stage in _stages(study_dir, state["grid"]):
        folder = study_dir / stage.pop("folder")
        summary_path = folder / "eval" / "summary.json"
        if not (summary_path.is_file() and is_done(folder, stage["fingerprint"])):
            missing.append(stage["stage"])
            continue
        summary = read_json(summary_path, expect=dict)
        row = stage_row(state["name"], protocol, stage, summary, folder / "eval")
        rows.append(row | {"threads": stage_threads(folder)})
    pd.DataFrame(rows).to_parquet(study_dir / "results.parquet", index=False)
    figures = write_muse_figures(rows, study_dir, protocol, state["name"])
    payload = {
        "study": state["name"],
        "benchmark": "muse",
        "protocol": protocol,
        "study_dir": str(study_dir.resolve()),
        "rows": rows,
        "stages": rows,  # one row per stage (an AMNESIA study's rows are per population)
        "missing": missing,
        "figures": [str(path) for path in figures],
    }
    (study_dir / "results.json").write_text(json.dumps(payload, indent=2, default=str))
    return payload


def _cell_text(value) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def muse_table_markdown(rows: list[dict]) -> str:
    """The results as a Markdown table: one line per stage (the models before unlearning first)."""
    headers = ("stage", "method", "seed", "fold", "documents", "request", *METRICS)
    keys = ("stage", "label", "seed", "fold", "fold_documents", "request", *METRICS)
    text_columns = {"stage", "method", "fold"}  # left-aligned; numbers right-aligned
    rule = "".join("---|" if header in text_columns else "---:|" for header in headers)
    lines = ["| " + " | ".join(headers) + " |", "|" + rule]
    for row in rows:
        lines.append("| " + " | ".join(_cell_text(row.get(key)) for key in keys) + " |")
    return "\n".join(lines) + "\n"


def write_muse_report(results: dict, out_dir: str | Path) -> list[Path]:
    """``muse_results.md`` (the table) and the figures of :func:`collect_muse_results`' ``results`` in
    ``out_dir`` (``medunlearn report`` of a MUSE study folder)."""
    from medunlearn.study.muse_figures import write_muse_figures

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = out_dir / "muse_results.md"
    caption = f"Study {results['study']}: MUSE {results['protocol']}, one row per stage.\n\n"
    table.write_text(caption + muse_table_markdown(results["rows"]))
    return [table, *write_muse_figures(results["rows"], out_dir, results["protocol"], results["study"])]


__all__ = ["METRICS", "collect_muse_results", "muse_table_markdown", "stage_row", "write_muse_report"]
