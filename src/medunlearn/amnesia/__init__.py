"""AMNESIA: medical unlearning benchmark data.

Records (:mod:`.schema`), the three sources (:mod:`.sources`: the fictitious cohort
:mod:`.sources.synthetic`, the PMC-Patients reader :mod:`.sources.pmc_patients`, whose disease classifier is
:mod:`medunlearn.ontology.vocabulary`, and the LLM construction :mod:`.sources.llm_built`: labels, QA and a
judge panel from notes alone), splits (:mod:`.splits`), the pipeline from a source to the folder
(:mod:`.pipeline`), the Hub-ready folder (:mod:`.hub`), its audit (:mod:`.audit`) and a ``datasets`` builder
(:mod:`.hf_builder`).
"""

from medunlearn.amnesia.pipeline import (
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
