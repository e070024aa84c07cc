"""Notes memorization from stored outputs, no model: per-note scores and the ``notes_memorization`` section of
an evaluation's ``summary.json``. The definitions are :mod:`medunlearn.evaluation.notes_memorization`'s.

The section (every interval is ``{estimate, low, high, n_clusters}``, a patient-cluster bootstrap)::

    config        P, C, T and k of the run
    too_short     per population, the notes of no more than P words (not scored)
    populations   forget / retain_same_disease / retain_out_of_disease:
                  n, verbmem, extraction_strength (the evaluated model), *_before (the model before
                  unlearning) and *_change (after − before, paired by note)
    privleak      n_forget, n_holdout, auc, auc_before, auc_retain_model, privleak (None without a retain
                  model, or without held-out notes: then ``reason`` says why)
    bootstrap     n_resamples, level, seed, clusters
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.evaluation.notes_memorization import (
    FORGET,
    HOLDOUT,
    NOTE_POPULATIONS,
    NOTES_EXAMPLES,
    PRIVLEAK,
    VERBMEM,
    NotesMemorizationConfig,
    first_words,
    of_task,
)
from medunlearn.evaluation.outputs_folder import read_outputs
from medunlearn.metrics import mia
from medunlearn.metrics.bootstrap import BootstrapConfig, auc_bootstrap, cluster_bootstrap
from medunlearn.metrics.privleak import min_k_scores
from medunlearn.metrics.probability import pad_token_values
from medunlearn.metrics.verbatim_memorization import cut_generation, extraction_strength_scores, rouge_l_f1
from medunlearn.utils.user_files import read_parquet_frame

NOTES_PER_EXAMPLE = "notes_per_example.parquet"
SCORES = ("verbmem", "extraction_strength")


def verbmem_scores_table(examples: pd.DataFrame, outputs: pd.DataFrame, config: NotesMemorizationConfig):
    """One row per verbmem example: the generation ``g_C`` (cut at EOS, then to ``C`` words), its reference
    (the continuation, stripped), ROUGE-L F1 (``verbmem``) and extraction strength."""
    generations = [
        first_words(cut_generation(str(text)), config.continuation_words)
        for text in outputs["generated_text"].fillna("")
    ]
    references = [str(text).strip() for text in examples["answer"]]
    matches, mask = pad_token_values([list(row) for row in outputs["token_is_argmax"]], dtype=bool)
    table = examples[["example_id", "population", "patient_id", "disease"]].copy()
    table["generated_text"] = generations
    table["reference"] = references
    table["verbmem"] = rouge_l_f1(generations, references)
    table["extraction_strength"] = extraction_strength_scores(matches, mask)
    return table


def privleak_scores_table(examples: pd.DataFrame, outputs: pd.DataFrame, config: NotesMemorizationConfig):
    """One row per privleak document: its Min-K% score (higher: less likely a member)."""
    logprobs, mask = pad_token_values([list(row) for row in outputs["token_logprobs"]])
    table = examples[["example_id", "population", "patient_id", "disease"]].copy()
    table["min_k_score"] = min_k_scores(logprobs, mask, k=config.min_k)
    return table


def role_tables(examples: pd.DataFrame, folders: dict, config: NotesMemorizationConfig) -> dict:
    """A role's per-note tables (``verbmem``, ``privleak``) from its recorded folders (task -> folder)."""
    tables = {}
    for task, scorer in ((VERBMEM, verbmem_scores_table), (PRIVLEAK, privleak_scores_table)):
        rows = of_task(examples, task)
        if task in folders and len(rows):
            tables[task] = scorer(rows, read_outputs(Path(folders[task]), rows["example_id"]), config)
    return tables


def _interval(values, patients, bootstrap: BootstrapConfig) -> dict | None:
    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return None
    return cluster_bootstrap(values, ["note"] * len(values), list(patients), bootstrap).to_dict()


