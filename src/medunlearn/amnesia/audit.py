"""Re-read an AMNESIA folder the way users get it (through the README's ``configs:`` block) and check every
split invariant of docs/benchmarks/amnesia.md ("Splits"). The first violation stops the audit and is named.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from medunlearn.amnesia.hub import (
    BUILD_FILE,
    HOLDOUT_NOTES,
    NOTES_COLUMNS,
    NOTES_CONFIGS,
    QA_COLUMNS,
    QA_SPLITS,
    TEXT_LIST_COLUMNS,
)
from medunlearn.amnesia.splits import forget_size
from medunlearn.config_names import (
    ConfigNameError,
    SplitName,
    forget_config,
    forget_configs,
    retain_config_for,
)
from medunlearn.errors import MedunlearnError, MissingInputError, shown
from medunlearn.ontology.amnesia import DISEASES, QA_TYPES
from medunlearn.utils.column_types import (
    TEXT,
    TEXT_LIST,
    column_names_problem,
    column_type_problem,
    row_count_problem,
)
from medunlearn.utils.user_files import (
    card_data_files,
    existing_folder,
    read_json,
    read_parquet,
)


class AuditFailure(MedunlearnError, AssertionError):
    """An invariant does not hold; the message says which and where. A folder the audit cannot read as an
    AMNESIA folder at all (not a folder, no README.md, a data file it lists missing or not parquet) is a
    usage error instead, another :class:`~medunlearn.errors.MedunlearnError` (exit 2, not 1)."""


@dataclass
class AuditResult:
    checks: list[tuple[str, str]] = field(default_factory=list)  # (invariant, what was checked)

    def passed(self, invariant: str, detail: str) -> None:
        self.checks.append((invariant, detail))


class _Folder:
    """The folder's configs, read once each."""

    def __init__(self, folder: Path):
        self.folder = folder
        readme = folder / "README.md"
        if not readme.is_file():
            raise MissingInputError(
                f"{folder}: no README.md (not a Hub dataset folder: its configs block lists the data files)"
            )
        # The shared card reader: a data file path leading out of the folder, or a key given twice, is named.
        self.data_files = {
            config: {split: _one_path(readme, config, split, paths) for split, paths in splits.items()}
            for config, splits in card_data_files(folder).items()
        }
        build_file = folder / BUILD_FILE
        self.manifest = read_json(build_file, expect=dict) if build_file.is_file() else {}
        self._cache: dict[tuple[str, str], dict[str, np.ndarray]] = {}

    def path(self, config: str, split: str) -> Path:
        """The data file of ``config``/``split`` (the README names one per split)."""
        return self.folder / self.data_files[config][split]

    def columns(self, config: str, split: str) -> dict[str, np.ndarray]:
        key = (config, split)
        if key not in self._cache:
            path = self.path(config, split)
            expected = NOTES_COLUMNS if config in NOTES_CONFIGS else QA_COLUMNS
            # A listed file missing: the folder cannot be read (nor by datasets), a usage error.
            if not path.is_file():
                raise MissingInputError(f"{path}: listed in README.md for {config}/{split} but missing")
            table = read_parquet(path)  # read once: the columns, their types and the ids all come from it
            _require(not (problem := column_names_problem(table.column_names, expected, path)), str(problem))
            # Every column of the type load_dataset must give back (an id stored as binary comes back as
            # bytes), with no null (it reaches a prompt, a score or a split as "None").
            kinds = {name: TEXT_LIST if name in TEXT_LIST_COLUMNS else TEXT for name in expected}
            _require(not (problem := column_type_problem(table, kinds, path)), str(problem))
            # The other invariants concern ids, types and diseases.
            wanted = [c for c in ("qa_id", "patient_id", "disease", "qa_type") if c in expected]
            self._cache[key] = {
                name: table[name].to_numpy(zero_copy_only=False).astype(str) for name in wanted
            }
        return self._cache[key]

    @functools.cache  # noqa: B019 - one reader per audit; the cache dies with it
    def patients(self, config: str) -> np.ndarray:
        ids = [self.columns(config, split)["patient_id"] for split in QA_SPLITS]
        return np.unique(np.concatenate(ids))


def _one_path(readme: Path, config: str, split: str, paths: list[str]) -> str:
    _require(len(paths) == 1, f"{readme}: config `{config}` split `{split}` names {len(paths)} files")
    return paths[0]


def _first(values: np.ndarray) -> str:
    """The first of ``values`` as a message shows it (``'P000007'``, not ``np.str_('P000007')``), or ``—``."""
    return shown(values[0]) if len(values) else "—"


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise AuditFailure(message)


