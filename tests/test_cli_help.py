"""Every ``medunlearn`` subcommand has ``--help`` with a description and an example, and the examples work.

The examples are read from each parser's epilog (the text users see), so a renamed flag or a broken example
fails here. Fast tests parse every example with its parser; slow tests run them as written in a temporary
folder (``/tmp/`` in an example becomes that folder). Examples that need a GPU, the Hub, a real model package
or files the user brings are only parsed; the reason is in ``NOT_RUN``.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from medunlearn.cli import SUBCOMMANDS, main, subcommand_parser

REPO = Path(__file__).resolve().parents[1]

# substring of an example -> why the test parses it but does not run it
NOT_RUN = {
    "--source pmc-patients": (
        "needs the user's PMC-Patients files (real data: tests/amnesia/test_pmc_patients.py)"
    ),
    "--pool my_pool.jsonl": "needs the user's own pool file",
    "--abstracts my_abstracts.jsonl": "the user's abstracts (tests/biodivergence/mining/test_pipeline.py)",
    "--abstracts pubmed24n0001.xml.gz": "needs a PubMed baseline file and an LLM server",
    "--pubmedqa": "real data (tests/biodivergence/test_pubmedqa_integration.py)",
    "--eval-labels heuristic": "real data, mined for minutes (tests/biodivergence/mining/test_pipeline.py)",
    "smollm2-135m": "a real 135M model: too slow for this file (tests/unlearn/test_smollm2.py)",
    "--baseline finetuned": "fine-tunes MiniLM for minutes (tests/biodivergence/test_finetuned.py)",
    "--engine vllm": "starts a vLLM server from .venv-vllm (tests/evaluation/test_vllm_engine.py)",
    "--load-in-4bit": "QLoRA needs a CUDA GPU",
    "--private": "pushes to the Hub",
    "medunlearn demo": "the --quick demo runs in tests/test_demo.py",
    "--jobs 2": "the whole mini-study (18 cells): tests/study/test_study.py runs a shrunk one",
    "--executor slurm": "needs a Slurm cluster (tests/study: submitit's local executor)",
}


def example_commands(epilog: str) -> list[str]:
    """The ``medunlearn …`` lines of an epilog, continuation lines joined and ``# comments`` removed."""
    commands, current = [], ""
    for line in epilog.splitlines():
        text = line.strip()
        if current:
            current += " " + text
        elif text.startswith("medunlearn "):
            current = text
        else:
            continue
        if current.endswith("\\"):
            current = current[:-1].rstrip()
            continue
        commands.append(current.split(" #")[0].strip())
        current = ""
    return commands


def test_example_commands_joins_continuations_and_drops_comments():
    epilog = "example:\n  medunlearn a --x 1 \\\n      --y 2\n\n  medunlearn b --list   # one line each\ntext"
    assert example_commands(epilog) == ["medunlearn a --x 1 --y 2", "medunlearn b --list"]


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_help_has_a_description_and_an_example(name, capsys):
    parser = subcommand_parser(name)
    assert parser.description and len(parser.description) > 20
    assert "example" in (parser.epilog or "")
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    assert f"medunlearn {name}" in printed and "example" in printed


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_every_example_parses_with_its_own_parser(name):
    commands = example_commands(subcommand_parser(name).epilog)
    assert commands, f"{name}: no `medunlearn ...` example in the epilog"
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "medunlearn" and argv[1] in SUBCOMMANDS, command
        subcommand_parser(argv[1]).parse_args(argv[2:])  # argparse exits (fails the test) on an unknown flag


def _run_examples(name: str, workspace: Path, monkeypatch) -> list[str]:
    """Run ``name``'s examples as written inside ``workspace``; returns the commands run."""
    monkeypatch.chdir(workspace)
    ran = []
    for command in example_commands(subcommand_parser(name).epilog):
        if any(marker in command for marker in NOT_RUN):
            continue
        argv = shlex.split(command.replace("/tmp/", f"{workspace}/"))
        assert main(argv[1:]) == 0, command
        ran.append(command)
    return ran


def _workspace(folder: Path) -> Path:
    """A folder where the examples' relative paths resolve as from the repository root (recipes/…)."""
    (folder / "recipes").symlink_to(REPO / "recipes")
    return folder