def population_scores(
    model: pd.DataFrame, before: pd.DataFrame | None, population: str, bootstrap: BootstrapConfig
) -> dict:
    """One population's verbmem and extraction strength with intervals, before unlearning and the paired
    change when ``before`` is given."""
    rows = model[model["population"] == population]
    cell: dict = {"n": len(rows)}
    for score in SCORES:
        cell[score] = _interval(rows[score], rows["patient_id"], bootstrap)
    if before is None or rows.empty:
        return cell
    paired = rows.merge(before[["example_id", *SCORES]], on="example_id", suffixes=("", "_before"))
    for score in SCORES:
        cell[f"{score}_before"] = _interval(paired[f"{score}_before"], paired["patient_id"], bootstrap)
        change = paired[score] - paired[f"{score}_before"]
        cell[f"{score}_change"] = _interval(change, paired["patient_id"], bootstrap)
    return cell


def _auc(table: pd.DataFrame | None, bootstrap: BootstrapConfig) -> dict | None:
    if table is None:
        return None
    forget, holdout = (table.loc[table["population"] == name, "min_k_score"] for name in (FORGET, HOLDOUT))
    if forget.empty or holdout.empty:
        return None
    return auc_bootstrap(forget.to_numpy(), holdout.to_numpy(), bootstrap).to_dict()


def privleak_section(tables: dict, bootstrap: BootstrapConfig) -> dict:
    """The notes membership test of each role (``tables``: role -> privleak table or None) and privleak."""
    model = tables.get("model")
    counts = {
        f"n_{name}": 0 if model is None else int((model["population"] == name).sum())
        for name in (FORGET, HOLDOUT)
    }
    section = {
        **counts,
        "auc": _auc(model, bootstrap),
        "auc_before": _auc(tables.get("before"), bootstrap),
        "auc_retain_model": _auc(tables.get("retain"), bootstrap),
        "privleak": None,
    }
    if not counts["n_holdout"]:
        section["reason"] = "the folder has no holdout_notes (notes no model saw): no membership test"
    elif section["auc_retain_model"] is None:
        section["reason"] = "privleak needs --retain-model (its AUC is the reference)"
    else:
        try:
            section["privleak"] = mia.privleak(
                section["auc"]["estimate"], section["auc_retain_model"]["estimate"]
            )
        except ValueError as error:  # the retain model's AUC is 1: undefined
            section["reason"] = str(error)
    return section


def score_notes(eval_dir: str | Path, notes_info: dict, bootstrap: BootstrapConfig | None = None) -> dict:
    """The ``notes_memorization`` section of an evaluation folder (module docstring), from
    ``notes_examples.parquet`` and the role folders run.json records (``notes_info``); writes the evaluated
    model's per-note scores to ``notes_per_example.parquet``."""
    bootstrap = bootstrap or BootstrapConfig()
    eval_dir = Path(eval_dir)
    config = NotesMemorizationConfig.from_dict(notes_info["config"])
    examples = read_parquet_frame(eval_dir / NOTES_EXAMPLES)
    tables = {
        role: role_tables(examples, folders, config)
        for role, folders in notes_info.get("outputs", {}).items()
    }
    model = tables.get("model", {})
    if model:
        per_note = pd.concat(list(model.values()), ignore_index=True)
        per_note.to_parquet(eval_dir / NOTES_PER_EXAMPLE, index=False)
    populations = {}
    if VERBMEM in model:
        before = tables.get("before", {}).get(VERBMEM)
        populations = {
            name: population_scores(model[VERBMEM], before, name, bootstrap) for name in NOTE_POPULATIONS
        }
    privleak = {role: role_tables_of.get(PRIVLEAK) for role, role_tables_of in tables.items()}
    return {
        "config": config.to_dict(),
        "too_short": notes_info.get("too_short", {}),
        "populations": populations,
        "privleak": privleak_section(privleak, bootstrap),
        "bootstrap": {
            "n_resamples": bootstrap.n_resamples,
            "level": bootstrap.level,
            "seed": bootstrap.seed,
            "clusters": "patients (one note each)",
        },
    }


__all__ = [
    "NOTES_PER_EXAMPLE",
    "population_scores",
    "privleak_scores_table",
    "privleak_section",
    "role_tables",
    "score_notes",
    "verbmem_scores_table",
]
