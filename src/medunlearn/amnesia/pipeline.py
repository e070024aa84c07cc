"""From raw sources to the Hub-ready folder: records → validation → splits → files."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from medunlearn.amnesia.hub import FolderContents, write_folder
from medunlearn.amnesia.schema import RecordError, validate_notes, validate_qa
from medunlearn.amnesia.second_opinion import classifier_second_opinion
from medunlearn.amnesia.sources.llm_built import Construction, ConstructionConfig, construct_records
from medunlearn.amnesia.sources.pmc_patients import (
    LOW_CONFIDENCE,
    UNCLASSIFIED,
    classifier_report,
    note_titles,
    read_pmc_patients_with_analyses,
    read_qa_file,
)
from medunlearn.amnesia.sources.synthetic import generate_cohort, generate_holdout_notes
from medunlearn.amnesia.splits import FORGET_PERCENTAGES, SplitConfig, build_splits, forget_size
from medunlearn.errors import InputError
from medunlearn.ontology.amnesia import DISEASE_LEVEL_DEFAULT, DISEASES, QA_TYPES

SOURCES = ("synthetic", "pmc-patients")


def join_and_check_counts(
    notes: pa.Table, qa: pa.Table, qa_per_type: int, qa_source: str = "qa"
) -> tuple[pa.Table, pa.Table, dict[str, list[str]]]:
    """Attach each QA's disease from its patient; drop (and count) patients without exactly ``qa_per_type`` QA
    of each type. A QA about a patient absent from the notes is an input error.
    """
    patient_ids = np.asarray(notes["patient_id"].to_pylist(), dtype=object).astype(str)
    qa_patients = np.asarray(qa["patient_id"].to_pylist(), dtype=object).astype(str)
    known = np.isin(qa_patients, patient_ids)
    if not known.all():
        row = int(np.flatnonzero(~known)[0]) + 1
        raise RecordError(
            qa_source, row, "patient_id", f"unknown patient {str(qa_patients[row - 1])!r} (not in the notes)"
        )
    order = np.argsort(patient_ids)
    position = order[np.searchsorted(patient_ids, qa_patients, sorter=order)]
    diseases = np.asarray(notes["disease"].to_pylist(), dtype=object)
    qa = qa.set_column(
        qa.schema.get_field_index("disease"), "disease", pa.array(diseases[position].astype(str))
    )

    qa_types = np.asarray(qa["qa_type"].to_pylist(), dtype=object).astype(str)
    counts = np.zeros((len(patient_ids), len(QA_TYPES)), dtype=np.int64)
    for column, qa_type in enumerate(QA_TYPES):
        np.add.at(counts[:, column], position[qa_types == qa_type], 1)
    complete = (counts == qa_per_type).all(axis=1)
    skipped: dict[str, list[str]] = {}
    if not complete.all():
        reason = f"not exactly {qa_per_type} factual and {qa_per_type} reasoning QA"
        skipped[reason] = sorted(patient_ids[~complete].tolist())
        keep_ids = pa.array(patient_ids[complete])
        notes = notes.filter(pc.is_in(notes["patient_id"], value_set=keep_ids))
        qa = qa.filter(pc.is_in(qa["patient_id"], value_set=keep_ids))
    return notes, qa, skipped


@dataclass(frozen=True)
class BuildOptions:
    """The options of :func:`build_contents` (also those of ``build_amnesia`` and a study's ``data.build``).

    ``source`` is ``synthetic`` (a cohort of ``patients`` drawn from ``seed``) or ``pmc-patients``
    (``notes_path`` and ``qa_path``); the others shape the splits (docs/benchmarks/amnesia.md).
    ``holdout_notes``: how many extra patients' notes the ``holdout_notes`` config holds (notes fine-tuning
    never reads); ``None`` is :func:`default_holdout_notes`. Only the synthetic source can draw them."""

    source: str = "synthetic"
    patients: int = 200
    seed: int = 0
    notes_path: str | os.PathLike | None = None
    qa_path: str | os.PathLike | None = None
    disease_level: Sequence[str] = DISEASE_LEVEL_DEFAULT
    forget_percentages: Sequence[int] = FORGET_PERCENTAGES
    qa_per_type: int = 4
    holdout_per_type: int = 1
    holdout_notes: int | None = None


def default_holdout_notes(source: str, patients: int) -> int:
    """Held-out notes of a build [ours]: as many as the largest random forget set, ``forget_25``, has
    patients (``round(25% · patients)``, at least 1) for the synthetic cohort, so that the notes membership
    test has as many non-members as members, and enough of each disease for a disease-level forget set (it
    compares notes of the forget patients' diseases only); none for PMC-Patients, whose notes all belong to
    patients of the folder.

    >>> default_holdout_notes("synthetic", 200), default_holdout_notes("synthetic", 2)
    (50, 1)
    >>> default_holdout_notes("pmc-patients", 200)
    0
    """
    return max(1, forget_size(max(FORGET_PERCENTAGES), patients)) if source == "synthetic" else 0


def _holdout_notes(options: BuildOptions) -> pa.Table | None:
    """The ``holdout_notes`` config's notes (``None``: none asked for), validated like the cohort's."""
    count = options.holdout_notes
    count = default_holdout_notes(options.source, options.patients) if count is None else count
    if count < 0:
        raise InputError(f"holdout_notes must be at least 0, got {count}")
    if count == 0:
        return None
    if options.source != "synthetic":
        raise InputError(
            f"holdout_notes {count}: only --source synthetic can draw notes of patients outside the folder"
        )
    notes = generate_holdout_notes(count, options.seed)
    validate_notes(notes, "synthetic held-out notes")
    return notes


@dataclass(frozen=True)
class RecordOrigin:
    """Where records came from: the source, the build parameters it records, the patients it skipped
    (by reason) and the names that validation errors give the notes and the QA."""

    source: str
    parameters: dict
    skipped: dict[str, list[str]]
    notes_source: str
    qa_source: str


def _split_config(
    seed: int,
    disease_level: Sequence[str] = DISEASE_LEVEL_DEFAULT,
    forget_percentages: Sequence[int] = FORGET_PERCENTAGES,
    holdout_per_type: int = 1,
) -> SplitConfig:
    """The splits' settings, after checking that every disease-level disease is known."""
    unknown = [d for d in disease_level if d not in DISEASES]
    if unknown:
        raise InputError(f"unknown disease(s) {', '.join(unknown)}; allowed: {', '.join(DISEASES)}")
    return SplitConfig(
        seed=seed,
        forget_percentages=tuple(forget_percentages),
        disease_level=tuple(disease_level),
        holdout_per_type=holdout_per_type,
    )


def _check_per_type(qa_per_type: int, holdout_per_type: int) -> None:
    """Each patient keeps ``holdout_per_type`` QA of each type unseen and trains on the rest, so
    ``qa_per_type`` must be the larger; named as the options a user gives (``--qa-per-type``: the command line
    holds ``holdout_per_type`` at 1).

    >>> _check_per_type(1, 1)
    Traceback (most recent call last):
    ...
    medunlearn.errors.InputError: --qa-per-type (qa_per_type) must be at least 2, got 1: ...
    """
    if holdout_per_type < 1:
        raise InputError(
            f"holdout_per_type must be at least 1 (QA of each type held out), got {holdout_per_type}"
        )
    if qa_per_type <= holdout_per_type:
        raise InputError(
            f"--qa-per-type (qa_per_type) must be at least {holdout_per_type + 1}, got {qa_per_type}: "
            f"{holdout_per_type} QA of each type per patient are held out (holdout_per_type) and at least "
            "one more is trained on"
        )


def _read_records(options: BuildOptions) -> tuple[pa.Table, pa.Table, RecordOrigin, dict | None]:
    """Notes and QA of the chosen source, with their origin and (for PMC-Patients notes) the rule-based
    classifier's analyses; the QA of notes the classifier could not label are dropped with them."""
    skipped: dict[str, list[str]] = {}
    if options.source == "synthetic":
        notes, qa = generate_cohort(patients=options.patients, seed=options.seed)
        parameters = {"source": options.source, "patients": options.patients}
        origin = RecordOrigin(options.source, parameters, skipped, "synthetic cohort", "synthetic cohort")
        return notes, qa, origin, None
    notes_path, qa_path = options.notes_path, options.qa_path
    if notes_path is None or qa_path is None:
        raise InputError("--source pmc-patients needs both --notes FILE and --qa FILE")
    notes, unclassified, analyses = read_pmc_patients_with_analyses(notes_path)
    if unclassified:
        skipped[UNCLASSIFIED] = sorted(unclassified)
    qa = read_qa_file(qa_path)
    if skipped:
        # Unclassified notes were dropped by the reader; their QA go with them.
        dropped = pa.array(next(iter(skipped.values())), pa.string())
        qa = qa.filter(pc.invert(pc.is_in(qa["patient_id"], value_set=dropped)))
    parameters = {"source": options.source, "notes": Path(notes_path).name, "qa": Path(qa_path).name}
    origin = RecordOrigin(options.source, parameters, skipped, str(notes_path), str(qa_path))
    return notes, qa, origin, analyses


def build_contents(options: BuildOptions | None = None, /, **fields) -> FolderContents:
    """Records and splits in memory (what :func:`build_amnesia_folder` writes).

    ``fields`` are :class:`BuildOptions` fields (``source=``, ``patients=``, ``seed=``, ...), given alone or
    over ``options``."""
    options = BuildOptions(**fields) if options is None else dataclasses.replace(options, **fields)
    if options.source not in SOURCES:
        raise InputError(f"unknown source {options.source!r}; choose one of {', '.join(SOURCES)}")
    split = _split_config(
        options.seed, options.disease_level, options.forget_percentages, options.holdout_per_type
    )
    qa_per_type = options.qa_per_type
    _check_per_type(qa_per_type, options.holdout_per_type)
    holdout_notes = _holdout_notes(options)  # first: a refused count costs no reading
    notes, qa, origin, analyses = _read_records(options)
    contents = contents_from_records(notes, qa, origin=origin, split=split, qa_per_type=qa_per_type)
    if holdout_notes is not None:
        contents.holdout_notes = holdout_notes
        contents.build_parameters["holdout_notes"] = holdout_notes.num_rows
    if analyses is not None:
        # Confidence and deciding rule of every patient kept after validation [ours]; not a notes column. The
        # embedding's second opinion on the skipped and low-confidence notes is recorded beside it.
        kept = contents.notes["patient_id"].to_pylist()
        titles = note_titles(options.notes_path)
        opinion = classifier_second_opinion(titles, analyses, set(kept), LOW_CONFIDENCE)
        contents.classifier = classifier_report(analyses, kept, opinion)
    return contents


def contents_from_records(
    notes: pa.Table,
    qa: pa.Table,
    *,
    origin: RecordOrigin,
    split: SplitConfig,
    qa_per_type: int,
    construction: dict | None = None,
) -> FolderContents:
    """Validated records → splits: what every source ends with (the synthetic cohort, notes + a QA file,
    the LLM-built pipeline)."""
    validate_notes(notes, origin.notes_source)
    validate_qa(qa, origin.qa_source)
    notes, qa, incomplete = join_and_check_counts(notes, qa, qa_per_type, origin.qa_source)
    skipped = {**origin.skipped, **incomplete}
    if notes.num_rows == 0:
        raise InputError(
            f"{origin.notes_source}: no patient left after validation ({', '.join(skipped) or 'no records'})"
        )
    parameters = {
        **origin.parameters,
        "seed": split.seed,
        "forget_percentages": list(split.forget_percentages),
        "disease_level": list(split.disease_level),
        "qa_per_type": qa_per_type,
        "holdout_per_type": split.holdout_per_type,
    }
    return FolderContents(
        notes=notes,
        qa=qa,
        splits=build_splits(notes, qa, split),
        source=origin.source,
        build_parameters=parameters,
        skipped=skipped,
        construction=construction,
    )


def build_amnesia(out_dir: str | os.PathLike, *, overwrite: bool = False, **build_options) -> Path:
    """Build an AMNESIA folder that ``load_dataset(out_dir, CONFIG)`` reads.

    ``build_options`` are those of :func:`build_contents` (``source``, ``patients``, ``seed``, ``notes_path``,
    ``qa_path``, ``disease_level``, ``forget_percentages``, ``qa_per_type``, ``holdout_per_type``,
    ``holdout_notes``).

    >>> import tempfile, datasets
    >>> folder = build_amnesia(tempfile.mkdtemp() + "/amnesia", patients=40, seed=0)
    >>> datasets.load_dataset(str(folder), "forget_10")["train"].num_rows  # 4 patients × 6 seen QA
    24
    """
    from medunlearn.amnesia.hub import atomic_folder_check

    inputs = {"--notes": build_options.get("notes_path"), "--qa": build_options.get("qa_path")}
    atomic_folder_check(out_dir, overwrite, inputs)  # before the build: a refusal costs nothing
    return write_folder(build_contents(**build_options), out_dir, overwrite=overwrite, inputs=inputs)


class NoPatientLeftError(InputError):
    """Every patient was skipped by the LLM construction; ``construction`` holds the report saying why."""

    def __init__(self, message: str, construction: Construction):
        super().__init__(message)
        self.construction = construction


def build_amnesia_from_notes(
    out_dir: str | os.PathLike,
    notes_path: str | os.PathLike,
    config: ConstructionConfig,
    *,
    overwrite: bool = False,
    backends=None,
    progress: bool = True,
    **split_options,
) -> tuple[Path, Construction]:
    """Build an AMNESIA folder from notes alone (``medunlearn amnesia build --source pmc-patients --notes FILE
    --generate SPEC``): LLM disease labels, generated QA and a judge panel
    (:mod:`medunlearn.amnesia.sources.llm_built`), then the splits, the Hub folder (its card and
    ``amnesia_construction.json`` carry the construction report) and the audit.

    ``split_options`` are ``disease_level``, ``forget_percentages`` and ``holdout_per_type``, as in
    :class:`BuildOptions` (the seed and the QA per type come from ``config``).

    Returns the folder and the :class:`~medunlearn.amnesia.sources.llm_built.Construction` (report, calls made
    in this run, seconds). Raises before any LLM call when ``out_dir`` exists and ``overwrite`` is False.
    """
    from medunlearn.amnesia.audit import audit_folder
    from medunlearn.amnesia.hub import atomic_folder_check

    split = _split_config(config.seed, **split_options)
    _check_per_type(config.qa_per_type, split.holdout_per_type)  # before any LLM call
    atomic_folder_check(out_dir, overwrite, {"--notes": notes_path})
    construction = construct_records(notes_path, config, backends=backends, progress=progress)
    if construction.notes.num_rows == 0:
        reasons = ", ".join(f"{reason}: {len(ids)}" for reason, ids in construction.skipped.items())
        raise NoPatientLeftError(
            f"{notes_path}: no patient left after construction ({reasons or 'no records'})", construction
        )
    origin = RecordOrigin(
        source="pmc-patients",
        parameters=_construction_parameters(construction, notes_path, config),
        skipped=dict(construction.skipped),
        notes_source=str(notes_path),
        qa_source=f"{notes_path} (generated QA)",
    )
    contents = contents_from_records(
        construction.notes,
        construction.qa,
        origin=origin,
        split=split,
        qa_per_type=config.qa_per_type,
        construction=construction.report,
    )
    inputs = {"--notes": notes_path}
    folder = write_folder(contents, out_dir, overwrite=overwrite, progress=progress, inputs=inputs)
    audit_folder(folder)
    return folder, construction


def _construction_parameters(
    construction: Construction, notes_path: str | os.PathLike, config: ConstructionConfig
) -> dict:
    """The build parameters of an LLM-built folder: the models, prompt versions and settings that made it."""
    return {
        "source": "pmc-patients",
        "notes": Path(notes_path).name,
        "qa": "generated (medunlearn.amnesia.sources.llm_built)",
        "generator": construction.report["models"]["generator"],
        "judges": construction.report["models"]["judges"],
        "labeler": construction.report["models"]["labeler"],
        "prompt_versions": {name: p["version"] for name, p in construction.report["prompts"].items()},
        **construction.report["settings"],
        "sample": config.sample,
    }


build_amnesia_folder = (
    build_amnesia  # the name before the Python API was gathered (kept for notebooks and scripts)
)
