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
        ("save_strategy", "nope", r"field 'save_strategy': 'nope' is not one of no, steps, epoch, best$"),
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


STRATEGIES = "is not one of no, steps, epoch, best"
UNQUOTED = r" \(YAML reads an unquoted no, yes, off or on as a boolean: write the value in quotes\)"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("save_strategy: no", rf"field 'save_strategy': False {STRATEGIES}{UNQUOTED}"),
        ("save_strategy: off", rf"field 'save_strategy': False {STRATEGIES}{UNQUOTED}"),
        ("save_strategy: yes", rf"field 'save_strategy': True {STRATEGIES}{UNQUOTED}"),
        ("eval_strategy: no", r"field 'eval_strategy': False is not one of no, steps, epoch" + UNQUOTED),
        ("save_strategy: 3", rf"field 'save_strategy': 3 {STRATEGIES}$"),
    ],
)
def test_a_recipe_value_yaml_reads_as_another_type_names_the_recipe_field_and_choices(
    tmp_path, line, message
):
    """`save_strategy: no` reads as False; TrainingArguments' own error named neither the field nor the
    recipe ("False is not a valid SaveStrategy")."""
    config_class, _ = METHODS["grad_diff"].load()
    recipe_path = tmp_path / "grad_diff.yaml"
    recipe_path.write_text(f"method: grad_diff\nmax_steps: 1\n{line}\n")
    recipe = {key: value for key, value in read_recipe(recipe_path).items() if key != "method"}
    with pytest.raises(MedunlearnError, match=rf"^recipe {recipe_path}, {message}"):
        build_method_config(config_class, recipe, [], str(tmp_path / "out"), recipe_path)
    assert not (tmp_path / "out").exists()


def test_a_quoted_save_strategy_loads(tmp_path):
    config_class, _ = METHODS["grad_diff"].load()
    config = build_method_config(config_class, {"save_strategy": "epoch"}, [], str(tmp_path / "out"), None)
    assert config.save_strategy == "epoch"
