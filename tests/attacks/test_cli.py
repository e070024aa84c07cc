"""``medunlearn attack``: bad input is named and writes nothing; a small run writes the attack folder."""

from __future__ import annotations

import json

import pytest

from medunlearn.cli import main, subcommand_parser


@pytest.fixture(scope="module")
def amnesia_folder(tmp_path_factory):
    from medunlearn.amnesia import build_amnesia_folder

    return build_amnesia_folder(tmp_path_factory.mktemp("amnesia") / "amnesia", patients=20, seed=0)


@pytest.fixture()
def saved_model(tiny_model, tiny_tokenizer, tmp_path):
    folder = tmp_path / "tiny"
    tiny_model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def _attack(*argv) -> int:
    return main(["attack", *(str(a) for a in argv)])


def _common(model, data, out, *extra):
    return ["--model", model, "--data", data, "--out", out, *extra]


def test_no_before_model_is_a_clear_error_and_writes_nothing(amnesia_folder, saved_model, tmp_path, capsys):
    out = tmp_path / "attacks"
    assert _attack(*_common(saved_model, amnesia_folder, out, "--forget-config", "forget_10")) == 2
    error = capsys.readouterr().err
    assert "medunlearn attack: error: --before is required" in error
    assert not out.exists()


def test_missing_before_model_is_named_and_writes_nothing(amnesia_folder, saved_model, tmp_path, capsys):
    out, missing = tmp_path / "attacks", tmp_path / "no-such-model"
    argv = _common(saved_model, amnesia_folder, out, "--forget-config", "forget_10", "--before", missing)
    assert _attack(*argv) == 2
    assert f"--before {missing}" in capsys.readouterr().err
    assert not out.exists()


def test_missing_forget_config_is_named_and_writes_nothing(amnesia_folder, saved_model, tmp_path, capsys):
    out = tmp_path / "attacks"
    argv = _common(saved_model, amnesia_folder, out, "--forget-config", "forget_35", "--before", saved_model)
    assert _attack(*argv) == 2
    error = capsys.readouterr().err
    assert "medunlearn attack: error:" in error and "forget_35" in error
    assert not out.exists()


def test_unknown_attack_and_existing_out_are_named(amnesia_folder, saved_model, tmp_path, capsys):
    common = ["--forget-config", "forget_10", "--before", saved_model]
    assert (
        _attack(*_common(saved_model, amnesia_folder, tmp_path / "a", *common, "--attacks", "jailbreak")) == 2
    )
    assert "unknown attack(s) jailbreak" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    assert _attack(*_common(saved_model, amnesia_folder, tmp_path / "taken", *common)) == 2
    assert "already exists (pass --overwrite" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not any((tmp_path / "taken").iterdir())


def test_help_names_every_attack_and_has_an_example():
    text = subcommand_parser("attack").format_help()
    for attack in ("relearn", "quantize", "paraphrase", "holdout", "probe", "membership"):
        assert attack in text
    assert "medunlearn attack --model" in text and "recovered share" in text


def test_attack_writes_the_folder_and_prints_the_table(
    amnesia_folder, saved_model, tmp_path, capsys, one_torch_thread
):
    out = tmp_path / "attacks"
    argv = _common(saved_model, amnesia_folder, out, "--forget-config", "forget_10", "--before", saved_model)
    argv += ["--attacks", "relearn,quantize,holdout,membership", "--relearn-steps", "1,2"]
    argv += ["--quantize", "nf4", "--max-new-tokens", "3", "--max-retain-patients", "2", "--no-progress"]
    argv += ["--retain-model", saved_model]  # the reference membership attack
    assert _attack(*argv) == 0
    printed = capsys.readouterr().out
    assert "medunlearn attack: forget_10" in printed and "worst-case recovery" in printed
    payload = json.loads((out / "attacks.json").read_text())
    assert {(r["attack"], r["variant"]) for r in payload["rows"]} >= {
        ("relearn", "k=1"),
        ("relearn", "k=2"),
        ("quantize", "nf4"),
        ("holdout", "unseen questions"),
    }
    # The before model is the unlearned model itself: nothing was forgotten, so no share is defined.
    assert all(r["recovered_share"] is None for r in payload["rows"])
    membership = payload["methods"][0]["sections"]["membership"]
    assert 0.0 <= membership["unlearned"]["reference_auc"] <= 1.0
    assert set(membership["before"]["auc"]) == {"loss", "zlib", "min_k", "min_k_plus_plus"}
    assert (out / "attacks.md").read_text().startswith("# Attacks on forget_10")
    assert (out / "tiny" / "model_card.md").is_file()
    assert (out / "tiny" / "evaluations" / "relearn-k2" / "summary.json").is_file()


