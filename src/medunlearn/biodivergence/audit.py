"""Audit of a BioDivergence build: the v1.0 invariants, and how much the pair-level variant leaks.

v1.0 must have zero article, claim and pair overlap between train, dev and test; dev and test hold only
LLM labels; nothing below confidence 0.45; every label in the ontology. The pair-level variant is not
meant to be disjoint: the audit reports how many of its dev/test pairs share an article with its train
split, which is the leakage v1.0 removes.

A folder built with ``eval_labels="heuristic"`` (``build --eval-labels heuristic``, [ours]) admits heuristic
labels to dev and test: the audit then checks that dev/test hold only the sources that build parameter admits,
and its report opens with a ``WARN`` line counting the heuristic dev/test labels. The parameter is read from
``build.json``'s parameters: a folder that did not ask for heuristic evaluation labels fails on them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.biodivergence.schema import (
    COLUMN_KINDS,
    MIN_CONFIDENCE,
    PoolFormatError,
    eval_label_sources,
    normalise_claim,
    normalise_pool,
    pair_features,
)
from medunlearn.biodivergence.splits import SPLITS
from medunlearn.errors import MedunlearnError, shown
from medunlearn.utils.column_types import (
    column_kind_problem,
    column_names_problem,
    column_null_problem,
    row_count_problem,
)
from medunlearn.utils.user_files import card_data_files, read_front_matter, read_json, read_parquet


class FolderFormatError(MedunlearnError, ValueError):
    """The folder is not a BioDivergence Hub folder (README configs or parquet files missing)."""


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class AuditReport:
    checks: list[Check] = field(default_factory=list)
    label_sources: dict = field(default_factory=dict)
    pairlevel_leakage: dict = field(default_factory=dict)
    build_stats: dict = field(default_factory=dict)
    eval_labels: str = "llm"

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def first_violation(self) -> Check | None:
        return next((check for check in self.checks if not check.ok), None)

    def lines(self) -> list[str]:
        lines = [
            f"{'ok  ' if c.ok else 'FAIL'} {c.name}" + (f": {c.detail}" if c.detail else "")
            for c in self.checks
        ]
        lines += self.warnings()
        for split, counts in self.label_sources.items():
            lines.append(
                f"info v1.0 {split} label sources: "
                + ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
            )
        leak = self.pairlevel_leakage
        if leak:
            lines.append(
                f"info v1.0-pairlevel leakage: {leak['eval_pairs_sharing_article_with_train']} of "
                f"{leak['eval_pairs']} dev/test pairs ({leak['eval_share_sharing_article_with_train']:.1%}) "
                f"share an article with train; {leak['articles_shared_with_train']} articles and "
                f"{leak['claims_shared_with_train']} claims shared"
            )
        if "bridging_pairs_dropped" in self.build_stats:
            lines.append(
                "info bridging pairs dropped by the v1.0 builder: "
                f"{self.build_stats['bridging_pairs_dropped']}"
            )
        return lines

    def warnings(self) -> list[str]:
        """The ``WARN`` line of a folder whose dev/test hold heuristic labels (none otherwise)."""
        evaluation = [self.label_sources.get(split, {}) for split in ("dev", "test")]
        heuristic = sum(counts.get("heuristic", 0) for counts in evaluation)
        if not heuristic:
            return []
        total = sum(sum(counts.values()) for counts in evaluation)
        return [
            f"WARN v1.0 dev/test hold {heuristic} heuristic labels of {total} "
            f"(eval_labels={self.eval_labels}): "
            "rule-made silver labels, not the paper's LLM labels; scores on them measure agreement with "
            "the rules"
        ]

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "eval_labels": self.eval_labels,
            "checks": [asdict(c) for c in self.checks],
            "label_sources": self.label_sources,
            "pairlevel_leakage": self.pairlevel_leakage,
        }


def _articles(frame: pd.DataFrame) -> np.ndarray:
    return np.unique(np.concatenate([frame["article_a"].to_numpy(str), frame["article_b"].to_numpy(str)]))


def _claims(frame: pd.DataFrame) -> np.ndarray:
    return np.unique(
        np.concatenate(
            [normalise_claim(frame["claim_a"]).to_numpy(str), normalise_claim(frame["claim_b"]).to_numpy(str)]
        )
    )


def _overlap_check(name: str, splits: dict, extract) -> Check:
    values = {split: extract(frame) for split, frame in splits.items()}
    for left, right in combinations(SPLITS, 2):
        shared = np.intersect1d(values[left], values[right])
        if shared.size:
            return Check(
                name, False, f"{shared.size} shared between {left} and {right}, e.g. {shown(shared[0])}"
            )
    return Check(name, True)


def pairlevel_leakage(splits: dict) -> dict:
    """How many dev/test pairs of a split share an article with its train split (and shared id counts)."""
    train_articles = _articles(splits["train"])
    evaluation = pd.concat([splits["dev"], splits["test"]], ignore_index=True)
    leaks = evaluation["article_a"].isin(train_articles) | evaluation["article_b"].isin(train_articles)
    return {
        "eval_pairs": len(evaluation),
        "eval_pairs_sharing_article_with_train": int(leaks.sum()),
        "eval_share_sharing_article_with_train": float(leaks.mean()) if len(evaluation) else 0.0,
        "articles_shared_with_train": int(np.intersect1d(_articles(evaluation), train_articles).size),
        "claims_shared_with_train": int(np.intersect1d(_claims(evaluation), _claims(splits["train"])).size),
    }


def audit_configs(configs: dict, build_stats: dict | None = None, eval_labels: str = "llm") -> AuditReport:
    """Check the v1.0 invariants on in-memory splits ``{config: {split: DataFrame}}``; ``eval_labels`` is the
    build parameter that says which label sources dev/test may hold (module docstring)."""
    admitted = eval_label_sources(eval_labels)
    report = AuditReport(build_stats=dict(build_stats or {}), eval_labels=eval_labels)
    v1 = configs.get("v1.0", {})
    missing = [split for split in SPLITS if split not in v1]
    report.checks.append(
        Check("v1.0 has splits train, dev, test", not missing, f"missing {missing}" if missing else "")
    )
    if missing:
        return report
    report.checks += [_schema_check(v1[split], f"v1.0 {split}", f"v1.0/{split}") for split in SPLITS]
    if not report.ok:
        # The checks below read the schema's columns and types: a missing column or a confidence that is
        # no number is reported by the schema check, not as a crash of a later one.
        return report
    for split in SPLITS:
        duplicated = v1[split]["pair_id"][v1[split]["pair_id"].duplicated()]
        report.checks.append(
            Check(
                f"v1.0 {split}: pair_ids unique",
                duplicated.empty,
                "" if duplicated.empty else f"{duplicated.iloc[0]!r} repeated",
            )
        )
    report.checks.append(
        _overlap_check("v1.0: no pair_id in two splits", v1, lambda f: f["pair_id"].to_numpy(str))
    )
    report.checks.append(_overlap_check("v1.0: no article in two splits", v1, _articles))
    report.checks.append(_overlap_check("v1.0: no claim in two splits", v1, _claims))
    for split in ("dev", "test"):
        report.checks.append(_eval_source_check(v1[split], split, eval_labels, admitted))
    for split in SPLITS:
        low = v1[split][pd.to_numeric(v1[split]["confidence"]) < MIN_CONFIDENCE]
        report.checks.append(
            Check(
                f"v1.0 {split}: confidence >= {MIN_CONFIDENCE}",
                low.empty,
                "" if low.empty else f"pair {low['pair_id'].iloc[0]!r} has {low['confidence'].iloc[0]}",
            )
        )
    report.label_sources = {split: v1[split]["label_source"].value_counts().to_dict() for split in SPLITS}
    legacy = configs.get("v1.0-pairlevel")
    if legacy and all(split in legacy for split in SPLITS):
        schema = [_schema_check(legacy[s], f"v1.0-pairlevel {s}", f"v1.0-pairlevel/{s}") for s in SPLITS]
        report.checks += [check for check in schema if not check.ok]
        if all(check.ok for check in schema):
            report.pairlevel_leakage = pairlevel_leakage(legacy)
    # Last: a split cut or padded after the build breaks a named invariant first, when it breaks one.
    report.checks += _row_count_checks(configs, report.build_stats)
    return report


# Where build.json's stats record each config's split sizes.
RECORDED_SIZES = {"v1.0": "split_sizes", "v1.0-pairlevel": "pairlevel_split_sizes"}


def _row_count_checks(configs: dict, build_stats: dict) -> list[Check]:
    """Each split has the rows build.json records for it (:data:`RECORDED_SIZES`): a split emptied or cut
    short after the build still follows every other invariant. A split without a recorded size is not
    checked (an in-memory split, or a build.json without stats)."""
    checks = []
    for config, key in RECORDED_SIZES.items():
        sizes = build_stats.get(key)
        for split, frame in configs.get(config, {}).items():
            recorded = sizes.get(split) if isinstance(sizes, dict) else None
            if recorded is None:
                continue
            source = frame.attrs.get("source", f"{config}/{split}")
            problem = row_count_problem(len(frame), recorded, source, "build.json")
            checks.append(
                Check(f"{config} {split}: the row count build.json records", not problem, problem or "")
            )
    return checks


def _schema_check(frame: pd.DataFrame, name: str, source: str) -> Check:
    """Whether every row of one split follows the pair schema and the label ontology (the first bad row
    named: the file read, or ``source`` for an in-memory split; row and field)."""
    name = f"{name}: every row follows the pair schema and label ontology"
    # First a column stored as another type (a binary id, a text confidence), which pandas would convert;
    # then each row in the pool's own words (a missing value, an unknown label); then a null that
    # normalise_pool fills without a word ("" for a missing abstract).
    for problem in ("column_names_problem", "column_kind_problem"):
        if frame.attrs.get(problem):
            return Check(name, False, frame.attrs[problem])
    try:
        normalise_pool(frame, source=frame.attrs.get("source", source))
    except PoolFormatError as error:
        return Check(name, False, str(error))
    if frame.attrs.get("column_null_problem"):
        return Check(name, False, frame.attrs["column_null_problem"])
    return Check(name, True)


def _eval_source_check(frame: pd.DataFrame, split: str, eval_labels: str, admitted: tuple[str, ...]) -> Check:
    name = (
        f"v1.0 {split}: only LLM labels"
        if admitted == ("llm",)
        else f"v1.0 {split}: label sources {' or '.join(admitted)} (eval_labels={eval_labels})"
    )
    other = frame[~frame["label_source"].isin(admitted)]
    detail = "" if other.empty else f"pair {other['pair_id'].iloc[0]!r} is {other['label_source'].iloc[0]!r}"
    return Check(name, other.empty, detail)


def empty_pair_frame() -> pd.DataFrame:
    """A pair table without rows, in the pair schema's columns and types."""
    return pair_features().arrow_schema.empty_table().to_pandas()


