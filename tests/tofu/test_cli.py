"""``medunlearn tofu``: build and evaluate from the command line; user errors exit 2 with a message."""

from __future__ import annotations

import json

import pytest

from medunlearn.cli import main


def _run(argv) -> int:
    return main(["tofu", *argv])


@pytest.mark.slow
def test_build_then_evaluate_writes_a_summary_with_reference_names(tmp_path, capsys):
    data, out = tmp_path / "tofu", tmp_path / "eval"
    assert (
        _run(["build", "--out", str(data), "--authors", "10", "--qa-per-author", "1", "--perturbed", "2"])
        == 0
    )
    assert (data / "forget10_perturbed.json").is_file()
    assert str(data) in capsys.readouterr().out
    code = _run(
        [
            "evaluate",
            "--model",
            "tiny-llama",
            "--data",
            str(data),
            "--out",
            str(out),
            "--preset",
            "open-unlearning",
            "--max-new-tokens",
            "2",
            "--stop",
            "\n\n",
            "--batch-size",
            "64",
        ]
    )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["conventions"]["max_new_tokens"] == 2 and summary["conventions"]["stop_strings"] == [
        "\n\n"
    ]
    assert summary["open_unlearning"]["forget_Q_A_Prob"] == summary["metrics"]["forget_prob"]
    printed = json.loads(capsys.readouterr().out.split("\nsummary:")[0])
    assert printed == summary["open_unlearning"]
    assert json.loads((out / "TOFU_SUMMARY.json").read_text()) == summary["open_unlearning"]
    assert (
        _run(["compare", str(out / "summary.json"), str(out / "TOFU_SUMMARY.json"), "--tolerance", "0"]) == 0
    )
    assert "forget_Q_A_Prob" in capsys.readouterr().out


def test_compare_reports_differences_beyond_the_tolerance(tmp_path, capsys):
    ours, theirs = tmp_path / "ours.json", tmp_path / "theirs.json"
    ours.write_text(json.dumps({"open_unlearning": {"forget_Q_A_Prob": 0.5, "model_utility": 0.4}}))
    theirs.write_text(
        json.dumps({"forget_Q_A_Prob": {"agg_value": 0.5}, "model_utility": {"agg_value": 0.45}})
    )
    assert _run(["compare", str(ours), str(theirs), "--tolerance", "0.1"]) == 0
    assert _run(["compare", str(ours), str(theirs), "--tolerance", "0.01"]) == 1
    assert "0.05" in capsys.readouterr().out
    theirs.write_text("{not json")
    assert _run(["compare", str(ours), str(theirs)]) == 2
    assert "theirs.json" in capsys.readouterr().err


def test_missing_folder_and_unknown_forget_config_are_reported(tmp_path, capsys):
    assert (
        _run(
            [
                "evaluate",
                "--model",
                "tiny-llama",
                "--data",
                str(tmp_path / "absent"),
                "--out",
                str(tmp_path / "e"),
            ]
        )
        == 2
    )
    assert "absent" in capsys.readouterr().err
    data = tmp_path / "tofu"
    _run(["build", "--out", str(data), "--authors", "10", "--qa-per-author", "1"])
    assert (
        _run(
            [
                "evaluate",
                "--model",
                str(tmp_path / "no-model"),
                "--data",
                str(data),
                "--out",
                str(tmp_path / "e"),
            ]
        )
        == 2
    )
    assert "no-model" in capsys.readouterr().err
    (data / "holdout10.json").unlink()
    assert _run(["evaluate", "--model", "tiny-llama", "--data", str(data), "--out", str(tmp_path / "e")]) == 2
    assert "holdout10" in capsys.readouterr().err


def test_every_example_in_the_help_parses():
    from medunlearn.cli import subcommand_parser

    parser = subcommand_parser("tofu")
    joined = parser.epilog.replace("\\\n", " ")
    examples = [
        line.strip().removeprefix("medunlearn tofu ").split()
        for line in joined.splitlines()
        if line.strip().startswith("medunlearn tofu ")
    ]
    assert [command[0] for command in examples] == ["build", "evaluate", "compare"]
    for command in examples:
        args = parser.parse_args(command)
        assert args.action == command[0]


def test_batch_size_auto_and_max_batch_size_reach_the_runner_config():
    from medunlearn.cli import subcommand_parser
    from medunlearn.cli.tofu import runner_config

    parser = subcommand_parser("tofu")
    base = ["evaluate", "--model", "m", "--data", "d", "--out", "o"]
    config = runner_config(parser.parse_args([*base, "--batch-size", "auto", "--max-batch-size", "8"]))
    assert (config.batch_size, config.max_batch_size) == ("auto", 8)
    config = runner_config(parser.parse_args([*base, "--no-progress"]))
    assert (config.batch_size, config.max_batch_size, config.progress) == (16, 256, False)


@pytest.mark.parametrize("bad", ["0", "-3", "big"])
def test_a_bad_batch_size_exits_2_naming_the_option(bad, tmp_path, capsys):
    argv = ["evaluate", "--model", "m", "--data", str(tmp_path), "--out", str(tmp_path / "e")]
    with pytest.raises(SystemExit) as exited:
        _run([*argv, "--batch-size", bad])
    assert exited.value.code == 2
    assert "--batch-size" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_a_max_batch_size_below_one_is_named(tmp_path, capsys):
    argv = ["evaluate", "--model", "m", "--data", str(tmp_path), "--out", str(tmp_path / "e")]
    with pytest.raises(SystemExit) as stop:  # refused by argparse, at parse time
        _run([*argv, "--batch-size", "auto", "--max-batch-size", "0"])
    assert stop.value.code == 2
    assert (
        "argument --max-batch-size: must be a whole number of at least 1, got '0'" in capsys.readouterr().err
    )


def test_tofu_evaluate_scores_a_shared_retain_model_once(tmp_path, tiny_model, tiny_tokenizer, monkeypatch):
    """``tofu evaluate --retain-outputs DIR`` (as ``evaluate --benchmark tofu``): a second evaluation against
    the same retain model reads its outputs from DIR, as the reference reads its retain log made once; the
    retain model is neither loaded nor scored again."""
    from medunlearn.tofu import evaluate as tofu_evaluate

    data, retain, shared = tmp_path / "tofu", tmp_path / "retain", tmp_path / "shared_retain"
    build = ["build", "--out", str(data), "--authors", "5", "--qa-per-author", "1", "--perturbed", "2"]
    assert _run(build) == 0
    tiny_model.save_pretrained(retain)
    tiny_tokenizer.save_pretrained(retain)
    loads = []
    original = tofu_evaluate._resolve
    monkeypatch.setattr(
        tofu_evaluate, "_resolve", lambda model, *rest: loads.append(str(model)) or original(model, *rest)
    )
    common = ["--data", str(data), "--max-new-tokens", "2", "--no-progress", "--model", "tiny-llama"]
    common += ["--retain-model", str(retain), "--retain-outputs", str(shared)]
    assert _run(["evaluate", *common, "--out", str(tmp_path / "a")]) == 0
    manifest = (shared / "manifest.json").read_text()
    assert _run(["evaluate", *common, "--out", str(tmp_path / "b")]) == 0
    assert loads.count(str(retain)) == 1  # scored for the first evaluation only
    assert (shared / "manifest.json").read_text() == manifest
    assert not (tmp_path / "b" / "outputs" / "retain-answers").exists()
    first, second = (json.loads((tmp_path / name / "summary.json").read_text()) for name in "ab")
    assert second["metrics"]["forget_quality"] is not None
    assert json.loads((tmp_path / "b" / "run.json").read_text())["outputs"]["retain"] == str(shared)