def _check_configs_present(folder: _Folder, result: AuditResult) -> None:
    _require(
        "notes" in folder.data_files and "full" in folder.data_files, "configs `notes` and `full` must exist"
    )
    for config, files in folder.data_files.items():
        _require(
            config in (*NOTES_CONFIGS, "full") or _is_amnesia_split(config),
            f"config `{config}`: not an AMNESIA config name (notes, holdout_notes, full, forget_X, retain_X, "
            "disease_<name>_forget_X, disease_<name>_retain_X)",
        )
        expected = {"train"} if config in NOTES_CONFIGS else set(QA_SPLITS)
        _require(
            set(files) == expected, f"config `{config}`: splits {sorted(files)}, expected {sorted(expected)}"
        )
        for split in files:
            folder.columns(config, split)  # reads and checks the columns
    result.passed(
        "configs and fields",
        f"{len(folder.data_files)} configs, splits and columns of the AMNESIA folder layout",
    )


def _check_records(folder: _Folder, result: AuditResult) -> None:
    notes = folder.columns("notes", "train")
    ids = notes["patient_id"]
    _require(len(np.unique(ids)) == len(ids), "notes: duplicate patient_id")
    bad_disease = ~np.isin(notes["disease"], DISEASES)
    _require(not bad_disease.any(), f"notes: unknown disease {_first(notes['disease'][bad_disease])}")
    train, holdout = folder.columns("full", "train"), folder.columns("full", "holdout")
    qa_ids = np.concatenate([train["qa_id"], holdout["qa_id"]])
    _require(
        len(np.unique(qa_ids)) == len(qa_ids), "full: a qa_id appears twice (or in both train and holdout)"
    )
    all_patients = folder.patients("full")
    _require(np.array_equal(all_patients, np.sort(ids)), "full: its patients differ from the notes' patients")
    # Every QA patient is a notes patient (checked above), so a sorted lookup gives each row its patient's
    # disease.
    by_id = np.argsort(ids)
    for split, columns in (("train", train), ("holdout", holdout)):
        expected = notes["disease"][by_id[np.searchsorted(ids, columns["patient_id"], sorter=by_id)]]
        mismatch = columns["disease"] != expected
        _require(
            not mismatch.any(),
            f"full/{split}: qa {_first(columns['qa_id'][mismatch])} has another disease "
            "than its patient (one disease per patient)",
        )
        _require(np.isin(columns["qa_type"], QA_TYPES).all(), f"full/{split}: unknown qa_type")
    result.passed(
        "records", f"{len(ids):,} unique patients, {len(qa_ids):,} unique QA ids, one disease per patient"
    )


def _check_counts_per_patient(folder: _Folder, result: AuditResult) -> None:
    params = folder.manifest.get("parameters", {})
    qa_per_type, holdout_per_type = params.get("qa_per_type", 4), params.get("holdout_per_type", 1)
    n_patients = len(folder.patients("full"))
    for split, per_type in (("train", qa_per_type - holdout_per_type), ("holdout", holdout_per_type)):
        columns = folder.columns("full", split)
        keys = np.char.add(np.char.add(columns["patient_id"], "|"), columns["qa_type"])
        unique_keys, counts = np.unique(keys, return_counts=True)
        _require(
            len(unique_keys) == n_patients * len(QA_TYPES),
            f"full/{split}: some patient lacks a QA type ({len(unique_keys)} patient-type groups, "
            f"expected {n_patients * len(QA_TYPES)})",
        )
        wrong = counts != per_type
        if wrong.any():
            raise AuditFailure(
                f"full/{split}: {unique_keys[wrong][0]} has {counts[wrong][0]} QA, expected {per_type}"
            )
    result.passed(
        "QA per patient",
        f"{qa_per_type - holdout_per_type} seen + {holdout_per_type} holdout per type per patient",
    )


