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
        ('    benchmark (`"amnesia"` or `"tofu"`):', '    benchmark ("amnesia" or "tofu"): '),
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
