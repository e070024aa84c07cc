"""The BioDivergence label ontology: six conflict classes and 13 divergence axes, as data.

The class and axis names come from the paper (docs/benchmarks/biodivergence.md); the ids and the one-line
definitions are ours. The paper calls nine axes primary and four provisional without saying which: ``primary``
is therefore a field of each entry, not code, and the default marks the four least specific axes as
provisional (ours).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from medunlearn.errors import MedunlearnError

NO_CONFOUNDER = "none"


class UnknownLabelError(MedunlearnError, ValueError):
    """A label that is not in the registry; the message lists the allowed ones."""


@dataclass(frozen=True)
class Label:
    id: str
    name: str
    definition: str
    primary: bool = True


CONFLICT_TYPES: tuple[Label, ...] = (
    Label(
        "direct_contradiction",
        "direct contradiction",
        "The claims assert incompatible findings about the same question in comparable settings.",
    ),
    Label(
        "contextual_contradiction",
        "contextual contradiction",
        "The claims look incompatible but differ in context (population, assay, design...); both can hold.",
    ),
    Label(
        "underspecified_surface_contradiction",
        "underspecified surface contradiction",
        "The claims conflict on the surface but neither states enough context to tell why.",
    ),
    Label(
        "insufficient_evidence",
        "insufficient evidence",
        "At least one claim is too weak or hedged to support or refute the other.",
    ),
    Label(
        "unresolved_scientific_controversy",
        "unresolved scientific controversy",
        "The disagreement reflects an open debate in the field that the abstracts cannot settle.",
    ),
    Label("no_conflict", "no conflict", "The claims are compatible or about different questions."),
)

DIVERGENCE_AXES: tuple[Label, ...] = (
    Label("population", "population", "Different study populations (age, sex, ancestry, comorbidity)."),
    Label("geography", "geography", "Different countries, regions or sites."),
    Label(
        "time_period", "time period", "Data collected in different periods (e.g. before/after a guideline)."
    ),
    Label("assay_protocol", "assay/detection protocol", "Different measurement, assay or detection methods."),
    Label("study_design", "study design", "Different designs (RCT, cohort, case-control, in vitro)."),
    Label("intervention", "intervention", "Different dose, drug, schedule or comparator."),
    Label("disease_subtype", "disease subtype", "Different subtypes, stages or phenotypes of the disease."),
    Label(
        "molecular_context", "molecular context", "Different genotype, mutation, pathway or biomarker status."
    ),
    Label(
        "clinical_setting",
        "clinical setting",
        "Different care settings (ICU, outpatient, community).",
        primary=False,
    ),
    Label("sample_source", "sample source", "Different specimen types (blood, tissue, isolate source)."),
    Label(
        "endpoint_definition",
        "endpoint definition",
        "Different outcome definitions or follow-up windows.",
        primary=False,
    ),
    Label(
        "biological_strain",
        "biological strain",
        "Different organism strains, lineages or cell lines.",
        primary=False,
    ),
    Label(
        "unknown_latent_factor",
        "unknown latent factor",
        "A difference the abstracts do not name.",
        primary=False,
    ),
)

CONFLICT_TYPE_IDS: tuple[str, ...] = tuple(label.id for label in CONFLICT_TYPES)
AXIS_IDS: tuple[str, ...] = tuple(label.id for label in DIVERGENCE_AXES)
CONTEXTUAL_CONTRADICTION = "contextual_contradiction"


def _allowed(kind: str, allowed: Iterable[str]) -> str:
    return f"unknown {kind}; allowed: {', '.join(allowed)}"


def check_conflict_type(value: str) -> str:
    """Return ``value`` if it is a conflict-type id, else raise :class:`UnknownLabelError`.

    >>> check_conflict_type("no_conflict")
    'no_conflict'
    >>> check_conflict_type("maybe")  # doctest: +ELLIPSIS, +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    medunlearn.ontology.biodivergence.UnknownLabelError: unknown conflict_type 'maybe';
    allowed: direct_contradiction, ...
    """
    if value not in CONFLICT_TYPE_IDS:
        raise UnknownLabelError(_allowed(f"conflict_type {value!r}", CONFLICT_TYPE_IDS))
    return value


def check_axes(values: Iterable[str]) -> list[str]:
    """Return the axes as a list if every one is an axis id, else raise :class:`UnknownLabelError`."""
    values = list(values)
    for value in values:
        if value not in AXIS_IDS:
            raise UnknownLabelError(_allowed(f"axis {value!r}", AXIS_IDS))
    return values


def check_confounder(value: str | None, axes: Iterable[str] | None = None) -> str:
    """The dominant confounder is one axis id (among ``axes`` when given) or ``"none"``; ``None`` means
    none."""
    if value is None or value == "" or value == NO_CONFOUNDER:
        return NO_CONFOUNDER
    if value not in AXIS_IDS:
        raise UnknownLabelError(_allowed(f"dominant_confounder {value!r}", (*AXIS_IDS, NO_CONFOUNDER)))
    if axes is not None and value not in set(axes):
        raise UnknownLabelError(f"dominant_confounder {value!r} is not one of the pair's axes {list(axes)}")
    return value


def ontology_table() -> list[dict]:
    """The registry as rows (for the dataset card and docs)."""
    rows = [{"kind": "conflict_type", **label.__dict__} for label in CONFLICT_TYPES]
    rows += [{"kind": "axis", **label.__dict__} for label in DIVERGENCE_AXES]
    return rows
