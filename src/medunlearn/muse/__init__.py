"""MUSE-format benchmark mode: MUSE-format data (the Hub layout of ``muse-bench/MUSE-News`` / ``MUSE-Books``),
a fictitious MUSE-format folder of ours, and the MUSE metric conventions with the reference implementation's
(OpenUnlearning at d3d7cf9) as a preset. See ``docs/muse.md``."""

from medunlearn.utils.lazy import lazy_exports

# Imported on first use (PEP 562), so that `medunlearn muse --help` imports nothing heavy.
_HOMES = {
    "MuseFormatError": ".data",
    "MuseLayoutError": ".data",
    "MuseMissingSplitError": ".data",
    "MuseRowError": ".data",
    "load_muse_split": ".data",
    "open_muse_folder": ".data",
    "build_muse_configs": ".build",
    "build_muse_folder": ".build",
    "MUSE_PRESETS": ".conventions",
    "MuseConventions": ".conventions",
    "muse_preset": ".conventions",
    "evaluate_muse": ".evaluate",
    "score_muse_folder": ".evaluate",
    "MuseFinetuneArguments": ".finetune",
    "run_muse_finetune": ".finetune",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)


__all__ = sorted(_HOMES)