def _check_configs_are_subsets_of_full(folder: _Folder, result: AuditResult) -> None:
    """Every QA config's rows are rows of ``full`` (same patient, disease and type), and holdout stays
    holdout."""
    for split in QA_SPLITS:
        full = folder.columns("full", split)
        order = np.argsort(full["qa_id"])
        sorted_ids = full["qa_id"][order]
        for config in folder.data_files:
            if config in (*NOTES_CONFIGS, "full"):
                continue
            rows = folder.columns(config, split)
            position = np.clip(np.searchsorted(sorted_ids, rows["qa_id"]), 0, max(len(sorted_ids) - 1, 0))
            found = (
                sorted_ids[position] == rows["qa_id"]
                if len(sorted_ids)
                else np.zeros(len(rows["qa_id"]), bool)
            )
            if not found.all():
                qa_id = rows["qa_id"][~found][0]
                other = "holdout" if split == "train" else "train"
                where = other if qa_id in set(folder.columns("full", other)["qa_id"]) else "no split"
                raise AuditFailure(
                    f"{config}/{split}: qa {shown(qa_id)} is in full/{where}, not full/{split}"
                    + (" (a holdout QA in a train split)" if where == "holdout" else "")
                )
            index = order[position]
            for column in ("patient_id", "disease", "qa_type"):
                differs = np.flatnonzero(full[column][index] != rows[column])
                if len(differs):
                    row = differs[0]
                    raise AuditFailure(
                        f"{folder.path(config, split)}, row {row + 1}, field '{column}': qa "
                        f"{shown(rows['qa_id'][row])} has {shown(rows[column][row])} but full/{split} says "
                        f"{shown(full[column][index][row])}"
                        + (" (one disease per patient)" if column == "disease" else "")
                    )
    n_holdout = len(folder.columns("full", "holdout")["qa_id"])
    result.passed(
        "holdout", f"every config's rows are rows of full; {n_holdout:,} holdout QA, none in a train split"
    )


def _is_amnesia_split(config: str) -> bool:
    try:
        return SplitName.parse(config).benchmark == "amnesia"
    except ConfigNameError:
        return False


def _forget_configs(folder: _Folder) -> list[str]:
    return forget_configs(folder.data_files)


def _check_forget_retain(folder: _Folder, result: AuditResult) -> None:
    all_patients = folder.patients("full")
    n_pairs = 0
    for forget in _forget_configs(folder):
        retain = retain_config_for(forget)
        _require(retain in folder.data_files, f"`{forget}` has no complement `{retain}`")
        forget_patients, retain_patients = folder.patients(forget), folder.patients(retain)
        _require(len(forget_patients) > 0, f"`{forget}` is empty")
        overlap = np.intersect1d(forget_patients, retain_patients)
        _require(len(overlap) == 0, f"patient {_first(overlap)} is in both `{forget}` and `{retain}`")
        _require(
            np.array_equal(np.union1d(forget_patients, retain_patients), all_patients),
            f"`{forget}` ∪ `{retain}` is not every patient",
        )
        for split in QA_SPLITS:
            rows = len(folder.columns(forget, split)["qa_id"]) + len(folder.columns(retain, split)["qa_id"])
            _require(
                rows == len(folder.columns("full", split)["qa_id"]),
                f"`{forget}`/{split} + `{retain}`/{split} rows ≠ full/{split} rows (a patient's QA straddle)",
            )
        n_pairs += 1
    result.passed("forget/retain", f"{n_pairs} pairs disjoint and complementary, by patient")


def _check_random_level(folder: _Folder, result: AuditResult) -> None:
    n = len(folder.patients("full"))
    forget_splits = [SplitName.parse(c) for c in _forget_configs(folder)]
    percentages = sorted(split.percent for split in forget_splits if split.disease is None)
    previous = np.array([], dtype=str)
    for percentage in percentages:
        name = forget_config(percentage)
        patients = folder.patients(name)
        _require(
            len(patients) == forget_size(percentage, n),
            f"`{name}` has {len(patients)} patients, expected round({percentage}% · {n}) = "
            f"{forget_size(percentage, n)}",
        )
        _require(np.isin(previous, patients).all(), f"`{name}` does not contain the smaller forget set")
        previous = patients
    result.passed("random level", f"forget {percentages} sized round(X% · {n:,}) and nested")


def _check_disease_level(folder: _Folder, result: AuditResult) -> None:
    notes = folder.columns("notes", "train")
    n = len(notes["patient_id"])
    omitted = folder.manifest.get("omitted", {})
    summary = []
    for disease in folder.manifest.get("parameters", {}).get("disease_level", []):
        disease_patients = np.sort(notes["patient_id"][notes["disease"] == disease])
        previous = np.array([], dtype=str)
        present = []
        for percentage in folder.manifest["parameters"]["forget_percentages"]:
            name, random_name = forget_config(percentage, disease), forget_config(percentage)
            size = forget_size(percentage, n)
            if name not in folder.data_files:
                _require(
                    size == 0 or size > len(disease_patients),
                    f"`{name}` is missing although {disease} has {len(disease_patients)} ≥ {size} patients",
                )
                _require(name in omitted, f"`{name}` is missing and not listed as omitted")
                continue
            patients = folder.patients(name)
            _require(
                len(patients) == size,
                f"`{name}` has {len(patients)} patients, expected {size} (as {random_name})",
            )
            _require(
                np.isin(patients, disease_patients).all(), f"`{name}` holds a patient of another disease"
            )
            _require(
                np.isin(previous, patients).all(), f"`{name}` does not contain the smaller {disease} set"
            )
            random_forget = folder.patients(random_name)
            in_random = np.intersect1d(random_forget, disease_patients)
            _require(
                np.isin(in_random, patients).all(),
                f"`{name}` misses {disease} patients of `{random_name}`",
            )
            previous = patients
            present.append(percentage)
        summary.append(f"{disease} {present}")
    result.passed(
        "disease level", "; ".join(summary) + " — sized as random, one disease, nested, ⊇ disease ∩ random"
    )


