"""TOFU-compatible benchmark mode: TOFU-format data, the TOFU metric set through the one-pass runner, and the
reference implementation's conventions (OpenUnlearning) as a selectable preset. See ``docs/tofu.md``."""

from medunlearn.tofu.conventions import PRESETS, ConventionTokenizer, TofuConventions, preset
from medunlearn.tofu.data import (
    ALL_CONFIGS,
    HUB_ID,
    TofuInputError,
    load_tofu,
    retain_config_for,
    tofu_splits,
)
from medunlearn.tofu.evaluate import evaluate_tofu, score_tofu, tofu_examples
from medunlearn.tofu.scoring import REFERENCE_NAMES, reference_summary, summarise_tofu
from medunlearn.tofu.synthetic import build_tofu_configs, build_tofu_folder

__all__ = [
    "ALL_CONFIGS",
    "HUB_ID",
    "PRESETS",
    "REFERENCE_NAMES",
    "ConventionTokenizer",
    "TofuConventions",
    "TofuInputError",
    "build_tofu_configs",
    "build_tofu_folder",
    "evaluate_tofu",
    "load_tofu",
    "preset",
    "reference_summary",
    "retain_config_for",
    "score_tofu",
    "summarise_tofu",
    "tofu_examples",
    "tofu_splits",
]
