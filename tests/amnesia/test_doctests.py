import doctest
import importlib

import pytest

MODULES = ["schema", "sources.synthetic", "splits", "pipeline", "hf_builder", "sources.pmc_patients"]


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name):
    module = importlib.import_module(f"medunlearn.amnesia.{name}")
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failures == 0


@pytest.mark.parametrize("name", ["medunlearn.ontology.vocabulary", "medunlearn.amnesia.sources.llm_built"])
def test_moved_and_pipeline_doctests(name):
    module = importlib.import_module(name)
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failures == 0