@pytest.fixture(scope="module")
def unlearned_workspace(tmp_path_factory):
    """The unlearn example chain (build, fine-tune, 5 GradDiff steps), run once for the tests that need
    /tmp/gd."""
    import datasets

    folder = _workspace(tmp_path_factory.mktemp("unlearn-examples"))
    previous = datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE = folder / ".datasets-cache"
    mp = pytest.MonkeyPatch()
    try:
        ran = _run_examples("unlearn", folder, mp)
    finally:
        mp.undo()
        datasets.config.HF_DATASETS_CACHE = previous
    return folder, ran


@pytest.mark.slow  # builds a 200-patient folder and audits it (~10 s)
def test_amnesia_examples_run(tmp_path, monkeypatch):
    ran = _run_examples("amnesia", tmp_path, monkeypatch)
    assert any("audit" in c for c in ran) and any("--dry-run" in c for c in ran)
    assert (tmp_path / "amnesia" / "README.md").is_file()


@pytest.mark.slow  # a 2000-pair synthetic build, audit and lexical baseline (~15 s)
def test_biodivergence_examples_run(tmp_path, monkeypatch):
    _run_examples("biodivergence", tmp_path, monkeypatch)
    assert (tmp_path / "bd_demo_eval" / "metrics.json").is_file()


@pytest.mark.slow  # tiny-llama fine-tune on 40 patients, then 5 GradDiff steps (~30-50 s on a loaded machine)
def test_unlearn_examples_run(unlearned_workspace):
    folder, ran = unlearned_workspace
    assert any("--list" in c for c in ran) and any("--help-method" in c for c in ran)
    assert (folder / "gd" / "model.safetensors").is_file() and (folder / "gd" / "README.md").is_file()


@pytest.mark.slow  # the publish dry run of the unlearn example's model
def test_publish_examples_run(unlearned_workspace, monkeypatch):
    folder, _ = unlearned_workspace
    assert _run_examples("publish", folder, monkeypatch)


@pytest.mark.slow  # tiny-llama fine-tune (notes 1 epoch, QA 2 epochs) on 40 patients (~20 s)
def test_finetune_examples_run(tmp_path, monkeypatch):
    _run_examples("finetune", _workspace(tmp_path), monkeypatch)
    assert (tmp_path / "ft" / "model.safetensors").is_file()


@pytest.mark.slow  # fine-tune, evaluate the fine-tuned model, then an unlearned one against it (~40 s)
def test_evaluate_and_report_examples_run(unlearned_workspace, tmp_path, monkeypatch):
    folder = _workspace(tmp_path)
    # The second evaluate example scores "ckpt/grad_diff": the unlearn example's GradDiff model, trained on
    # the same 40-patient seed-0 cohort.
    shutil.copytree(unlearned_workspace[0] / "gd", folder / "ckpt" / "grad_diff")
    _run_examples("evaluate", folder, monkeypatch)
    assert (folder / "evals" / "grad_diff" / "summary.json").is_file()
    # The report example compares evals/grad_diff with evals/simnpo; a second evaluation stands in for
    # SimNPO's.
    shutil.copytree(folder / "evals" / "finetuned", folder / "evals" / "simnpo")
    _run_examples("report", folder, monkeypatch)
    assert (folder / "evals" / "report" / "report.json").is_file()


@pytest.mark.slow  # a 20-author TOFU-format folder, a tiny-llama evaluation and the comparison (~15 s)
def test_tofu_examples_run(tmp_path, monkeypatch):
    ran = _run_examples("tofu", tmp_path, monkeypatch)
    assert any(" compare " in c for c in ran)


@pytest.mark.slow  # imports evaluate and writes the nine modules (~10 s)
def test_metrics_examples_run(tmp_path, monkeypatch):
    import evaluate.config

    # The examples write to evaluate's module cache: here a temporary one, not the user's.
    monkeypatch.setattr(evaluate.config, "HF_MODULES_CACHE", tmp_path / "hf-modules")
    ran = _run_examples("metrics", tmp_path, monkeypatch)
    assert any("--list" in c for c in ran)
    assert list((tmp_path / "hf-modules" / "evaluate_modules" / "metrics").glob("evaluate-metric--*/*/*.py"))


@pytest.mark.slow  # a 40-patient tiny-llama fine-tune, one baseline and one GradDiff cell (~1 min)
def test_study_examples_run(tmp_path, monkeypatch):
    ran = _run_examples("study", _workspace(tmp_path), monkeypatch)
    assert any("--validate" in c for c in ran)
    assert (tmp_path / "tiny" / "cells" / "grad_diff-forget_10-s0" / "done.json").is_file()
