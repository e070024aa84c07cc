"""TOFU-compatible benchmark mode: TOFU-format data, the TOFU metric set through the one-pass runner, and the
reference implementation's conventions (OpenUnlearning) as a selectable preset. See ``docs/tofu.md``."""

from medunlearn.utils.lazy import lazy_exports

# Imported on first use (PEP 562), so that `medunlearn tofu --help` does not load the evaluation (pandas).
_HOMES = {
    "PRESETS": ".conventions",
    "ConventionTokenizer": ".conventions",
    "TofuConventions": ".conventions",
    "preset": ".conventions",
    "ALL_CONFIGS": ".data",
    "HUB_ID": ".data",
    "TofuInputError": ".data",
    "load_tofu": ".data",
    "retain_config_for": ".data",
    "tofu_splits": ".data",
    "evaluate_tofu": ".evaluate",
    "score_tofu": ".evaluate",
    "tofu_examples": ".evaluate",
    "REFERENCE_NAMES": ".scoring",
    "reference_summary": ".scoring",
    "summarise_tofu": ".scoring",
    "build_tofu_configs": ".synthetic",
    "build_tofu_folder": ".synthetic",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)


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
