"""The method table: names, aliases, lazy imports, errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from medunlearn.unlearn.methods import (
    METHODS,
    MethodSpec,
    UnknownMethodError,
    available_methods,
    get_method,
    resolve_method,
)

CORE = ["grad_ascent", "grad_diff", "kl_min", "npo", "simnpo", "rmu"]


@pytest.mark.parametrize(
    "name, stem",
    [
        ("GradDiff", "grad_diff"),
        ("graddiff", "grad_diff"),
        ("KL-Min", "kl_min"),
        ("SIMNPO", "simnpo"),
        ("rmu", "rmu"),
        ("GradAscent", "grad_ascent"),
        ("npo", "npo"),
        ("grad-diff", "grad_diff"),
    ],
)
def test_aliases_resolve_case_insensitively(name, stem):
    assert resolve_method(name).stem == stem


def test_unknown_method_lists_the_known_ones():
    with pytest.raises(UnknownMethodError, match="unknown unlearning method 'forgetall'.*grad_diff"):
        resolve_method("forgetall")


def test_core_methods_are_available_with_their_classes():
    available = available_methods()
    for stem in CORE:
        config_class, trainer_class = available[stem].load()
        assert trainer_class.config_class is config_class
        assert config_class.__name__ == METHODS[stem].config_class


def test_no_alias_is_shared_between_methods():
    seen = {}
    for stem, spec in METHODS.items():
        for name in (stem, *spec.aliases):
            key = name.lower().replace("-", "_")
            assert seen.setdefault(key, stem) == stem


def test_lazy_package_attributes():
    import medunlearn.unlearn as unlearn
    from medunlearn.unlearn import GradDiffTrainer, RMUConfig

    assert GradDiffTrainer.__name__ == "GradDiffTrainer" and RMUConfig().layer is None
    with pytest.raises(AttributeError):
        unlearn.NoSuchTrainer  # noqa: B018


@pytest.mark.parametrize(
    "module_text, error, message",
    [
        (
            "import a_dependency_that_is_not_installed\n",
            ModuleNotFoundError,
            "a_dependency_that_is_not_installed",
        ),
        ("raise RuntimeError('half-written method')\n", RuntimeError, "half-written method"),
    ],
    ids=["missing-dependency", "error-in-module"],
)
def test_a_method_module_that_fails_to_import_raises_its_own_error(
    tmp_path, monkeypatch, module_text, error, message
):
    """The name is found in the table; the import error surfaces as itself, never as "unknown method"."""
    (tmp_path / "broken_unlearning_method.py").write_text(module_text)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = MethodSpec(
        "broken", "broken_unlearning_method", "BrokenConfig", "BrokenTrainer", ("Broken",), "fails to import"
    )
    monkeypatch.setitem(METHODS, "broken", spec)
    assert resolve_method("Broken") is spec and "broken" in available_methods()
    assert "broken_unlearning_method" not in sys.modules  # resolving read the table only
    with pytest.raises(error, match=message) as raised:
        get_method("broken")
    assert not isinstance(raised.value, UnknownMethodError)


def test_resolving_a_method_imports_no_method_module_and_not_torch():
    code = (
        "import sys\n"
        "from medunlearn.unlearn.methods import METHODS, resolve_method\n"
        "for name in ('GradDiff', 'npo', 'KL-Min', 'rmu'):\n"
        "    resolve_method(name)\n"
        "loaded = sorted(spec.module for spec in METHODS.values() if spec.module in sys.modules)\n"
        "assert not loaded and 'torch' not in sys.modules, (loaded, 'torch' in sys.modules)\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