def read_hub_folder(directory: str | Path) -> dict:
    """``{config: {split: DataFrame}}`` from a folder's README ``configs:`` block and its parquet files.

    The splits that ``build.json`` names as empty (``empty_splits``: not written, since ``datasets`` cannot
    load a split without rows) come back as empty frames in the pair schema."""
    directory = Path(directory)
    readme = directory / "README.md"
    if not readme.is_file():
        raise FolderFormatError(f"{directory}: no README.md (not a Hub dataset folder)")
    if read_front_matter(readme) is None:
        raise FolderFormatError(f"{readme}: no YAML header with `configs:`")
    configs = {}
    # The shared card reader: a key given twice or a data file path leading out of the folder is named.
    for name, data_files in card_data_files(directory).items():
        splits = {}
        for split, paths in data_files.items():
            path = directory / paths[0]
            if len(paths) != 1:
                raise FolderFormatError(f"{readme}: config {name!r} split {split!r} names {len(paths)} files")
            if not path.is_file():
                raise FolderFormatError(
                    f"{readme}: config {name!r} split {split!r} points to {path}, which does not exist"
                )
            table = read_parquet(path)
            splits[split] = table.to_pandas()
            splits[split].attrs["source"] = str(path)  # the file a schema violation is reported in
            # The types load_dataset gives back, checked on the file's table: to_pandas and normalise_pool
            # would read a binary id as bytes, a null abstract as "" and a text confidence as a number.
            for check in (column_kind_problem, column_null_problem):
                splits[split].attrs[check.__name__] = check(table, COLUMN_KINDS, path)
            # A column the schema does not name (the AMNESIA audit's check): published unchecked otherwise.
            splits[split].attrs["column_names_problem"] = column_names_problem(
                table.column_names, list(COLUMN_KINDS), path
            )
        configs[name] = splits
    build = directory / "build.json"
    empty = read_json(build, expect=dict).get("empty_splits", {}) if build.is_file() else {}
    for name, split_names in empty.items():
        for split in split_names:
            configs.setdefault(name, {}).setdefault(split, empty_pair_frame())
    if "v1.0" not in configs:
        raise FolderFormatError(f"{readme}: `configs:` has no 'v1.0' entry (found {sorted(configs)})")
    return configs


def audit_folder(directory: str | Path) -> AuditReport:
    """Audit a folder written by ``medunlearn biodivergence build``."""
    directory = Path(directory)
    configs = read_hub_folder(directory)
    build_file = directory / "build.json"
    build = read_json(build_file, expect=dict) if build_file.is_file() else {}
    eval_labels = build.get("parameters", {}).get("eval_labels", "llm")
    return audit_configs(configs, build.get("stats", {}), eval_labels)