def test_same_disease_retain_relearning_data_is_the_retained_patients_of_the_forget_diseases(amnesia_folder):
    from medunlearn.attacks.relearning import RelearnConfig, relearning_sets
    from medunlearn.evaluation.populations import load_populations

    examples = load_populations(amnesia_folder, "forget_10")
    forget = examples[examples["population"].str.startswith("forget_")]
    rows, scored = relearning_sets(
        examples, RelearnConfig(data="same-disease-retain"), amnesia_folder, "forget_10"
    )
    assert set(rows["disease"]) <= set(forget["disease"])
    assert not set(rows["patient_id"]) & set(forget["patient_id"])  # retained patients only
    assert len(scored) == len(forget)  # every forget QA is scored


def test_attack_data_that_cannot_be_used_fails_before_anything_is_written(
    amnesia_folder, saved_model, tmp_path, monkeypatch
):
    """A forget set too small to relearn a share of is caught by the validation, not after the folder and
    the first evaluations are written."""
    from medunlearn.attacks import run as attack_run
    from medunlearn.attacks.relearning import AttackInputError
    from medunlearn.evaluation.populations import load_populations

    def one_forget_seen_row(*args, **kwargs):
        examples = load_populations(*args, **kwargs)
        seen = examples.index[examples["population"] == "forget_seen"]
        return examples.drop(seen[1:]).reset_index(drop=True)

    monkeypatch.setattr(attack_run, "load_populations", one_forget_seen_row)
    out = tmp_path / "attacks"
    args = attack_run.AttackArguments(
        [str(saved_model)], str(saved_model), str(amnesia_folder), "forget_10", str(out), attacks=("relearn",)
    )
    with pytest.raises(AttackInputError, match="at least 2 forget patients"):
        attack_run.run_attacks(args)
    assert not out.exists()


def test_write_card_puts_one_robustness_section_in_the_model_card(
    amnesia_folder, saved_model, tmp_path, capsys, one_torch_thread
):
    """--write-card adds the section to the model's README.md, keeps the rest of the card and, run again,
    replaces it instead of appending a second one; without it the card is left alone."""
    card = saved_model / "README.md"
    card.write_text("---\nlibrary_name: transformers\n---\n\n# Unlearned model\n\nkeep me\n")
    common = ["--forget-config", "forget_10", "--before", saved_model, "--attacks", "holdout"]
    common += ["--max-new-tokens", "2", "--max-retain-patients", "2", "--no-progress"]
    assert _attack(*_common(saved_model, amnesia_folder, tmp_path / "a", *common)) == 0
    assert "Robustness" not in card.read_text()  # not asked: the input is never changed
    for run in ("b", "c"):
        assert _attack(*_common(saved_model, amnesia_folder, tmp_path / run, *common, "--write-card")) == 0
    text = card.read_text()
    assert text.startswith("---\nlibrary_name: transformers\n---") and "keep me" in text
    assert text.count("## Robustness of forgetting") == 1
    assert text.count("<!-- medunlearn:robustness -->") == 1
    assert (tmp_path / "c" / "tiny" / "model_card.md").read_text().strip() in text
    assert f"robustness section into {card}" in capsys.readouterr().out
    assert not list(saved_model.glob(".README.md.*"))  # the atomic write's temporary file is gone


def test_batch_size_auto_and_max_batch_size_reach_the_runner_config():
    from medunlearn.cli.attack import arguments_from, runner_config

    parser = subcommand_parser("attack")
    base = ["--model", "m", "--before", "b", "--data", "d", "--forget-config", "forget_10", "--out", "o"]
    args = parser.parse_args(
        [*base, "--batch-size", "auto", "--max-batch-size", "8", "--max-new-tokens", "5"]
    )
    config = runner_config(args)
    assert (config.batch_size, config.max_batch_size, config.max_new_tokens) == ("auto", 8, 5)
    assert arguments_from(args).runner == config
    config = runner_config(parser.parse_args(base))
    assert (config.batch_size, config.max_batch_size) == (16, 256)


@pytest.mark.parametrize("bad", ["0", "-1", "big"])
def test_a_bad_batch_size_exits_2_naming_the_option(bad, tmp_path, capsys):
    out = tmp_path / "attacks"
    with pytest.raises(SystemExit) as exited:
        _attack(*_common("m", tmp_path, out, "--forget-config", "forget_10", "--batch-size", bad))
    assert exited.value.code == 2
    assert "--batch-size" in capsys.readouterr().err
    assert not out.exists()


def test_max_new_tokens_below_one_is_still_named(tmp_path, capsys):
    argv = _common("m", tmp_path, tmp_path / "attacks", "--forget-config", "forget_10", "--before", "b")
    assert _attack(*argv, "--max-new-tokens", "0") == 2
    assert "--max-new-tokens must be at least 1" in capsys.readouterr().err
