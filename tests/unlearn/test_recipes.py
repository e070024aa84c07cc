"""Recipes load into their method's config with no unknown field; accelerate configs parse."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from medunlearn.unlearn.methods import METHODS, available_methods
from medunlearn.unlearn.run import build_method_config

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))


def test_every_method_has_a_recipe():
    assert set(available_methods()) == set(METHODS) == {path.stem for path in RECIPES}


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_recipe_loads_with_its_values_and_cli_overrides(path, tmp_path):
    recipe = yaml.safe_load(path.read_text())
    assert recipe.pop("method") == path.stem and path.stem in METHODS
    config_class, _ = METHODS[path.stem].load()
    config = build_method_config(
        config_class, dict(recipe), ["--seed", "7", "--logging_steps", "3"], str(tmp_path), path
    )
    for key, value in recipe.items():
        if key in ("seed", "logging_steps"):
            continue
        assert (
            getattr(config, key) == pytest.approx(value)
            if isinstance(value, float)
            else getattr(config, key) == value
        )
    assert config.seed == 7 and config.logging_steps == 3  # command line over recipe


def test_recipes_keep_the_paper_defaults_of_their_config(tmp_path):
    """A recipe that states a method hyperparameter states the config's default (defaults live in one
    place)."""
    for path in RECIPES:
        recipe = yaml.safe_load(path.read_text())
        config_class, _ = METHODS[recipe.pop("method")].load()
        default = config_class(output_dir=str(tmp_path))
        for key in default.method_hyperparameters():
            if key in recipe:
                assert recipe[key] == getattr(default, key), f"{path.name}: {key}"


@pytest.mark.parametrize(
    "path", sorted((ROOT / "configs" / "accelerate").glob("*.yaml")), ids=lambda p: p.stem
)
def test_accelerate_configs_parse(path):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(path))
    assert config.num_processes >= 2 and config.distributed_type.value in {"MULTI_GPU", "FSDP", "DEEPSPEED"}
