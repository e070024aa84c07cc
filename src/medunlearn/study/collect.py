"""A study folder's results: one row per (stage × population × QA type) holding the summary values.

Rows come from ``baseline/<forget>/eval/summary.json`` (method ``finetuned``: the model before unlearning)
and ``cells/<cell>/eval/summary.json``. Each row keeps its stage's ``eval_dir`` and ``model_dir`` (absolute
paths), so per-example tables can be read later (bootstrap intervals, figures). Values that are not per
population (MIA, privleak, forget quality) go in ``results.json``'s ``stages`` list.

A cell whose attack stage is finished (``cells/<cell>/attacks/``, a study with ``attacks:``) adds its
robustness summary to its stage and rows: ``worst_case_recovery`` and ``worst_case_attack``
(docs/attacks.md); an unfinished attack stage is listed in ``missing``.

A MUSE protocol study's results are one row per stage instead (:mod:`medunlearn.study.muse_collect`).
"""

from __future__ import annotations

import json
from pathlib import Path

from medunlearn.errors import MissingInputError
from medunlearn.study.grid import forget_parts
from medunlearn.utils.numbers import finite_number
from medunlearn.utils.stage_marker import is_done, read_marker
from medunlearn.utils.user_files import read_json

BASELINE_METHOD = "finetuned"


def _stages(study_dir: Path, state: dict) -> list[dict]:
    grid = state["grid"]
    stages = []
    for baseline in grid["baselines"]:
        stages.append(
            {
                "stage": baseline["name"],
                "kind": "baseline",
                "label": BASELINE_METHOD,
                "method": BASELINE_METHOD,
                "forget_config": baseline["forget"],
                "seed": None,
                "fingerprint": baseline["fingerprint"],
                "folder": f"baseline/{baseline['forget']}",
                "model_dir": str(study_dir / "finetune" / "model"),
            }
        )
    for cell in grid["cells"]:
        stages.append(
            {
                "stage": cell["name"],
                "kind": "cell",
                "label": cell["label"],
                "method": cell["method"],
                "forget_config": cell["forget"],
                "seed": cell["seed"],
                "fingerprint": cell["fingerprint"],
                "folder": f"cells/{cell['name']}",
                "model_dir": str(study_dir / "cells" / cell["name"] / "model"),
                "attack_fingerprint": cell.get("attack_fingerprint"),
            }
        )
    return stages


def stage_threads(stage_folder: Path) -> int | None:
    """The torch threads a finished stage ran with (its marker's ``threads``; ``None`` for a stage finished
    by a version that did not record them). Not part of any fingerprint, yet the same cell can give other
    numbers with other threads (float reductions in another order), so every results row says it."""
    threads = (read_marker(stage_folder) or {}).get("threads")
    return threads if isinstance(threads, int) and not isinstance(threads, bool) else None


def attack_summary(stage_folder: Path, fingerprint: str | None) -> dict | None:
    """The robustness summary of a cell's finished attack stage (``attacks.json``), or ``None``."""
    folder = stage_folder / "attacks"
    payload = folder / "attacks.json"
    if fingerprint is None or not payload.is_file() or not is_done(folder, fingerprint):
        return None
    summaries = read_json(payload, expect=dict).get("summaries") or [None]
    return summaries[0]


def collect_results(study_dir: str | Path) -> dict:
    """Write ``results.parquet`` and ``results.json`` for the finished stages of ``study_dir``; returns
    ``{"rows": [...], "stages": [...], "missing": [...]}`` (``missing``: stages without a summary yet)."""
    import pandas as pd

    study_dir = Path(study_dir)
    if not (study_dir / "study.json").is_file():
        raise MissingInputError(f"{study_dir} has no study.json: not a study folder")
    state = read_json(study_dir / "study.json", expect=dict)  # the shared reader names a damaged file
    if state.get("grid", {}).get("benchmark") == "muse":
        from medunlearn.study.muse_collect import collect_muse_results

        return collect_muse_results(study_dir, state)
    rows, stages, missing = [], [], []
    for stage in _stages(study_dir, state):
        attack_fp = stage.pop("attack_fingerprint", None)
        eval_dir = study_dir / stage.pop("folder") / "eval"
        summary_path = eval_dir / "summary.json"
        if not (summary_path.is_file() and is_done(eval_dir.parent, stage["fingerprint"])):
            missing.append(stage["stage"])
            continue
        summary = read_json(summary_path, expect=dict)
        common = {
            "study": state["name"],
            **stage,
            **forget_parts(stage["forget_config"]),
            "eval_dir": str(eval_dir),
            "threads": stage_threads(eval_dir.parent),
        }
        if attack_fp is not None:
            robustness = attack_summary(eval_dir.parent, attack_fp)
            if robustness is None:
                missing.append(f"attacks-{stage['stage']}")
            common["worst_case_recovery"] = None if robustness is None else robustness["worst_case_recovery"]
            common["worst_case_attack"] = None if robustness is None else robustness["worst_case_attack"]
            common["attack_dir"] = str(eval_dir.parent / "attacks") if robustness is not None else None
        extras = {
            k: v for k, v in summary.items() if k not in ("populations", "models", "name", "forget_config")
        }
        stages.append({**common, **extras})
        for population, by_type in summary.get("populations", {}).items():
            for qa_type, values in by_type.items():
                if not isinstance(values, dict):
                    continue
                row = {**common, "population": population, "qa_type": qa_type}
                numbers = {key: finite_number(value) for key, value in values.items()}
                # A missing value stays a column (None); a non-number or non-finite one is left out.
                row.update({key: n for key, n in numbers.items() if n is not None or values[key] is None})
                rows.append(row)
    table = pd.DataFrame(rows)
    table.to_parquet(study_dir / "results.parquet", index=False)
    payload = {
        "study": state["name"],
        "study_dir": str(study_dir.resolve()),
        "rows": rows,
        "stages": stages,
        "missing": missing,
    }
    (study_dir / "results.json").write_text(json.dumps(payload, indent=2, default=str))
    return payload


def metric(results: dict, stage: str, population: str, key: str, qa_type: str = "all"):
    """One value of ``results`` (what :func:`collect_results` returned), or ``None``."""
    for row in results["rows"]:
        if row["stage"] == stage and row["population"] == population and row["qa_type"] == qa_type:
            return row.get(key)
    return None
