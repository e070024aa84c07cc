"""The Hub-ready folder: determinism, load_dataset offline, atomic writes, the audit, the builder, the CLI."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from medunlearn.amnesia import build_amnesia_folder
from medunlearn.amnesia import hub as hub_module
from medunlearn.amnesia.audit import AuditFailure, audit_folder
from medunlearn.amnesia.hf_builder import AmnesiaBuilder
from medunlearn.amnesia.hub import FolderContents, write_folder
from medunlearn.amnesia.sources.synthetic import generate_cohort
from medunlearn.amnesia.splits import SplitConfig, build_splits
from medunlearn.cli import main as cli_main
from medunlearn.ontology.amnesia import DISEASE_LEVEL_DEFAULT, DISEASES


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return build_amnesia_folder(tmp_path_factory.mktemp("built") / "amnesia", patients=120, seed=3)


def test_building_twice_gives_byte_identical_files(folder, tmp_path):
    again = build_amnesia_folder(tmp_path / "again", patients=120, seed=3)
    assert digest(folder) == digest(again)
    other = build_amnesia_folder(tmp_path / "other", patients=120, seed=4)
    assert digest(folder) != digest(other)


def test_folder_configs_lists_the_readme_configs_as_built(folder):
    from medunlearn.config_names import folder_configs, forget_configs, retain_config_for

    configs = folder_configs(folder)
    assert configs == json.loads((folder / "amnesia_build.json").read_text())["configs"]
    assert {"forget_10", "retain_90", "disease_cancer_forget_10", "disease_cancer_retain_90"} <= set(configs)
    assert all(retain_config_for(forget) in configs for forget in forget_configs(configs))


def test_load_dataset_reads_every_config_offline(folder):
    manifest = json.loads((folder / "amnesia_build.json").read_text())
    for config in manifest["configs"]:
        loaded = datasets.load_dataset(str(folder), config)
        expected_splits = {"train"} if config in ("notes", "holdout_notes") else {"train", "holdout"}
        assert set(loaded) == expected_splits
        for split in expected_splits:
            assert loaded[split].num_rows == manifest["sizes"][config][split]["rows"]
    notes = datasets.load_dataset(str(folder), "notes")["train"]
    assert notes.column_names == ["patient_id", "title", "note", "disease", "disease_keywords"]
    qa = datasets.load_dataset(str(folder), "forget_10")["holdout"]
    assert qa.column_names == ["qa_id", "patient_id", "disease", "qa_type", "question", "answer"]


def test_load_dataset_by_folder_name_from_its_parent(folder, monkeypatch):
    monkeypatch.chdir(folder.parent)
    loaded = datasets.load_dataset("amnesia", "disease_cancer_forget_15")
    # 15% of 120 patients = 18 patients, all cancer, 6 seen + 2 holdout QA each.
    assert loaded["train"].num_rows == 18 * 6 and loaded["holdout"].num_rows == 18 * 2
    assert set(loaded["train"]["disease"]) == {"cancer"}


def test_card_states_license_sizes_parameters_and_omissions(folder):
    card = (folder / "README.md").read_text()
    assert "license: cc-by-4.0" in card
    assert '"seed": 3' in card and '"patients": 120' in card
    assert "| forget_10 | 12 | 72 | 24 |" in card
    manifest = json.loads((folder / "amnesia_build.json").read_text())
    for name in manifest["omitted"]:
        assert f"`{name}`" in card
    assert "arXiv:2605.30599" in card


def test_audit_passes_on_a_built_folder(folder):
    names = [name for name, _ in audit_folder(folder).checks]
    assert names == [
        "configs and fields",
        "records",
        "QA per patient",
        "holdout",
        "forget/retain",
        "random level",
        "disease level",
        "held-out notes",
        "row counts",
    ]


def _rewrite(path: Path, transform) -> None:
    table = pq.read_table(path)
    pq.write_table(transform(table), path)


def _move_one_row(source: Path, target: Path) -> None:
    row = pq.read_table(source).slice(0, 1)
    _rewrite(target, lambda t: pa.concat_tables([t, row.cast(t.schema)]))


@pytest.mark.parametrize(
    "tamper, message",
    [
        # A retained patient's QA copied into the forget set: forget and retain overlap.
        (
            lambda f: _move_one_row(
                f / hub_module.data_path("retain_90", "train"), f / hub_module.data_path("forget_10", "train")
            ),
            "in both",
        ),
        # A holdout QA in a train split.
        (
            lambda f: _move_one_row(
                f / hub_module.data_path("full", "holdout"), f / hub_module.data_path("forget_5", "train")
            ),
            "holdout",
        ),
        # forget_15 loses its first patient's QA: sizes and nesting break.
        (
            lambda f: [
                _rewrite(
                    f / hub_module.data_path("forget_15", s),
                    lambda t: t.filter(pa.compute.not_equal(t["patient_id"], t["patient_id"][0])),
                )
                for s in ("train", "holdout")
            ],
            "forget_15",
        ),
        # A disease-level set gets a patient of another disease.
        (
            lambda f: [
                _rewrite(
                    f / hub_module.data_path("disease_cancer_forget_5", "train"),
                    lambda t: t.set_column(2, "disease", pa.array(["digestive"] * t.num_rows)),
                )
            ],
            "disease",
        ),
        # A config whose name is off the grammar (config_names): named, not a KeyError later.
        (
            lambda f: (f / "README.md").write_text(
                (f / "README.md").read_text().replace("config_name: forget_5\n", "config_name: forget_05\n")
            ),
            "`forget_05`: not an AMNESIA config name",
        ),
    ],
)
def test_audit_names_the_violation(folder, tmp_path, tamper, message):
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    tamper(broken)
    with pytest.raises(AuditFailure, match=message):
        audit_folder(broken)


def test_a_failed_build_leaves_nothing_and_keeps_the_old_folder(folder, tmp_path, monkeypatch):
    target = tmp_path / "target"
    shutil.copytree(folder, target)
    before = digest(target)
    calls = {"n": 0}
    original = hub_module._write_parquet

    def failing_write(table, path):
        calls["n"] += 1
        if calls["n"] == 5:
            raise OSError("disk full")
        original(table, path)

    monkeypatch.setattr(hub_module, "_write_parquet", failing_write)
    with pytest.raises(OSError, match="disk full"):
        build_amnesia_folder(target, patients=50, seed=1, overwrite=True)
    assert digest(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]  # no partial folder left behind


def test_an_existing_folder_is_not_replaced_without_overwrite(folder):
    with pytest.raises(FileExistsError, match="--overwrite"):
        build_amnesia_folder(folder, patients=10)


def test_builder_class_gives_the_same_rows_as_the_folder(folder, tmp_path):
    builder = AmnesiaBuilder(
        config_name="disease_cancer_retain_90", patients=120, seed=3, cache_dir=str(tmp_path)
    )
    builder.download_and_prepare()
    built = builder.as_dataset("train")
    from_folder = datasets.load_dataset(str(folder), "disease_cancer_retain_90")["train"]
    assert built["qa_id"] == from_folder["qa_id"]
    assert built["answer"] == from_folder["answer"]


def test_builder_names_an_omitted_config(tmp_path):
    builder = AmnesiaBuilder(
        config_name="disease_cardiovascular_forget_25", patients=40, seed=0, cache_dir=str(tmp_path)
    )
    with pytest.raises(ValueError, match="cardiovascular has"):
        builder.download_and_prepare()


def test_cli_build_audit_publish_dry_run(tmp_path, capsys):
    out = tmp_path / "cli-built"
    assert cli_main(["amnesia", "build", "--out", str(out), "--patients", "60", "--seed", "1"]) == 0
    assert "forget_10" in capsys.readouterr().out
    assert cli_main(["amnesia", "audit", str(out)]) == 0
    assert "all 9 invariant groups hold" in capsys.readouterr().out
    assert cli_main(["amnesia", "publish", str(out), "--repo", "org/name", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "would upload README.md" in printed and "data/full/train-00000-of-00001.parquet" in printed
    # Building onto an existing folder without --overwrite is a clear error, not a traceback.
    assert cli_main(["amnesia", "build", "--out", str(out), "--patients", "10"]) == 2
    assert "already exists" in capsys.readouterr().err
    # A data file the README lists is missing: the folder cannot be read, a usage error (2), not a verdict.
    os.remove(out / "data/forget_10/train-00000-of-00001.parquet")
    assert cli_main(["amnesia", "audit", str(out)]) == 2
    assert "forget_10/train-00000-of-00001.parquet: listed in README.md" in capsys.readouterr().err


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    patients=st.integers(1, 60),
    seed=st.integers(0, 10_000),
    weights=st.lists(st.floats(0.0, 1.0), min_size=len(DISEASES), max_size=len(DISEASES)).filter(
        lambda w: sum(w) > 0
    ),
)
def test_any_cohort_mix_writes_a_folder_that_passes_the_audit(tmp_path_factory, patients, seed, weights):
    """Random sizes and disease mixes (diseases that cannot fill a percentage included) through the real
    writer."""
    notes, qa = generate_cohort(patients=patients, seed=seed, disease_shares=dict(zip(DISEASES, weights)))
    splits = build_splits(notes, qa, SplitConfig(seed=seed))
    parameters = {
        "source": "synthetic",
        "patients": patients,
        "seed": seed,
        "qa_per_type": 4,
        "holdout_per_type": 1,
        "forget_percentages": [5, 10, 15, 20, 25],
        "disease_level": list(DISEASE_LEVEL_DEFAULT),
    }
    contents = FolderContents(
        notes=notes, qa=qa, splits=splits, source="synthetic", build_parameters=parameters
    )
    folder = write_folder(contents, tmp_path_factory.mktemp("mix") / "amnesia", progress=False)
    audit_folder(folder)
    manifest = json.loads((folder / "amnesia_build.json").read_text())
    assert set(manifest["omitted"]) | {c for c in manifest["configs"] if "forget_" in c} == {
        f"{prefix}forget_{p}"
        for prefix in ["", *(f"disease_{d}_" for d in DISEASE_LEVEL_DEFAULT)]
        for p in (5, 10, 15, 20, 25)
    }
