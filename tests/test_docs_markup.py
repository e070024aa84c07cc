"""The API reference's docstring clean-up (docs/griffe_rest_markup.py) on the argument lines it rewrites."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("griffe")
_PATH = Path(__file__).resolve().parents[1] / "docs" / "griffe_rest_markup.py"
_SPEC = importlib.util.spec_from_file_location("griffe_rest_markup", _PATH)
markup = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(markup)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("    data (`str`):", "    data (str): "),
        (
            "    forget_weight (`float`, *optional*, defaults to `1.0`): weight of the forget term.",
            "    forget_weight (float): weight of the forget term.",
        ),
        (
            '    loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):',
            '    loss_averaging (Literal["sequence", "token"]): ',
        ),
        ("    seed (`int`, defaults to 0): the seed.", "    seed (int): the seed."),
        (
            "    model_id (`str`, defaults to the model's name): names it.",
            "    model_id (str): (defaults to the model's name) names it.",
        ),
        ('    benchmark (`"amnesia"` or `"tofu"`):', '    benchmark (Literal["amnesia", "tofu"]): '),
        # The first "):" after a backtick ends the type: a later one in the description is left alone.
        (
            "    model_id (`str`): names the model (see `x`): more.",
            "    model_id (str): names the model (see `x`): more.",
        ),
    ],
)
def test_hugging_face_argument_lines_keep_a_bare_type(line, expected):
    assert markup.rest_to_markdown(line) == expected


def test_lines_without_backticked_types_are_unchanged():
    text = "Args:\n    data (str): a folder.\n    plain text (with parentheses): stays."
    assert markup.rest_to_markdown(text) == text


def test_string_choices_are_a_literal_not_a_tuple():
    line = '    forget_on (`"qa"`, `"notes"` or `"both"`, *optional*, defaults to `"qa"`): what to unlearn.'
    assert markup.rest_to_markdown(line) == '    forget_on (Literal["qa", "notes", "both"]): what to unlearn.'


def test_a_simple_table_becomes_a_markdown_table_with_continued_rows():
    text = (
        "Stages:\n\n"
        "====== ==========================\n"
        "stage  writes\n"
        "====== ==========================\n"
        "claims ``claims.jsonl``: the claims\n"
        "       of the kept abstracts (|)\n"
        "pairs  ``pairs.jsonl``\n"
        "====== ==========================\n\n"
        "After."
    )
    lines = markup.rest_to_markdown(text).split("\n")
    assert "| stage | writes |" in lines
    assert "| --- | --- |" in lines
    assert "| claims | ``claims.jsonl``: the claims of the kept abstracts (\\|) |" in lines
    assert "| pairs | ``pairs.jsonl`` |" in lines
    assert not any(line.startswith("===") for line in lines)
    assert lines[-1] == "After."


def test_a_doctest_is_a_pycon_block_without_its_directives():
    text = 'Intro.\n>>> f("x")  # doctest: +SKIP\n0.2\n>>> g(\n...     1)\n\nAfter.'
    assert markup.rest_to_markdown(text) == (
        'Intro.\n\n```pycon\n>>> f("x")\n0.2\n>>> g(\n...     1)\n```\n\n\nAfter.'
    )


def test_a_doctest_already_in_a_fence_is_left_alone():
    text = "```pycon\n>>> f()\n1\n```"
    assert markup.rest_to_markdown(text) == text


def test_a_hugging_face_note_becomes_an_admonition_and_its_links_code():
    text = (
        "> [!NOTE]\n"
        "> Defaults that differ from [`~transformers.TrainingArguments`] and [`UnlearningConfig`]:\n"
        "> - `learning_rate`: `1e-5`.\n"
        ">   more of that item.\n"
        "> - `weight_decay`: `0.01`.\n"
    )
    assert markup.rest_to_markdown(text) == (
        "!!! note\n"
        "    Defaults that differ from `TrainingArguments` and `UnlearningConfig`:\n"
        "\n"
        "    - `learning_rate`: `1e-5`.\n"
        "      more of that item.\n"
        "    - `weight_decay`: `0.01`.\n"
    )


def test_markdown_links_are_not_taken_for_hugging_face_links():
    text = "See [`evaluate`](evaluation.md) and [`run`][medunlearn.study.run]."
    assert markup.rest_to_markdown(text) == text
