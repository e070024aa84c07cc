"""``lazy_exports``: a package's names are imported from their modules on first use, not on import."""

from __future__ import annotations

import sys

import pytest

PACKAGE_INIT = """
from medunlearn.utils.lazy import lazy_exports

_HOMES = {"heavy_value": ".heavy", "dumps": "json"}
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
"""


@pytest.fixture
def lazy_package(tmp_path, monkeypatch):
    """A throwaway package ``lazypkg`` whose ``heavy`` module is listed, not imported, by ``__init__``."""
    package = tmp_path / "lazypkg"
    package.mkdir()
    (package / "__init__.py").write_text(PACKAGE_INIT)
    (package / "heavy.py").write_text("heavy_value = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield __import__("lazypkg")
    for name in ("lazypkg", "lazypkg.heavy"):
        sys.modules.pop(name, None)


def test_a_name_is_imported_from_its_module_on_first_use(lazy_package):
    assert "lazypkg.heavy" not in sys.modules
    assert lazy_package.heavy_value == 42
    assert "lazypkg.heavy" in sys.modules


def test_an_absolute_module_name_is_read_as_such(lazy_package):
    import json

    assert lazy_package.dumps is json.dumps


def test_an_unknown_name_raises_attribute_error_naming_the_package(lazy_package):
    with pytest.raises(AttributeError, match=r"^module 'lazypkg' has no attribute 'missing'$"):
        _ = lazy_package.missing
    assert not hasattr(lazy_package, "missing")


def test_dir_lists_the_lazy_names_before_their_import(lazy_package):
    names = dir(lazy_package)
    assert {"heavy_value", "dumps", "_HOMES"} <= set(names)
    assert names == sorted(names)
    assert "lazypkg.heavy" not in sys.modules


def test_the_packages_that_use_it_keep_their_error_messages():
    import medunlearn.muse
    import medunlearn.tofu

    for module in (medunlearn.muse, medunlearn.tofu):
        with pytest.raises(AttributeError, match=rf"module '{module.__name__}' has no attribute 'x'"):
            _ = module.x
