"""Our training arguments raise no deprecation warning (transformers 5 renamed ``gradient_checkpointing`` to
``activation_checkpointing``; TRL's configs still default the old name to True), and a user's choice of either
name still takes effect."""

from __future__ import annotations

import warnings

import pytest

from medunlearn.models import ModelArguments
from medunlearn.unlearn.run import default_sft_config, make_method_config


def _deprecations(build) -> list[str]:
    """The deprecation warnings of a second call of ``build`` (the first imports torch and friends, whose own
    import-time warnings are not ours)."""
    build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build()
    return [str(w.message) for w in caught if issubclass(w.category, FutureWarning | DeprecationWarning)]


def test_the_sft_config_of_both_finetuning_stages_warns_nothing(tmp_path):
    assert _deprecations(lambda: default_sft_config(ModelArguments("tiny-llama"), tmp_path)) == []
    config = default_sft_config(ModelArguments("tiny-llama"), tmp_path)
    assert config.activation_checkpointing is False and config.gradient_checkpointing is False


@pytest.mark.parametrize("method", ["grad_diff", "kl_min", "simnpo", "rmu"])
def test_the_demo_methods_configs_warn_nothing(tmp_path, method):
    assert _deprecations(lambda: make_method_config(method, tmp_path)) == []


@pytest.mark.parametrize("flag", ["--activation_checkpointing", "--gradient_checkpointing"])
def test_a_user_who_asks_for_checkpointing_gets_it_under_either_name(tmp_path, flag):
    config = default_sft_config(ModelArguments("tiny-llama"), tmp_path, [flag, "true"])
    assert config.activation_checkpointing is True
