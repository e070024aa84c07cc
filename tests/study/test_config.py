"""Study files: named errors (file, key) for every bad key, before anything runs."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

from medunlearn.errors import MedunlearnError
from medunlearn.study.config import StudyConfigError, load_study, parse_study
from medunlearn.study.grid import build_grid, forget_parts, validate_study

REPO = Path(__file__).resolve().parents[2]
MINI = yaml.safe_load((REPO / "recipes" / "studies" / "mini.yaml").read_text())


def with_change(path: list, value):
    raw = yaml.safe_load(yaml.safe_dump(MINI))
    target = raw
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "key"),
    [
        (["methodz"], {}, "methodz"),
        (["model"], KeyError, "model"),
        (["model", "lora_rank"], 8, "model.lora_rank"),
        (["data", "path"], "x", "data"),
        (["data", "build", "patient"], 3, "data.build.patient"),
        (["finetune", "qa_epochs"], "many", "finetune.qa_epochs"),
        (["methods", "grad_diff", "seed"], 1, "methods.grad_diff.seed"),
        (["forget"], ["forget_10", "retain_90"], "forget[1]"),
        (["forget"], ["forget10"], "forget[0]"),  # a TOFU name
        (["forget"], ["forget_05"], "forget[0]"),  # off the grammar: no AMNESIA folder has it
        (["seeds"], [0, "one"], "seeds"),
        (["evaluation", "runner", "max_tokens"], 3, "evaluation.runner.max_tokens"),
        (["evaluation", "populations", "cap"], 3, "evaluation.populations.cap"),
        (["methods", "grad_diff", "learning_rate"], "fast", "methods.grad_diff.learning_rate"),
    ],
)
def test_a_bad_key_is_named_with_the_file(path, value, key):
    with pytest.raises(StudyConfigError, match=re.escape(f"my.yaml: key '{key}'")) as info:
        parse_study(with_change(path, value), "my.yaml")
    assert isinstance(info.value, MedunlearnError) and isinstance(info.value, ValueError)


# (where in the study file, a number that cannot be, the key the error names): every number of every section
STUDY_NUMBERS = [
    (["data", "build", "patients"], -5, "data.build.patients"),
    (["data", "build", "patients"], 0, "data.build.patients"),
    (["data", "build", "patients"], "many", "data.build.patients"),
    (["data", "build", "seed"], -1, "data.build.seed"),
    (["data", "build", "qa_per_type"], 2.5, "data.build.qa_per_type"),
    (["data", "build", "forget_percentages"], [5, 150], "data.build.forget_percentages[1]"),
    (["model", "tiny_vocab_size"], -600, "model.tiny_vocab_size"),
    (["model", "lora_r"], 0, "model.lora_r"),
    (["finetune", "qa_epochs"], math.nan, "finetune.qa_epochs"),
    (["finetune", "notes_epochs"], math.inf, "finetune.notes_epochs"),
    (["finetune", "notes_epochs"], -1, "finetune.notes_epochs"),
    (["finetune", "sft", "learning_rate"], -5e-3, "finetune.sft.learning_rate"),
    (["finetune", "sft", "per_device_train_batch_size"], 0, "finetune.sft.per_device_train_batch_size"),
    (["methods", "grad_diff", "learning_rate"], math.nan, "methods.grad_diff.learning_rate"),
    (["methods", "grad_diff", "max_steps"], -4, "methods.grad_diff.max_steps"),
    (["methods", "simnpo", "beta"], 0, "methods.simnpo.beta"),
    (["seeds"], [0, -1], "seeds[1]"),
    (["evaluation", "runner", "max_new_tokens"], 0, "evaluation.runner.max_new_tokens"),
    (["evaluation", "runner", "batch_size"], -16, "evaluation.runner.batch_size"),
    (["evaluation", "populations", "max_retain_patients"], -10, "evaluation.populations.max_retain_patients"),
    (["attacks"], {"relearn_learning_rate": math.inf}, "attacks.relearn_learning_rate"),
    (["attacks"], {"relearn_batch_size": 0}, "attacks.relearn_batch_size"),
    (["attacks"], {"relearn_steps": [5, 0]}, "attacks.relearn_steps[1]"),
    (["attacks"], {"relearn_share": 1.0}, "attacks.relearn_share"),
    (["attacks"], {"max_retain_patients": -1}, "attacks.max_retain_patients"),
]


@pytest.mark.parametrize(("path", "value", "key"), STUDY_NUMBERS)
def test_a_number_that_cannot_be_is_named_with_the_file_and_key(path, value, key):
    with pytest.raises(StudyConfigError, match=re.escape(f"my.yaml: key '{key}': ")):
        parse_study(with_change(path, value), "my.yaml")


def test_numbers_given_as_text_are_read_and_numbers_are_kept_as_written():
    study = parse_study(with_change(["data", "build", "patients"], "40"), "my.yaml")
    assert study.data.build["patients"] == 40
    # kept as written (100, not 100.0): the fingerprints of studies already run do not change
    assert parse_study(MINI, "my.yaml").finetune.sft["logging_steps"] == 100
    auto = parse_study(with_change(["evaluation", "runner", "batch_size"], "auto"), "my.yaml")
    assert auto.evaluation.runner["batch_size"] == "auto"


def test_study_validate_exits_2_on_a_bad_number(tmp_path, capsys):
    from medunlearn.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(with_change(["finetune", "qa_epochs"], math.nan)))
    assert main(["study", str(path), "--validate"]) == 2
    assert "s.yaml: key 'finetune.qa_epochs': expected a finite number, got nan" in capsys.readouterr().err


def test_study_validate_names_a_folder_that_is_no_model(tmp_path, capsys):
    """Before: ``model_name_or_path: /etc`` validated, and failed in the fine-tuning stage."""
    from medunlearn.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(with_change(["model", "model_name_or_path"], "/etc")))
    assert main(["study", str(path), "--validate"]) == 2
    err = capsys.readouterr().err
    assert (
        "s.yaml: key 'model.model_name_or_path': /etc: not a model folder (it has neither a config.json"
        in err
    )


@pytest.mark.parametrize("name", ["./no/such/model", "/no/such/model", "runs/no/model"])
def test_study_validate_names_a_model_path_that_does_not_exist(tmp_path, capsys, name):
    """Before: a path that is no Hub id (ORG/NAME) and does not exist validated, as if it were one."""
    from medunlearn.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(with_change(["model", "model_name_or_path"], name)))
    assert main(["study", str(path), "--validate"]) == 2
    assert f"s.yaml: key 'model.model_name_or_path': {name}: no such model folder" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m", "tiny-llama"])
def test_a_hub_id_or_a_shipped_alias_still_validates(tmp_path, name):
    parse_study(with_change(["model", "model_name_or_path"], name), str(tmp_path / "s.yaml"))


@pytest.mark.parametrize(
    ("path", "value", "key"),
    [
        (["methods", "grad_diff", "learning_rat"], 1e-3, "methods.grad_diff.learning_rat"),
        (["methods", "nope"], {}, "methods.nope.method"),
        (["forget"], ["disease_gout_forget_10"], "forget[0]"),
        (["forget"], ["forget_30"], "forget[0]"),
        (["finetune", "sft", "learning_rat"], 1e-3, "finetune.sft.learning_rat"),
    ],
)
def test_validation_names_the_key(path, value, key):
    study = parse_study(with_change(path, value), "my.yaml")
    with pytest.raises(MedunlearnError, match=re.escape(f"my.yaml: key '{key}'")):
        validate_study(study)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(MedunlearnError, match="does not exist"):
        load_study(tmp_path / "absent.yaml")
    (tmp_path / "bad.yaml").write_text("methods: [\n")
    with pytest.raises(MedunlearnError, match=r"bad.yaml, line 2: invalid YAML at column 1"):
        load_study(tmp_path / "bad.yaml")


def test_a_changed_field_changes_only_its_method_fingerprints():
    grid = build_grid(parse_study(MINI, "a.yaml"), "data")
    changed = with_change(["methods", "simnpo", "learning_rate"], 1e-2)
    other = build_grid(parse_study(changed, "b.yaml"), "data")
    assert len(grid.cells) == 18 and len({c.fingerprint for c in grid.cells}) == 18
    others = {c.name: c.fingerprint for c in other.cells}
    for cell in grid.cells:
        assert (cell.fingerprint == others[cell.name]) == (cell.label != "simnpo"), cell.name
    assert [b.fingerprint for b in grid.baselines] == [b.fingerprint for b in other.baselines]
    shown = with_change(["methods", "simnpo", "logging_steps"], 7)  # display only: same results
    shown_grid = build_grid(parse_study(shown, "c.yaml"), "data")
    assert {c.name: c.fingerprint for c in shown_grid.cells} == {c.name: c.fingerprint for c in grid.cells}


def test_an_attacks_mapping_adds_attack_fingerprints_and_changes_no_other():
    """Absent: no attack stage and the fingerprints of earlier studies; present: each cell gets an attack
    fingerprint, and changing an attack setting changes only those."""
    plain = build_grid(parse_study(MINI, "a.yaml"), "data")
    assert all(c.attack_fingerprint is None for c in plain.cells)
    assert all("attack_fingerprint" not in c for c in plain.to_json()["cells"])
    attacked = build_grid(
        parse_study(with_change(["attacks"], {"attacks": ["relearn", "holdout"], "relearn_steps": [5]}), "b"),
        "data",
    )
    fingerprints = {c.name: c.fingerprint for c in plain.cells}  # with_change sorts the methods
    assert {c.name: c.fingerprint for c in attacked.cells} == fingerprints
    assert [b.fingerprint for b in attacked.baselines] == [b.fingerprint for b in plain.baselines]
    assert len({c.attack_fingerprint for c in attacked.cells}) == len(attacked.cells)
    steps = build_grid(
        parse_study(
            with_change(["attacks"], {"attacks": ["relearn", "holdout"], "relearn_steps": [10]}), "c"
        ),
        "data",
    )
    assert {c.name: c.fingerprint for c in steps.cells} == fingerprints
    assert not {c.attack_fingerprint for c in steps.cells} & {c.attack_fingerprint for c in attacked.cells}
    unused = build_grid(  # relearning settings without the relearn attack change nothing
        parse_study(with_change(["attacks"], {"attacks": ["holdout"], "relearn_steps": [10]}), "d"), "data"
    )
    holdout = build_grid(parse_study(with_change(["attacks"], {"attacks": ["holdout"]}), "e"), "data")
    assert [c.attack_fingerprint for c in unused.cells] == [c.attack_fingerprint for c in holdout.cells]


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ({"attack": ["relearn"]}, "attacks.attack"),
        ({"attacks": "jailbreak"}, "attacks.attacks"),
        ({"relearn_steps": ["many"]}, "attacks.relearn_steps"),
        ({"quantizations": ["3bit"]}, "attacks.quantizations"),
        ({"relearn_share": 2.0}, "attacks.relearn_share"),
        ({"seed": "one"}, "attacks.seed"),
        (["relearn"], "attacks"),
    ],
)
def test_a_bad_attacks_key_is_named(value, key):
    with pytest.raises(StudyConfigError, match=re.escape(f"my.yaml: key '{key}'")):
        build_grid(parse_study(with_change(["attacks"], value), "my.yaml"), "data")


def test_forget_parts():
    assert forget_parts("disease_cancer_forget_10") == {
        "split": "disease",
        "disease": "cancer",
        "forget_size": 10,
    }
    assert forget_parts("forget_5") == {"split": "random", "disease": None, "forget_size": 5}


def test_executor_errors(tmp_path, monkeypatch):
    from medunlearn.study import run_study

    monkeypatch.setenv("PATH", str(tmp_path))  # no srun
    with pytest.raises(MedunlearnError, match="needs a Slurm cluster"):
        run_study(REPO / "recipes" / "studies" / "tiny.yaml", tmp_path / "s", executor="slurm")
    with pytest.raises(MedunlearnError, match="unknown executor"):
        run_study(REPO / "recipes" / "studies" / "tiny.yaml", tmp_path / "s", executor="ray")
    assert not (tmp_path / "s").exists()


def test_the_data_folder_must_offer_each_forget_config_in_its_configs_block(tmp_path):
    offered = ["notes", "full", "forget_5", "retain_95", "forget_10", "retain_90"]
    header = "".join(f"- config_name: {name}\n  data_files: {name}.parquet\n" for name in offered)
    # The body quotes forget_15's entry: only the YAML header says what the folder offers.
    (tmp_path / "README.md").write_text(f"---\nconfigs:\n{header}---\n\n- config_name: forget_15\n")
    study = parse_study(with_change(["forget"], ["forget_5", "forget_15"]), "my.yaml")
    with pytest.raises(MedunlearnError, match=re.escape("my.yaml: key 'forget[1]'")):
        validate_study(study, tmp_path)
    validate_study(parse_study(with_change(["forget"], ["forget_10"]), "my.yaml"), tmp_path)
