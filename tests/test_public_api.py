"""The names the README imports are the package's public API: importable, in ``__all__`` and in the API
reference (docs/api/)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMPORT_START = re.compile(r"from (medunlearn[\w.]*) import ")


def readme_imports(text: str) -> list[tuple[str, str]]:
    """(module, name) of every ``from medunlearn... import ...`` of the README (parenthesised ones
    included)."""
    found = []
    for match in IMPORT_START.finditer(text):
        rest = text[match.end() :]
        names = rest[1 : rest.index(")")] if rest.startswith("(") else re.split(r"[`\n]", rest)[0]
        found += [(match.group(1), name.strip()) for name in names.split(",") if name.strip()]
    return found


def api_reference_documents(module_name: str, name: str, obj) -> bool:
    """True when a ``::: identifier`` block of docs/api renders ``obj``: the block of the object itself, or
    of its defining module listing it in ``members`` (or listing no members: the whole module)."""
    home = getattr(obj, "__module__", module_name)
    for page in (ROOT / "docs" / "api").glob("*.md"):
        blocks = re.split(r"^::: ", page.read_text(), flags=re.M)[1:]
        for block in blocks:
            identifier, _, options = block.partition("\n")
            identifier = identifier.strip()
            if identifier in (f"{home}.{name}", f"{module_name}.{name}"):
                return True
            if identifier in (home, module_name):
                members = re.search(r"members:\s*\[([^\]]*)\]", options)
                if members is None or name in re.split(r"[\s,]+", members.group(1)):
                    return True
    return False


def test_readme_imports_are_found():
    text = "```python\nfrom medunlearn import (A, b,\n    c)\n\nx\n```\n"
    text += "see `from medunlearn.unlearn import D, E`."
    assert readme_imports(text) == [
        ("medunlearn", "A"),
        ("medunlearn", "b"),
        ("medunlearn", "c"),
        ("medunlearn.unlearn", "D"),
        ("medunlearn.unlearn", "E"),
    ]


IMPORTS = readme_imports((ROOT / "README.md").read_text())


def test_the_readme_imports_something():
    assert ("medunlearn", "run_unlearning") in IMPORTS


@pytest.mark.parametrize(("module_name", "name"), IMPORTS, ids=[f"{m}.{n}" for m, n in IMPORTS])
def test_every_readme_import_is_public_and_documented(module_name, name):
    module = importlib.import_module(module_name)
    obj = getattr(module, name)  # importable
    assert name in module.__all__
    assert api_reference_documents(module_name, name, obj), f"{module_name}.{name} is not in docs/api"


def test_star_import_gives_the_documented_names():
    import medunlearn

    assert {"run_finetune", "evaluate_unlearning", "report", "load_metric"} <= set(medunlearn.__all__)
    assert all(hasattr(medunlearn, name) for name in medunlearn.__all__)
