"""``evaluate_biodivergence``: a baseline or a predictions file, scored on one split of a BioDivergence
folder."""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from medunlearn.biodivergence.audit import read_hub_folder
from medunlearn.biodivergence.baselines import (
    ZeroShotConfig,
    fit_baseline,
    make_baseline,
    prediction_rows,
    write_predictions,
)
from medunlearn.errors import MedunlearnError
from medunlearn.metrics.contextual_contradiction import (
    OUTPUT_KEYS,
    SPAN_KEYS,
    check_record,
    contextual_contradiction,
)
from medunlearn.utils.user_files import not_a_file, read_jsonl


class PredictionsFormatError(MedunlearnError, ValueError):
    """A predictions file that cannot be matched to the gold split (the message names the file and line)."""


def gold_split(data: str | os.PathLike, config: str, split: str, limit: int | None = None):
    """``(every split of config, the gold rows of split)``; the first ``limit`` rows only when given."""
    configs = read_hub_folder(data)
    if config not in configs:
        raise PredictionsFormatError(f"{data}: no config {config!r} (found {sorted(configs)})")
    if split not in configs[config]:
        raise PredictionsFormatError(f"{data}: config {config!r} has no split {split!r}")
    gold = configs[config][split]
    if gold.empty:
        raise PredictionsFormatError(
            f"{data}: split {split!r} of config {config!r} is empty in this build (no pair could go there; "
            "the card says why): score another split"
        )
    if limit is not None:
        gold = gold.iloc[:limit]
    return configs[config], gold.reset_index(drop=True)


def read_predictions(path: str | os.PathLike, pair_ids) -> list:
    """Predictions in the order of ``pair_ids``; a pair without a prediction counts as unparseable ("") and
    a warning says how many there are."""
    path = Path(path)
    if not path.is_file():
        raise PredictionsFormatError(f"predictions file {path} {not_a_file(path)}")
    wanted = set(pair_ids)
    found: dict = {}
    # The shared reader: encodings (a byte-order mark honoured), JSON errors and NaN named by line.
    for line_number, row in read_jsonl(path):
        if "pair_id" not in row:
            raise PredictionsFormatError(f"{path}: line {line_number}: needs a `pair_id` field")
        pair_id = row.pop("pair_id")
        if pair_id not in wanted:
            raise PredictionsFormatError(
                f"{path}: line {line_number}: pair_id {pair_id!r} is not in the gold split"
            )
        if pair_id in found:
            raise PredictionsFormatError(f"{path}: line {line_number}: pair_id {pair_id!r} appears twice")
        if "prediction" in row:
            if not isinstance(row["prediction"], str):
                raise PredictionsFormatError(
                    f"{path}: line {line_number}: field `prediction` must be a string"
                )
            found[pair_id] = row["prediction"]
        else:
            try:
                found[pair_id] = check_record("prediction", line_number, row)
            except ValueError as error:
                raise PredictionsFormatError(f"{path}: line {line_number}: {error}") from None
    if not found and wanted:
        # An empty file would score every pair as wrong (0.0) and read as a real, terrible result.
        raise PredictionsFormatError(f"{path}: holds no prediction (0 rows with a `pair_id`)")
    missing = [pair_id for pair_id in pair_ids if pair_id not in found]
    if missing:
        warnings.warn(
            f"{len(missing)} pairs have no prediction in {path} (e.g. {missing[0]!r}); they count as wrong",
            stacklevel=2,
        )
    return [found.get(pair_id, "") for pair_id in pair_ids]


def references_of(gold: pd.DataFrame) -> list[dict]:
    """The gold records the metric reads (axes as lists)."""
    references = gold[list(OUTPUT_KEYS + SPAN_KEYS)].to_dict(orient="records")
    for record in references:
        record["axes"] = list(record["axes"])
    return references


@dataclass(frozen=True)
class BaselineSettings:
    """How a baseline of :func:`evaluate_biodivergence` runs: the ``model`` it loads (zero-shot, finetuned),
    its ``options`` (a ``ZeroShotConfig`` or a ``FinetunedConfig``) and the ``device`` (zero-shot)."""

    model: str | None = None
    options: Any = None
    device: str | None = None


def _baseline_predictions(
    baseline: str, settings: BaselineSettings, splits: dict, gold: pd.DataFrame
) -> tuple[list, dict | None]:
    """The baseline fitted on the config's splits, its predictions on ``gold`` and its training record (the
    fine-tuned baseline's; ``None`` for the others)."""
    arguments = {}
    if baseline == "zero-shot":
        arguments = {
            "model": settings.model,
            "config": settings.options or ZeroShotConfig(),
            "device": settings.device,
        }
    elif baseline == "finetuned":
        arguments = {"model": settings.model, "config": settings.options}
    fitted = fit_baseline(make_baseline(baseline, **arguments), splits)
    return fitted.predict(gold), getattr(fitted, "training", None)


def evaluate_biodivergence(
    data: str | os.PathLike,
    out: str | os.PathLike | None = None,
    *,
    baseline: str | None = None,
    predictions: str | os.PathLike | None = None,
    config: str = "v1.0",
    split: str = "test",
    limit: int | None = None,
    **baseline_settings,
) -> dict:
    """Score a ``baseline`` (fit on the config's train split) or a ``predictions`` file on ``config/split``.

    ``baseline_settings`` are the fields of :class:`BaselineSettings`: ``model``, ``options`` (the baseline's
    settings, a ``ZeroShotConfig`` (zero-shot) or a ``FinetunedConfig`` (finetuned; it also early-stops on
    the config's dev split)) and ``device``. Writes ``out/metrics.json`` (and, for a baseline,
    ``out/predictions.jsonl``; for the fine-tuned one also its training record in metrics.json and a model
    card ``out/README.md``); ``out`` defaults to ``biodivergence_eval/<system>-<config>-<split>``.
    Returns the summary, with ``out`` and ``n`` added.
    """
    settings = BaselineSettings(**baseline_settings)
    if (baseline is None) == (predictions is None):
        raise PredictionsFormatError("give exactly one of a baseline or a predictions file")
    splits, gold = gold_split(data, config, split, limit)
    training = None
    if baseline:
        predicted, training = _baseline_predictions(baseline, settings, splits, gold)
        name = baseline
    else:
        predicted = read_predictions(predictions, list(gold["pair_id"]))
        name = Path(predictions).stem
    scores = contextual_contradiction(predicted, references_of(gold))
    out = Path(out) if out is not None else Path("biodivergence_eval") / f"{name}-{config}-{split}"
    out.mkdir(parents=True, exist_ok=True)
    if baseline:
        write_predictions(prediction_rows(gold, predicted), out / "predictions.jsonl")
    summary = {"data": str(data), "config": config, "split": split, "system": name, "scores": scores}
    if training:
        from medunlearn.biodivergence.finetuned import model_card

        summary["training"] = training
        (out / "README.md").write_text(model_card(training, scores, str(data), f"{config}/{split}"))
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
    return {**summary, "out": str(out), "n": len(gold)}