def _check_holdout_notes(folder: _Folder, result: AuditResult) -> None:
    """``holdout_notes``, when the folder has one or its build asked for one: as many notes as the build
    parameters say, unique patients of known diseases, none of them a patient of the folder (fine-tuning reads
    ``notes`` and ``full`` only, so these notes are never trained on)."""
    expected = folder.manifest.get("parameters", {}).get(HOLDOUT_NOTES)
    if HOLDOUT_NOTES not in folder.data_files:
        _require(not expected, f"`{HOLDOUT_NOTES}` is missing although the build asked for {expected} notes")
        result.passed("held-out notes", "none in this folder (no notes membership test)")
        return
    columns = folder.columns(HOLDOUT_NOTES, "train")
    ids = columns["patient_id"]
    _require(len(ids) > 0, f"`{HOLDOUT_NOTES}` is empty")
    _require(len(np.unique(ids)) == len(ids), f"{HOLDOUT_NOTES}: duplicate patient_id")
    _require(
        expected is None or len(ids) == expected,
        f"`{HOLDOUT_NOTES}` has {len(ids)} notes, the build parameters say {expected}",
    )
    bad_disease = ~np.isin(columns["disease"], DISEASES)
    unknown = _first(columns["disease"][bad_disease])
    _require(not bad_disease.any(), f"{HOLDOUT_NOTES}: unknown disease {unknown}")
    overlap = np.intersect1d(ids, folder.columns("notes", "train")["patient_id"])
    _require(
        len(overlap) == 0,
        f"{HOLDOUT_NOTES}: patient {_first(overlap)} has a note in `notes` too (a held-out note is never "
        "trained on)",
    )
    result.passed("held-out notes", f"{len(ids):,} notes of patients outside `notes` and `full`")


def _recorded_rows(manifest: dict, config: str, split: str) -> int | None:
    """The row count the build file records for ``config``/``split`` (``sizes``), ``None`` when it records
    none (a folder without a build file, or one written before the sizes were)."""
    sizes = manifest.get("sizes")
    entry = sizes.get(config) if isinstance(sizes, dict) else None
    entry = entry.get(split) if isinstance(entry, dict) else None
    rows = entry.get("rows") if isinstance(entry, dict) else None
    return rows if isinstance(rows, int) and not isinstance(rows, bool) else None


def _check_recorded_row_counts(folder: _Folder, result: AuditResult) -> None:
    """Each split has the rows the build file records for it (as the BioDivergence audit checks its
    build.json): a split cut short or emptied after the build may still follow every other invariant. Last, so
    a split whose change breaks a named invariant is named by it first."""
    checked = 0
    for config, splits in folder.data_files.items():
        for split in splits:
            recorded = _recorded_rows(folder.manifest, config, split)
            rows = len(folder.columns(config, split)["patient_id"])
            problem = row_count_problem(rows, recorded, folder.path(config, split), BUILD_FILE)
            _require(not problem, str(problem))
            checked += recorded is not None
    result.passed("row counts", f"{checked} splits have the rows {BUILD_FILE} records")


AUDIT_CHECKS: list[Callable[[_Folder, AuditResult], None]] = [
    _check_configs_present,
    _check_records,
    _check_counts_per_patient,
    _check_configs_are_subsets_of_full,
    _check_forget_retain,
    _check_random_level,
    _check_disease_level,
    _check_holdout_notes,
    _check_recorded_row_counts,
]


def audit_folder(folder: str | Path) -> AuditResult:
    """Run every check; raise :class:`AuditFailure` naming the first violation."""
    folder = existing_folder(
        folder, "AMNESIA folder"
    )  # a path that is no folder: a usage error, not a verdict
    reader = _Folder(folder)
    result = AuditResult()
    for check in AUDIT_CHECKS:
        try:
            check(reader, result)
        except KeyError as error:
            raise AuditFailure(f"{folder}: expected config or split {error} is missing") from None
    return result
