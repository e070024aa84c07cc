"""The method table: names, aliases, lazy imports, errors."""

from __future__ import annotations

import pytest

from medunlearn.unlearn.methods import METHODS, UnknownMethodError, available_methods, resolve_method

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

    assert GradDiffTrainer.__name__ == "GradDiffTrainer" and RMUConfig().layer == 7
    with pytest.raises(AttributeError):
        unlearn.NoSuchTrainer  # noqa: B018
