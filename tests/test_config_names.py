"""The config-name grammar (src/medunlearn/config_names.py): one home for parsing, building and listing."""

from __future__ import annotations

import pytest

from medunlearn.config_names import (
    ConfigNameError,
    SplitName,
    amnesia_config_pairs,
    folder_configs,
    forget_config,
    forget_config_of,
    forget_configs,
    is_forget_config,
    is_tofu_hub_split,
    retain_config_for,
)
from medunlearn.errors import InputError

ROUND_TRIPS = [
    ("forget_10", SplitName("forget", 10)),
    ("retain_90", SplitName("retain", 90)),
    ("forget_5", SplitName("forget", 5)),
    ("disease_cancer_forget_15", SplitName("forget", 15, "cancer")),
    ("disease_infection_immune_retain_80", SplitName("retain", 80, "infection_immune")),
    ("forget01", SplitName("forget", 1, benchmark="tofu")),
    ("forget10", SplitName("forget", 10, benchmark="tofu")),
    ("retain90", SplitName("retain", 90, benchmark="tofu")),
    ("holdout05", SplitName("holdout", 5, benchmark="tofu")),
]


@pytest.mark.parametrize("name, parsed", ROUND_TRIPS)
def test_parse_and_build_round_trip(name, parsed):
    assert SplitName.parse(name) == parsed
    assert str(parsed) == name == parsed.name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "notes",
        "full",
        "forget",
        "forget_",
        "forget_x",
        "forget_05",  # AMNESIA percentages have no leading zero: it would not round-trip
        "forget5",  # TOFU takes two digits
        "forget_150",
        "holdout_5",  # AMNESIA's holdout is a split of every config, not a config
        "disease__forget_5",
        "disease_Cancer_forget_5",
        "disease_cancer_holdout_5",
        "forget_10_perturbed",
        " forget_10",
    ],
)
def test_invalid_names_are_refused_with_a_named_error(name):
    with pytest.raises(ConfigNameError, match="forget_X|percentage|holdout") as caught:
        SplitName.parse(name)
    assert isinstance(caught.value, InputError)  # the CLI turns it into exit 2
    assert not is_forget_config(name)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"role": "forgot", "percent": 10}, "role"),
        ({"role": "forget", "percent": -1}, "0..100"),
        ({"role": "forget", "percent": True}, "0..100"),
        ({"role": "forget", "percent": 10, "disease": "Cancer"}, "disease"),
        ({"role": "forget", "percent": 10, "disease": "cancer", "benchmark": "tofu"}, "disease"),
        ({"role": "holdout", "percent": 10}, "holdout"),
        ({"role": "forget", "percent": 10, "benchmark": "muse"}, "benchmark"),
    ],
)
def test_a_split_name_is_validated_when_built(fields, message):
    with pytest.raises(ConfigNameError, match=message):
        SplitName(**fields)


def test_complements_and_holdouts():
    assert str(SplitName.parse("forget_25").complement()) == "retain_75"
    assert str(SplitName.parse("retain_75").complement()) == "forget_25"
    assert str(SplitName.parse("disease_cancer_retain_95").complement()) == "disease_cancer_forget_5"
    assert str(SplitName.parse("forget05").complement()) == "retain95"
    assert str(SplitName.parse("forget05").holdout()) == "holdout05"
    with pytest.raises(ConfigNameError, match="holdout"):
        SplitName.parse("forget_5").holdout()
    with pytest.raises(ConfigNameError, match="complement"):
        SplitName.parse("holdout05").complement()


def test_builders_and_questions():
    assert [is_forget_config(n, "amnesia") for n in ("forget_10", "disease_a_forget_5", "forget10")] == [
        True,
        True,
        False,
    ]
    assert is_forget_config("forget10", "tofu") and not is_forget_config("retain90", "tofu")
    assert forget_config(10) == "forget_10"
    assert forget_config(5, "cardiovascular") == "disease_cardiovascular_forget_5"
    assert forget_config(5, benchmark="tofu") == "forget05"
    assert retain_config_for("disease_cancer_forget_5") == "disease_cancer_retain_95"
    assert retain_config_for("forget10") == "retain90"
    with pytest.raises(ConfigNameError, match="forget_X"):
        retain_config_for("retain_90")
    assert [forget_config_of(n) for n in ("retain_90", "forget_10", "disease_a_retain_85", "full")] == [
        "forget_10",
        "forget_10",
        "disease_a_forget_15",
        None,
    ]
    assert forget_config_of("holdout05") is None
    assert amnesia_config_pairs([5, 10], ["cancer"]) == [
        "forget_5",
        "retain_95",
        "forget_10",
        "retain_90",
        "disease_cancer_forget_5",
        "disease_cancer_retain_95",
        "disease_cancer_forget_10",
        "disease_cancer_retain_90",
    ]
    assert [is_tofu_hub_split(n) for n in ("forget20", "full_minus_forget05", "holdout10_perturbed")] == [
        True,
        True,
        True,
    ]
    assert not is_tofu_hub_split("forget_20")


README = """---
configs:
- config_name: notes
  data_files:
  - split: train
    path: data/notes/train.parquet
- config_name: full
  data_files:
  - split: train
    path: data/full/train.parquet
- config_name: forget_10
  data_files:
  - split: train
    path: data/forget_10/train.parquet
- config_name: retain_90
  data_files: data/retain_90/*.parquet
- config_name: disease_cancer_forget_10
  data_files: x.parquet
---

# A card

Its body may quote a block (not a config of this folder: only the YAML header counts):

- config_name: forget_25
"""


def test_folder_configs_reads_the_readme_configs_block(tmp_path):
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    configs = folder_configs(tmp_path)
    assert configs == ["notes", "full", "forget_10", "retain_90", "disease_cancer_forget_10"]
    assert forget_configs(configs) == ["forget_10", "disease_cancer_forget_10"]


def test_folder_configs_without_a_block_or_readme(tmp_path):
    assert folder_configs(tmp_path) == []
    (tmp_path / "README.md").write_text("# no header\n\n- config_name: forget_10\n", encoding="utf-8")
    assert folder_configs(tmp_path) == []
    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\n", encoding="utf-8")
    assert folder_configs(tmp_path) == []


def test_a_broken_readme_header_is_named(tmp_path):
    (tmp_path / "README.md").write_text("---\nconfigs: [\n---\n", encoding="utf-8")
    with pytest.raises(InputError, match="README.md: the YAML header"):
        folder_configs(tmp_path)


def test_folder_configs_of_a_built_tofu_folder(tmp_path):
    from medunlearn.tofu.synthetic import build_tofu_folder

    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=1)
    configs = folder_configs(folder)
    assert {"full", "forget01", "retain99", "holdout10", "forget10_perturbed"} <= set(configs)
    assert forget_configs(configs) == ["forget01", "forget05", "forget10"]


def test_doctests():
    import doctest

    import medunlearn.config_names

    assert doctest.testmod(medunlearn.config_names).failed == 0
