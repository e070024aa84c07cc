"""A bad recipe file is a named error: its path, the line of a YAML syntax error, the field of a wrong-typed
value; never argparse's usage text and exit."""

from __future__ import annotations

import pytest

from medunlearn.errors import FileContentError, MedunlearnError
from medunlearn.unlearn.methods import METHODS
from medunlearn.unlearn.run import build_method_config, read_recipe


def test_a_recipe_with_a_yaml_syntax_error_names_the_file_and_line(tmp_path):
    path = tmp_path / "npo.yaml"
    path.write_text("method: npo\nbeta: [0.1\nlearning_rate: 1e-5\n")
    with pytest.raises(FileContentError, match=r"npo.yaml, line \d: invalid YAML at column \d+"):
        read_recipe(path)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("learning_rate", "fast", r"field 'learning_rate': 'fast' is not a float"),
        ("max_steps", [1, 2], r"field 'max_steps': \[1, 2\] is not an int"),
        ("max_steps", 2.5, r"field 'max_steps': 2.5 is not an int"),
        ("beta", True, r"field 'beta': True is not a float"),
        ("loss_averaging", "everything", r"field 'loss_averaging': 'everything' is not one of"),
    ],
)
def test_a_wrong_typed_recipe_field_names_the_recipe_and_field(tmp_path, field, value, message):
    config_class, _ = METHODS["npo"].load()
    recipe_path = tmp_path / "npo.yaml"
    with pytest.raises(MedunlearnError, match=rf"recipe {recipe_path}, {message}"):
        build_method_config(config_class, {field: value}, [], str(tmp_path / "out"), recipe_path)


def test_right_typed_recipe_values_still_load(tmp_path):
    config_class, _ = METHODS["npo"].load()
    recipe = {"learning_rate": "2e-5", "max_steps": 3, "beta": 1, "loss_averaging": "token"}
    config = build_method_config(config_class, recipe, [], str(tmp_path / "out"), tmp_path / "npo.yaml")
    assert (config.learning_rate, config.max_steps, config.beta, config.loss_averaging) == (
        2e-5,
        3,
        1.0,
        "token",
    )
