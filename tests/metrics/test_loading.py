"""``medunlearn.load_metric(name)`` and ``evaluate.load("metrics/<name>")`` for every module, and bad input
through the ``evaluate`` interface."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import medunlearn
from medunlearn.metric_modules.loading import UnknownMetricError, available_metrics, metric_module_path

REPOSITORY = Path(__file__).resolve().parents[2]
MODULE_NAMES = sorted(
    path.parent.name for path in (REPOSITORY / "metrics").glob("*/*.py") if path.stem == path.parent.name
)


def test_every_repository_module_is_available():
    assert set(MODULE_NAMES) <= set(available_metrics())


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_load_metric_and_evaluate_load_give_the_same_module(name, monkeypatch):
    import evaluate

    via_medunlearn = medunlearn.load_metric(name)
    monkeypatch.chdir(REPOSITORY)
    via_evaluate = evaluate.load(f"metrics/{name}")
    assert isinstance(via_medunlearn, evaluate.EvaluationModule)
    assert type(via_medunlearn).__name__ == type(via_evaluate).__name__
    assert via_medunlearn.name == name
    assert via_medunlearn.description and via_medunlearn.citation and via_medunlearn.inputs_description


def test_unknown_names_are_a_clear_error():
    with pytest.raises(UnknownMetricError, match="disease_leakage"):  # the message lists what exists
        metric_module_path("disease_leakge")
    with pytest.raises(ValueError, match="plain module name"):
        metric_module_path("../metrics")


def test_bare_name_loads_from_inside_the_metrics_folder(monkeypatch):
    """evaluate's documented local-folder lookup: the only offline way for a bare name (see docs/metrics)."""
    import evaluate

    monkeypatch.chdir(REPOSITORY / "metrics")
    result = evaluate.load("disease_leakage").compute(
        predictions=["sepsis"], references=[["sepsis", "fever"]]
    )
    assert result["leakage_score"] == 0.5


GOOD = {
    "disease_leakage": {"predictions": ["sepsis"], "references": [["sepsis"]]},
    "degeneration": {"predictions": ["a stent was placed"]},
    "answer_forgetting": {"predictions": ["a b"], "references": ["a b"]},
    "model_utility": {"predictions": ["a b"], "references": ["a b"]},
    "forget_quality": {"predictions": [0.1, 0.2], "references": [0.3, 0.4]},
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_bad_input_through_evaluate_names_the_argument(name):
    metric = medunlearn.load_metric(name)
    good = GOOD[name]
    first = next(iter(good))
    with pytest.raises(ValueError, match=first):
        metric.compute(**{**good, first: None})
    with pytest.raises(ValueError, match=first):
        metric.compute(**{**good, first: []} | ({"references": []} if "references" in good else {}))
    if "references" in good:
        with pytest.raises(ValueError, match="references"):
            metric.compute(**{**good, "references": good["references"] * 2})
    nan_value = [math.nan] if name == "forget_quality" else [float("nan")]
    if name == "forget_quality":
        with pytest.raises(ValueError, match="`predictions`"):
            metric.compute(predictions=nan_value + [0.1], references=[0.3, 0.4])
    else:
        with pytest.raises(ValueError, match=first):
            metric.compute(**{**good, first: nan_value})


def test_token_level_modules_check_their_inputs():
    mia = medunlearn.load_metric("mia")
    logprobs = [[-0.1, -0.2], [-2.0, -3.0]]
    with pytest.raises(ValueError, match="`predictions`\\[1\\]"):
        mia.compute(predictions=[[-0.1], [math.nan]], references=[1, 0])
    with pytest.raises(ValueError, match="both members"):
        mia.compute(predictions=logprobs, references=[1, 1])
    with pytest.raises(ValueError, match="retrained_auc"):
        mia.compute(predictions=logprobs, references=[1, 0], retrained_auc={"zlib": 0.5})
    memorization = medunlearn.load_metric("memorization")
    with pytest.raises(ValueError, match="`predictions`\\[0\\]"):
        memorization.compute(predictions=[[1, 2]], references=[[1, 2, 3]])
    with pytest.raises(ValueError, match="`token_logprobs`"):
        memorization.compute(predictions=[[1, 2]], references=[[1, 2]], token_logprobs=[[-0.1]])


def test_module_specific_arguments_are_checked():
    with pytest.raises(ValueError, match="colour"):
        medunlearn.load_metric("degeneration").compute(predictions=["a"], colour="red")
    afe = medunlearn.load_metric("answer_forgetting")
    with pytest.raises(ValueError, match="`before_predictions`"):
        afe.compute(predictions=["a"], references=["a"], before_predictions=["a", "b"])
    with pytest.raises(ValueError, match="`before_predictions`"):
        afe.compute(predictions=["a"], references=["a"], before_predictions=[None])
    with pytest.raises(ValueError, match="`qa_types`"):
        medunlearn.load_metric("model_utility").compute(
            predictions=["a"], references=["a"], qa_types=["f", "r"]
        )


def test_packaged_modules_are_found_without_the_repository(tmp_path, monkeypatch):
    """The wheel layout: modules under medunlearn/_metric_modules/, no repository around them."""
    import shutil

    import medunlearn.metric_modules.loading as loading

    packaged = tmp_path / "medunlearn" / "_metric_modules"
    shutil.copytree(REPOSITORY / "metrics" / "disease_leakage", packaged / "disease_leakage")
    monkeypatch.setattr(loading.resources, "files", lambda package: tmp_path / package)
    monkeypatch.setattr(loading, "_REPOSITORY_FOLDER", tmp_path / "no-repository")
    assert loading.metric_module_path("disease_leakage") == packaged / "disease_leakage"
    assert loading.available_metrics() == ["disease_leakage"]
    metric = loading.load_metric("disease_leakage")
    assert metric.compute(predictions=["sepsis"], references=[["sepsis"]])["leakage_score"] == 1.0


def test_the_wheel_ships_the_metrics_folder_where_the_loader_looks():
    import medunlearn.metric_modules.loading as loading

    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

    pyproject = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())
    force_include = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert force_include["metrics"] == f"medunlearn/{loading._PACKAGED_FOLDER}"


@pytest.mark.parametrize("name", sorted(GOOD))
@pytest.mark.parametrize("bad", [None, math.nan], ids=["None", "NaN"])
def test_a_none_or_nan_element_is_named_with_its_index(name, bad):
    """Not evaluate's "don't match the expected format": the argument and the index of the element."""
    good = GOOD[name]
    first = next(iter(good))
    values = list(good[first]) * 3
    values[2] = bad
    inputs = {key: list(value) * 3 for key, value in good.items()} | {first: values}
    with pytest.raises(ValueError, match=rf"`{first}`\[2\] is {'None' if bad is None else 'NaN'}"):
        medunlearn.load_metric(name).compute(**inputs)
