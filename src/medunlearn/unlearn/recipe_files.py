"""Recipe files (``recipes/<method>.yaml``): read, and their values checked against a method config's fields
before argparse sees them (``medunlearn.unlearn.run.build_method_config`` layers them over the defaults)."""

from __future__ import annotations

from pathlib import Path

from medunlearn.errors import MissingInputError
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.utils.user_files import not_a_file, read_yaml


def read_recipe(path: str | Path) -> dict:
    """A recipe YAML (``recipes/<method>.yaml``): a mapping of config fields, optionally with ``method:``."""
    path = Path(path)
    if not path.is_file():
        raise MissingInputError(f"recipe {path} {not_a_file(path)}")
    recipe = read_yaml(path)
    if not isinstance(recipe, dict):
        raise UnlearningInputError(f"recipe {path} must be a YAML mapping of config fields")
    return recipe


def check_recipe_values(parser, recipe: dict, where: str) -> None:
    """Refuse a recipe value the config field cannot hold, naming the recipe and the field, before argparse
    would turn it into its usage text and an exit: a string where a number belongs, a float for an int, a
    boolean for a number, a value outside a ``Literal``'s choices. Strings that parse (``"2e-5"``) pass."""
    actions = {action.dest: action for action in parser._actions}
    for key, value in recipe.items():
        action = actions.get(key)
        if action is None:
            continue  # an unknown field: named by the caller
        problem = _recipe_value_problem(action, value)
        if problem:
            raise UnlearningInputError(f"{where}, field '{key}': {value!r} {problem}")


def _recipe_value_problem(action, value) -> str | None:
    if action.choices is not None:
        choices = [str(choice) for choice in action.choices]
        if str(value) in choices and not isinstance(value, bool):
            return None
        problem = f"is not one of {', '.join(choices)}"
        if isinstance(value, bool):  # `save_strategy: no` arrives as False
            problem += " (YAML reads an unquoted no, yes, off or on as a boolean: write the value in quotes)"
        return problem
    expected = {float: "a float", int: "an int"}.get(action.type)
    if expected is None:
        return None
    if isinstance(value, str):
        try:
            action.type(value)
            return None
        except ValueError:
            return f"is not {expected}"
    number_types = (int, float) if action.type is float else (int,)
    if isinstance(value, bool) or not isinstance(value, number_types):
        return f"is not {expected}"
    return None


__all__ = ["check_recipe_values", "read_recipe"]
