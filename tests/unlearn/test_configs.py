"""Configs: allowed values are checked; each config documents itself in TRL's style; the docs agree with the
code.

Each config's docstring has a *Parameters* block, ``name (`type`, *optional*, defaults to `value`):``, listing
every field the config declares beyond ``TrainingArguments``; the ``TrainingArguments`` defaults it overrides
are listed in its note as ``- `name`: defaults to `value` instead of `value```. Each
``docs/methods/<stem>.md`` has a ``| field | default | meaning | source |`` table whose defaults are the
method config's.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest
from transformers import HfArgumentParser, TrainingArguments

from medunlearn.unlearn.config import UnlearningConfig, literal_choices
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.methods import METHODS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "methods"
CONFIGS = [UnlearningConfig] + [spec.load()[0] for spec in METHODS.values()]
TRAINING_ARGUMENT_FIELDS = {f.name: f for f in dataclasses.fields(TrainingArguments)}

PARAMETER_LINE = re.compile(r"^    (\w+) \(`(.+?)`(?:, \*optional\*)?, defaults to `(.+?)`\):$", re.M)
OVERRIDE_LINE = re.compile(r"^> - `(\w+)`: defaults to `(.+?)` instead of `(.+?)`", re.M)


def test_literal_fields_are_checked_in_python_and_are_parser_choices(tmp_path):
    with pytest.raises(
        UnlearningInputError,
        match=r"UnlearningConfig\.retain_sampling must be one of 'random', 'same_disease', got 'nearest'",
    ):
        UnlearningConfig(output_dir=str(tmp_path), retain_sampling="nearest")
    npo_config, _ = METHODS["npo"].load()
    with pytest.raises(UnlearningInputError, match=r"NPOConfig\.reference_mode must be one of 'auto', "):
        npo_config(output_dir=str(tmp_path), reference_mode="shared")
    assert literal_choices(npo_config)["reference_mode"] == ("auto", "precomputed", "adapter", "copy")

    parser = HfArgumentParser(npo_config)
    choices = {action.dest: action.choices for action in parser._actions}
    assert tuple(choices["retain_sampling"]) == ("random", "same_disease")
    (config,) = parser.parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--retain_sampling", "same_disease", "--reference_mode", "copy"]
    )
    assert (config.retain_sampling, config.reference_mode) == ("same_disease", "copy")
    with pytest.raises(SystemExit):  # argparse: "invalid choice"
        parser.parse_args_into_dataclasses(["--output_dir", str(tmp_path), "--retain_sampling", "nearest"])


def field_default(config_class, name: str):
    field = {f.name: f for f in dataclasses.fields(config_class)}[name]
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default


def declared_fields(config_class) -> list[str]:
    """Fields the class itself declares (or re-declares with its own default), in order."""
    return list(vars(config_class).get("__annotations__", {}))


def documented_parameters(config_class) -> dict[str, tuple[str, object]]:
    doc = inspect.cleandoc(config_class.__doc__ or "")
    return {name: (type_, ast.literal_eval(default)) for name, type_, default in PARAMETER_LINE.findall(doc)}


def noted_overrides(config_class) -> dict[str, tuple[object, object]]:
    doc = inspect.cleandoc(config_class.__doc__ or "")
    return {
        name: (ast.literal_eval(ours), ast.literal_eval(theirs))
        for name, ours, theirs in OVERRIDE_LINE.findall(doc)
    }


def same_type(documented: str, annotation) -> bool:
    """Whether two spellings of a type are the same expression (quotes and spacing aside)."""
    written = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return ast.dump(ast.parse(documented, mode="eval")) == ast.dump(ast.parse(written, mode="eval"))


def declared_annotation(config_class, name: str):
    """The field's annotation as written in its class. Not ``dataclasses.Field.type``: HfArgumentParser (TRL's
    parser) rewrites that in place, ``X | None`` becoming ``X``, once any parser has been built for the
    class."""
    for klass in config_class.__mro__:
        annotations = klass.__dict__.get("__annotations__", {})
        if name in annotations:
            return annotations[name]
    raise KeyError(name)


def same_value(documented, actual) -> bool:
    if isinstance(actual, float) and not isinstance(documented, bool):
        return documented == pytest.approx(actual)
    return documented == actual


@pytest.mark.parametrize("config_class", CONFIGS, ids=lambda c: c.__name__)
def test_every_declared_field_is_in_the_parameters_block_with_its_type_and_default(config_class):
    documented = documented_parameters(config_class)
    own = [name for name in declared_fields(config_class) if name not in TRAINING_ARGUMENT_FIELDS]
    assert own, f"{config_class.__name__} declares no field of its own"
    missing = [name for name in own if name not in documented]
    assert not missing, f"{config_class.__name__}: fields missing from the Parameters block: {missing}"
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    for name, (type_, default) in documented.items():
        assert name in fields, f"{config_class.__name__} documents {name!r}, which is not a field"
        assert same_type(type_, declared_annotation(config_class, name)), (
            f"{config_class.__name__}.{name}: documented type {type_!r}"
        )
        actual = field_default(config_class, name)
        assert same_value(default, actual), (
            f"{config_class.__name__}.{name}: documented {default!r}, is {actual!r}"
        )


@pytest.mark.parametrize("config_class", CONFIGS, ids=lambda c: c.__name__)
def test_the_note_lists_the_overridden_training_arguments_defaults(config_class):
    noted = noted_overrides(config_class)
    overridden = [name for name in declared_fields(config_class) if name in TRAINING_ARGUMENT_FIELDS]
    missing = [name for name in overridden if name not in noted]
    assert not missing, f"{config_class.__name__}: overridden TrainingArguments defaults not noted: {missing}"
    for name, (ours, theirs) in noted.items():
        assert name in overridden, f"{config_class.__name__} notes {name!r}, which it does not override"
        assert same_value(ours, field_default(config_class, name)), f"{config_class.__name__}.{name}"
        assert same_value(theirs, TRAINING_ARGUMENT_FIELDS[name].default), f"TrainingArguments.{name}"
    if config_class is not UnlearningConfig:
        assert "[`UnlearningConfig`]" in config_class.__doc__, "the note points to the shared defaults"


def test_the_parameters_pattern_reads_trl_style_lines():
    doc = """Config.

    Parameters:
        beta (`float`, *optional*, defaults to `0.1`):
            β.
        mode (`Literal["a", "b"]`, defaults to `"a"`):
            Mode.

    > [!NOTE]
    > - `learning_rate`: defaults to `1e-5` instead of `5e-5`.
    """
    probe = type("Probe", (), {"__doc__": doc})
    assert documented_parameters(probe) == {"beta": ("float", 0.1), "mode": ('Literal["a", "b"]', "a")}
    assert noted_overrides(probe) == {"learning_rate": (1e-5, 5e-5)}


# ------------------------------------------------------------------------------------------------------------
# docs/methods/<stem>.md default tables
# ------------------------------------------------------------------------------------------------------------


def default_table(page: Path) -> dict[str, str]:
    """``{field: default cell}`` of the page's ``| field | default | ...`` table; a row may name several
    fields, ``| `learning_rate`, `num_train_epochs` | 1e-5, 10 |``, whose defaults are then
    comma-separated."""
    rows, in_table = {}, False
    for line in page.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if cells[:2] == ["field", "default"]:
            in_table = True
            continue
        if not in_table or not cells:
            in_table = in_table and bool(cells)
            continue
        if set(cells[0]) <= {"-"}:
            continue
        names = re.findall(r"`(\w+)`", cells[0].split("(")[0])
        defaults = [value.strip() for value in cells[1].split(",")] if len(names) > 1 else [cells[1]]
        assert len(names) == len(defaults), (
            f"{page.name}: row {line!r} has {len(names)} fields, {len(defaults)} values"
        )
        rows.update(zip(names, defaults))
    return rows


def table_value(cell: str):
    """A default as the docs write it: ``unset`` (None), ``true`` / ``false``, a `quoted` string, a number."""
    if cell == "unset":
        return None
    if cell in ("true", "false"):
        return cell == "true"
    if cell.startswith("`") and cell.endswith("`"):
        return cell.strip("`")
    return float(cell)


@pytest.mark.parametrize("stem", list(METHODS))
def test_docs_default_table_matches_the_config(stem):
    page = DOCS / f"{stem}.md"
    config_class, _ = METHODS[stem].load()
    table = default_table(page)
    assert table, f"{page} has no | field | default | table"
    fields = {f.name for f in dataclasses.fields(config_class)}
    for name, cell in table.items():
        assert name in fields, f"{page.name}: {name!r} is not a field of {config_class.__name__}"
        actual = field_default(config_class, name)
        assert same_value(table_value(cell), actual), (
            f"{page.name}: {name} is {cell!r} there, {actual!r} in the code"
        )
    missing = [name for name in declared_fields(config_class) if name not in table]
    assert not missing, f"{page.name}: fields of {config_class.__name__} missing from the table: {missing}"


def test_the_table_reader_reads_multi_field_rows(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "| field | default | meaning | source |\n|---|---|---|---|\n"
        "| `beta` (β) | 0.1 | x | paper |\n| `mode` | `auto` | y | ours |\n| `eps` (ε) | unset | z | |\n"
        "| `learning_rate`, `num_train_epochs` | 1e-5, 10 | | recipe |\n\nafter\n| a | b |\n"
    )
    table = {name: table_value(cell) for name, cell in default_table(page).items()}
    assert table == {
        "beta": 0.1,
        "mode": "auto",
        "eps": None,
        "learning_rate": 1e-5,
        "num_train_epochs": 10.0,
    }
