"""A ``datasets`` builder that builds AMNESIA configs in memory, instantiated directly (``datasets`` 5 runs no
loading scripts). It is the same pipeline as ``medunlearn amnesia build``, without writing the folder:

>>> import tempfile
>>> builder = AmnesiaBuilder(config_name="forget_10", patients=40, seed=0, cache_dir=tempfile.mkdtemp())
>>> builder.download_and_prepare()
>>> builder.as_dataset("holdout").num_rows  # 4 patients × 2 holdout QA
8
"""

from __future__ import annotations

from dataclasses import dataclass

import datasets

from medunlearn.amnesia.hub import (
    HOLDOUT_NOTES,
    NOTES_COLUMNS,
    NOTES_CONFIGS,
    QA_COLUMNS,
    TEXT_LIST_COLUMNS,
    config_tables,
)
from medunlearn.amnesia.splits import FORGET_PERCENTAGES
from medunlearn.config_names import SplitName, amnesia_config_pairs, forget_config_of
from medunlearn.errors import InputError
from medunlearn.ontology.amnesia import DISEASES

_QA_FEATURES = datasets.Features({name: datasets.Value("string") for name in QA_COLUMNS})
_NOTES_FEATURES = datasets.Features(
    {
        name: datasets.List(datasets.Value("string"))
        if name in TEXT_LIST_COLUMNS
        else datasets.Value("string")
        for name in NOTES_COLUMNS
    }
)


def all_config_names() -> list[str]:
    """Every config name an AMNESIA folder may hold (whether a cohort can fill it depends on its diseases)."""
    return ["notes", HOLDOUT_NOTES, "full", *amnesia_config_pairs(FORGET_PERCENTAGES, DISEASES)]


@dataclass
class AmnesiaBuilderConfig(datasets.BuilderConfig):
    """Which config to build, and from what (the options of ``medunlearn.amnesia.build_contents``)."""

    source: str = "synthetic"
    patients: int = 200
    seed: int = 0
    notes_path: str | None = None
    qa_path: str | None = None


class AmnesiaBuilder(datasets.ArrowBasedBuilder):
    BUILDER_CONFIG_CLASS = AmnesiaBuilderConfig
    BUILDER_CONFIGS = [AmnesiaBuilderConfig(name=name) for name in all_config_names()]
    DEFAULT_CONFIG_NAME = "full"

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description="AMNESIA medical unlearning benchmark (medunlearn build)",
            features=_NOTES_FEATURES if self.config.name in NOTES_CONFIGS else _QA_FEATURES,
        )

    def _split_generators(self, dl_manager):
        from medunlearn.amnesia.pipeline import build_contents

        forget_name = forget_config_of(self.config.name)
        disease = SplitName.parse(forget_name).disease if forget_name else None
        contents = build_contents(
            source=self.config.source,
            patients=self.config.patients,
            seed=self.config.seed,
            notes_path=self.config.notes_path,
            qa_path=self.config.qa_path,
            disease_level=[disease] if disease else [],
        )
        tables = {
            split: table for config, split, table in config_tables(contents) if config == self.config.name
        }
        if not tables:
            reason = contents.splits.omitted.get(forget_name, "not built")
            raise InputError(f"config {self.config.name!r} does not exist for this cohort: {reason}")
        return [
            datasets.SplitGenerator(name=split, gen_kwargs={"table": table})
            for split, table in tables.items()
        ]

    def _generate_tables(self, table):
        yield 0, table.cast(self.info.features.arrow_schema)
