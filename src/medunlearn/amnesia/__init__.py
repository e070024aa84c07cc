"""AMNESIA: medical unlearning benchmark data.

Records (:mod:`.schema`), the fictitious cohort (:mod:`.cohort`), the PMC-Patients reader
(:mod:`.pmc_patients`; its disease classifier is :mod:`medunlearn.ontology.vocabulary`), splits
(:mod:`.splits`), the Hub-ready folder (:mod:`.hub`), its audit (:mod:`.audit`), a ``datasets`` builder
(:mod:`.builder`), and the LLM construction pipeline (:mod:`.sources.llm_built`: labels, QA and a judge
panel from notes alone).
"""

from medunlearn.amnesia.build import (
    build_amnesia,
    build_amnesia_folder,
    build_amnesia_from_notes,
    build_contents,
)
from medunlearn.amnesia.schema import Patient, QAPair, RecordError
from medunlearn.amnesia.sources.llm_built import ConstructionConfig
from medunlearn.amnesia.splits import SplitConfig, build_splits
from medunlearn.ontology.amnesia import DISEASES, QA_TYPES

__all__ = [
    "DISEASES",
    "QA_TYPES",
    "ConstructionConfig",
    "Patient",
    "QAPair",
    "RecordError",
    "SplitConfig",
    "build_amnesia",
    "build_amnesia_folder",
    "build_amnesia_from_notes",
    "build_contents",
    "build_splits",
]
