"""The attack table: ``run_attacks`` validates and dispatches through it alone (a planted entry is run, its
data check stops the run before anything is written), in the table's order whatever ``--attacks`` says."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import get_args

import pytest

from medunlearn.attacks import table
from medunlearn.attacks.relearning import AttackInputError
from medunlearn.attacks.run import ATTACK_DESCRIPTIONS, ATTACKS, AttackArguments, run_attacks
from medunlearn.attacks.table import ATTACK_TABLE, AttackName, AttackOutcome, selected_attacks
from medunlearn.evaluation.runner import RunnerConfig


def test_the_table_names_every_attack_once_with_its_description():
    assert ATTACKS == get_args(AttackName) == tuple(ATTACK_TABLE)
    assert ATTACKS == ("relearn", "quantize", "paraphrase", "holdout", "probe", "membership")
    assert all(name == spec.name and spec.description for name, spec in ATTACK_TABLE.items())
    assert ATTACK_DESCRIPTIONS == {name: spec.description for name, spec in ATTACK_TABLE.items()}
    assert table.SIMILARITY_ATTACKS == ("relearn", "quantize", "paraphrase", "holdout")
    assert {n for n, s in ATTACK_TABLE.items() if s.check_data is not None} == {"relearn", "membership"}


def test_selected_attacks_are_in_table_order_and_unknown_names_are_named():
    assert [s.name for s in selected_attacks(("membership", "holdout", "relearn"))] == [
        "relearn",
        "holdout",
        "membership",
    ]
    with pytest.raises(AttackInputError, match=r"unknown attack\(s\) jailbreak in --attacks"):
        selected_attacks(("holdout", "jailbreak"))
    with pytest.raises(AttackInputError, match=r"\(none given\)"):
        selected_attacks(())


def _args(model, data, out, attacks):
    return AttackArguments(
        [str(model)], str(model), str(data), "forget_10", str(out), attacks=attacks, max_retain_patients=2,
        runner=RunnerConfig(max_new_tokens=2, progress=False),
    )  # fmt: skip


def test_a_table_entry_data_check_stops_the_run_before_anything_is_written(
    amnesia_folder, saved_model, tmp_path, monkeypatch
):
    seen = []

    def refuse(examples, args):
        seen.append((len(examples), args.forget_config))
        raise AttackInputError("planted: no usable data")

    monkeypatch.setitem(ATTACK_TABLE, "holdout", replace(ATTACK_TABLE["holdout"], check_data=refuse))
    out = tmp_path / "attacks"
    with pytest.raises(AttackInputError, match="planted"):
        run_attacks(_args(saved_model, amnesia_folder, out, ("holdout",)))
    assert not out.exists() and seen and seen[0][1] == "forget_10" and seen[0][0] > 0


def test_run_attacks_runs_the_table_entries_in_table_order(
    amnesia_folder, saved_model, tmp_path, monkeypatch, one_torch_thread
):
    """Two planted entries, asked for in reverse order: each gets the target (the unlearned evaluation
    already read), its rows are listed in table order with the method's name, its section is stored."""
    calls = []

    def planted(name, share):
        def run(target):
            calls.append(name)
            assert (target.reference_dir / "per_example.parquet").is_file()
            row = target.reference.rows("holdout", name, target.unlearned, target.reference_dir)[0]
            return AttackOutcome([row], {"planted": share})

        return run

    for name, share in (("paraphrase", 1), ("holdout", 2)):
        monkeypatch.setitem(ATTACK_TABLE, name, replace(ATTACK_TABLE[name], run=planted(name, share)))
    out = tmp_path / "attacks"
    payload = run_attacks(_args(saved_model, amnesia_folder, out, ("holdout", "paraphrase")))
    assert calls == ["paraphrase", "holdout"]
    method = payload["methods"][0]
    assert method["sections"] == {"paraphrase": {"planted": 1}, "holdout": {"planted": 2}}
    assert [(r["variant"], r["method"]) for r in payload["rows"]] == [
        ("paraphrase", "tiny"),
        ("holdout", "tiny"),
    ]
    assert json.loads((out / "attacks.json").read_text())["attacks"] == ["holdout", "paraphrase"]
