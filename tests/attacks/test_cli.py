"""``medunlearn attack``: bad input is named and writes nothing; a small run writes the attack folder."""

from __future__ import annotations

import json

import pytest

from medunlearn.cli import main, subcommand_parser


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
    (tmp_path / "taken" / "keep.txt").write_text("the user's")
    assert _attack(*_common(saved_model, amnesia_folder, tmp_path / "taken", *common)) == 2
    assert "already exists (pass --overwrite" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and [p.name for p in (tmp_path / "taken").iterdir()] == ["keep.txt"]


def test_a_failed_attack_run_leaves_the_folder_it_would_replace_as_it_was(tmp_path, monkeypatch):
    """Before: --overwrite deleted the old attack folder first, then wrote into --out as it went, so a run
    that failed half-way left neither the old results nor the new ones. Now it is staged beside --out."""
    import medunlearn.attacks.run as attack_run
    from medunlearn.attacks import AttackArguments

    out = tmp_path / "attacks"
    out.mkdir()
    (out / "attacks.json").write_text('{"old": true}')

    def fails_half_way(model_path, name, examples, args, method_dir, *rest, **kwargs):
        method_dir.mkdir(parents=True)
        (method_dir / "model_card.md").write_text("half")
        raise RuntimeError("the relearning died")

    monkeypatch.setattr(attack_run, "validate_attack_arguments", lambda args: None)
    monkeypatch.setattr(attack_run, "attack_model", fails_half_way)
    args = AttackArguments(
        models=["m"], before="b", data="d", forget_config="f", out_dir=str(out), overwrite=True
    )
    with pytest.raises(RuntimeError, match="the relearning died"):
        attack_run.run_attacks(args)
    assert [p.name for p in out.iterdir()] == ["attacks.json"] and json.loads(
        (out / "attacks.json").read_text()
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attacks"]  # no staging folder left beside it


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
    assert all("_sample" not in r for r in payload["rows"])
    membership = payload["methods"][0]["sections"]["membership"]
    assert 0.0 <= membership["unlearned"]["reference_auc"] <= 1.0
    assert set(membership["before"]["auc"]) == {"loss", "zlib", "min_k", "min_k_plus_plus"}
    # Members and non-members: the same (forget) patients' seen and holdout QA; the baselines beside them.
    assert membership["same_patients"] and set(membership["baselines"]) == {"before", "retain"}
    assert "members = forget patients' seen QA" in printed and "the same patients' holdout QA" in printed
    assert "retain model (never saw them)" in printed
    summary = payload["summaries"][0]
    assert summary["worst_case_ci"] is None and summary["worst_case_verdict"] is None  # nothing forgotten
    assert payload["formula"].startswith("recovered share =") and "< 0.01" in payload["formula"]
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
    from medunlearn.evaluation import populations
    from medunlearn.evaluation.populations import load_populations

    def one_forget_seen_row(*args, **kwargs):
        examples = load_populations(*args, **kwargs)
        seen = examples.index[examples["population"] == "forget_seen"]
        return examples.drop(seen[1:]).reset_index(drop=True)

    # run_attacks imports load_populations when it runs (pandas stays off `medunlearn attack --help`).
    monkeypatch.setattr(populations, "load_populations", one_forget_seen_row)
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
    data = tmp_path / "data"
    argv = _common("m", data, tmp_path / "attacks", "--forget-config", "forget_10", "--before", "b")
    with pytest.raises(SystemExit) as stop:  # refused when parsed, as every numeric option
        _attack(*argv, "--max-new-tokens", "0")
    assert stop.value.code == 2
    assert "argument --max-new-tokens: must be a whole number of at least 1" in capsys.readouterr().err


def test_a_model_never_trained_on_the_forget_patients_scores_membership_auc_near_one_half(
    amnesia_folder, saved_model, tmp_path, one_torch_thread
):
    """A tiny model never trained on anything (so never on the forget patients): the membership AUC of each
    score, the forget patients' seen vs holdout QA, is within 3 null standard deviations of 0.5
    (sqrt((n1 + n2 + 1) / (12·n1·n2)), the AUC's spread when members and non-members are exchangeable; 30
    vs 10 QA here, sd 0.107). The section names both populations, which are the same five patients."""
    from medunlearn.attacks.run import AttackArguments, run_attacks
    from medunlearn.evaluation.runner import RunnerConfig

    args = AttackArguments(
        [str(saved_model)], str(saved_model), str(amnesia_folder), "forget_25", str(tmp_path / "attacks"),
        retain_model=str(saved_model), attacks=("membership",), max_retain_patients=2,
        runner=RunnerConfig(max_new_tokens=2, progress=False),
    )  # fmt: skip
    membership = run_attacks(args)["methods"][0]["sections"]["membership"]
    assert membership["nonmembers"].startswith("the same patients' holdout QA")
    assert membership["same_patients"] and membership["patients"] == 5
    assert (membership["n_members"], membership["n_nonmembers"]) == (30, 10)
    tolerance = 3 * membership["null_sd"]
    assert tolerance == pytest.approx(3 * (41 / (12 * 30 * 10)) ** 0.5)
    for role in ("unlearned", "before", "retain"):
        assert all(abs(auc - 0.5) <= tolerance for auc in membership[role]["auc"].values()), role


@pytest.mark.slow  # trains a tiny model on the retained patients: about a minute on a loaded 2-core machine
def test_a_model_trained_on_the_retained_patients_only_scores_membership_auc_near_one_half(
    tmp_path, one_torch_thread
):
    """The issue's case: a model that saw the retained patients but never the forget patients. Against
    retained patients' holdout QA as non-members (the old split) it found the non-members more familiar: a
    loss AUC of 0.23 with this training, 0.29–0.37 over the four scores with a similar one ("over-unlearning"
    by the old reading, outside the tolerance below); on the forget patients' own seen vs holdout QA it is
    within 3 null standard deviations of 0.5 (60 vs 20 QA: sd 0.075)."""
    import torch
    from tiny_training import qa_batch

    from medunlearn.amnesia import build_amnesia_folder
    from medunlearn.attacks.run import AttackArguments, run_attacks
    from medunlearn.data_loading import load_split
    from medunlearn.evaluation.runner import RunnerConfig
    from medunlearn.models import build_tiny_llama, train_bpe_tokenizer
    from medunlearn.unlearn.ops import nll_loss

    folder = build_amnesia_folder(tmp_path / "amnesia", patients=40, seed=0)
    retained = load_split(folder, "retain_75").to_pandas()
    tokenizer = train_bpe_tokenizer((retained["question"] + " " + retained["answer"]).tolist(), 1024)
    model = build_tiny_llama(tokenizer)
    batch = qa_batch(tokenizer, retained)
    optimizer, generator = torch.optim.Adam(model.parameters(), lr=3e-3), torch.Generator().manual_seed(0)
    for _ in range(150):
        rows = torch.randperm(len(retained), generator=generator)[:32]
        logits = model(
            input_ids=batch["input_ids"][rows], attention_mask=batch["attention_mask"][rows]
        ).logits
        loss = nll_loss(logits, batch["labels"][rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(tmp_path / "retain")
    tokenizer.save_pretrained(tmp_path / "retain")
    retain = str(tmp_path / "retain")
    args = AttackArguments(
        [retain], retain, str(folder), "forget_25", str(tmp_path / "attacks"), attacks=("membership",),
        max_retain_patients=2, runner=RunnerConfig(max_new_tokens=2, progress=False),
    )  # fmt: skip
    membership = run_attacks(args)["methods"][0]["sections"]["membership"]
    assert (membership["n_members"], membership["n_nonmembers"]) == (60, 20)
    tolerance = 3 * membership["null_sd"]
    assert all(abs(auc - 0.5) <= tolerance for auc in membership["before"]["auc"].values())


@pytest.mark.slow  # memorises the forget QA first: about a minute on a loaded 2-core machine
def test_every_defined_recovered_share_and_the_worst_case_carry_intervals(
    amnesia_folder, tiny_tokenizer, tmp_path, one_torch_thread
):
    """A before model that memorised the forget patients' seen QA and an untrained "unlearned" model: the
    shares are defined, and each has a patient-bootstrap interval; the worst case its selection-aware
    interval, verdict and win shares (attacks.json, the printed table and the model card)."""
    from tiny_training import memorised_tiny_model

    from medunlearn.evaluation.populations import load_populations
    from medunlearn.models import build_tiny_llama

    examples = load_populations(amnesia_folder, "forget_25")
    seen = examples[examples["population"] == "forget_seen"].reset_index(drop=True)
    folders = {}
    for name, model in (("before", memorised_tiny_model(tiny_tokenizer, seen, steps=60)),
                        ("unlearned", build_tiny_llama(tiny_tokenizer))):  # fmt: skip
        model.save_pretrained(tmp_path / name)
        tiny_tokenizer.save_pretrained(tmp_path / name)
        folders[name] = tmp_path / name
    out = tmp_path / "attacks"
    argv = _common(folders["unlearned"], amnesia_folder, out, "--forget-config", "forget_25")
    argv += ["--before", folders["before"], "--attacks", "paraphrase,holdout"]
    argv += ["--max-new-tokens", "8", "--max-retain-patients", "2", "--no-progress"]
    assert _attack(*argv) == 0
    payload = json.loads((out / "attacks.json").read_text())
    defined = [r for r in payload["rows"] if r["recovered_share"] is not None]
    assert defined, "the memorised before model should leave something to recover"
    for row in defined:
        low, high = row["recovered_share_ci"]
        assert low <= row["recovered_share"] <= high and row["patients"] == 5
    summary = payload["summaries"][0]
    low, high = summary["worst_case_ci"]
    assert low <= summary["worst_case_recovery"] <= high
    assert summary["worst_case_verdict"] in ("recovery", "not distinguishable from no recovery")
    assert sum(summary["worst_case_wins"].values()) == pytest.approx(1.0)
    assert payload["bootstrap"]["clusters"] == "patients"
    assert summary["worst_case_verdict"] in (out / "unlearned" / "model_card.md").read_text()
