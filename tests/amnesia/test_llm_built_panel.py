"""The judge panel's distinct judges: greedy copies of one model are one judge (asked once; no majority and no
Fleiss' κ in the report, the card or the command's output; a warning when the command builds such a panel);
two different models, or copies that sample, are distinct judges with a κ."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from amnesia_llm_fakes import ScriptedBackend, ScriptedModel, ScriptedServer, write_notes_csv

from medunlearn.amnesia.pipeline import build_amnesia_from_notes
from medunlearn.amnesia.sources.llm_built import ConstructionConfig, construct_records

SPEC, OTHER = "transformers:scripted", "transformers:other"
BUILD = {"disease_level": ["cancer"], "forget_percentages": [25], "progress": False}


@pytest.fixture()
def notes_csv(tmp_path) -> Path:
    path = tmp_path / "notes.csv"
    write_notes_csv(path)
    return path


def no_clear_question(question: str) -> bool:
    return False


def kappa_values(card: str) -> list[str]:
    """The numbers the card prints after "Fleiss' κ"."""
    return re.findall(r"Fleiss' κ[^\n]*?(-?\d\.\d{3})", card)


def test_the_default_greedy_panel_is_one_distinct_judge_asked_once(tmp_path, notes_csv):
    # The scripted copy that samples with seed 2 would reject every QA: were the three greedy copies asked
    # (they differ only by seed), a "majority" of 2 to 1 and a κ of -0.5 would be reported.
    backend = ScriptedBackend(ScriptedModel(judge_rules={2: no_clear_question}))
    config = ConstructionConfig(generator=SPEC, cache=tmp_path / "llm.sqlite", max_regenerations=1)
    folder, construction = build_amnesia_from_notes(
        tmp_path / "out", notes_csv, config, backends={SPEC: backend}, **BUILD
    )
    report = construction.report
    panel = report["panel"]
    assert report["models"]["judges"] == [SPEC] * 3  # the panel as configured
    assert panel["distinct_judges"] == 1 and panel["verdict"] == "one distinct judge"
    assert panel["distinct_models"] == [{"model": SPEC, "copies": 3}]
    assert panel["fleiss_kappa"] is None and panel["kappa_items"] is None
    (judge,) = panel["per_judge"]
    assert judge["copies"] == 3 and judge["agreement_with_majority"] is None and judge["qa_valid"] == 1.0
    # One judge request per judged patient and round (3 in round 0, 3 in round 1), not three.
    assert report["tokens"]["judge"]["requests"] == 3 + 3
    assert all(len(d["tries"][-1]["votes"]) == 1 for d in report["qa_details"] if d["accepted"])
    card = (folder / "README.md").read_text()
    assert "one distinct judge, `transformers:scripted` (3 greedy copies of one model: one answer)" in card
    assert "Fleiss' κ: not reported" in card and kappa_values(card) == []


def test_one_identity_under_two_specs_is_one_judge(tmp_path, notes_csv):
    """Distinct means a distinct cache identity, not a distinct spec string (two names for one model)."""
    same = {SPEC: ScriptedBackend(ScriptedModel()), OTHER: ScriptedBackend(ScriptedModel())}
    config = ConstructionConfig(generator=SPEC, judges=(SPEC, OTHER), cache=tmp_path / "llm.sqlite")
    panel = construct_records(notes_csv, config, backends=same, progress=False).report["panel"]
    assert panel["distinct_models"] == [{"model": SPEC, "copies": 2}] and panel["fleiss_kappa"] is None


def test_two_different_models_are_two_judges_with_a_kappa(tmp_path, notes_csv):
    # The other model (seed offset 1) finds no question clear: the two disagree on every QA.
    model = ScriptedModel(judge_rules={1: no_clear_question}, first_round_bad=False)
    backends = {SPEC: ScriptedBackend(model), OTHER: ScriptedBackend(model, name="other-model")}
    config = ConstructionConfig(
        generator=SPEC,
        judges=(SPEC, OTHER),
        cache=tmp_path / "llm.sqlite",
        max_regenerations=0,
        judge_all=True,
    )
    panel = construct_records(notes_csv, config, backends=backends, progress=False).report["panel"]
    assert panel["distinct_judges"] == 2 and panel["verdict"] == "majority of 2 distinct judges"
    assert [m["model"] for m in panel["distinct_models"]] == [SPEC, OTHER]
    # Every QA: one yes, one no. Per item P_i = 0; p(yes) = p(no) = 1/2, P_e = 1/2: κ = (0 - 1/2) / 1/2 = -1
    assert panel["fleiss_kappa"]["qa_valid"] == pytest.approx(-1.0) and panel["kappa_items"]["qa"] > 0
    assert panel["qa_valid"]["ours"] == 0.0  # no majority of two for any QA
    assert [j["agreement_with_majority"] for j in panel["per_judge"]] == [0.0, 1.0]


def test_copies_that_sample_are_distinct_judges_with_a_kappa(tmp_path, notes_csv):
    backend = ScriptedBackend(ScriptedModel(judge_rules={2: no_clear_question}))
    config = ConstructionConfig(
        generator=SPEC, cache=tmp_path / "llm.sqlite", max_regenerations=1, judge_temperature=0.7
    )
    folder, construction = build_amnesia_from_notes(
        tmp_path / "out", notes_csv, config, backends={SPEC: backend}, **BUILD
    )
    panel = construction.report["panel"]
    assert panel["distinct_judges"] == 3 and panel["distinct_models"] == [{"model": SPEC, "copies": 1}] * 3
    assert panel["fleiss_kappa"]["qa_valid"] == pytest.approx(-0.5)  # always 2 yes / 1 no
    card = (folder / "README.md").read_text()
    assert "Fleiss' κ (3 distinct judges): qa_valid -0.500" in card
    assert "3 distinct judges" in card and "the majority of them decides" in card


def test_the_command_warns_about_a_greedy_panel_and_prints_no_kappa(tmp_path, notes_csv, capsys):
    from medunlearn.cli import main as cli_main

    server = ScriptedServer(ScriptedModel(judge_rules={2: no_clear_question}))
    argv = [
        "amnesia",
        "build",
        "--source",
        "pmc-patients",
        "--notes",
        str(notes_csv),
        "--generate",
        server.spec,
    ]
    argv += ["--max-regenerations", "1", "--disease-level", "cancer"]
    try:
        assert cli_main([*argv, "--out", str(tmp_path / "greedy")]) == 0
        greedy = capsys.readouterr()
        assert cli_main([*argv, "--out", str(tmp_path / "sampled"), "--judge-temperature", "0.7"]) == 0
        sampled = capsys.readouterr()
    finally:
        server.stop()
    warning = [line for line in greedy.err.splitlines() if line.startswith("warning: the judge panel")]
    assert len(warning) == 1 and "one distinct judge: no majority vote and no Fleiss' κ" in warning[0]
    assert "judge panel: one distinct judge" in greedy.out and "Fleiss' κ qa_valid" not in greedy.out
    assert "warning: the judge panel" not in sampled.err
    assert "Fleiss' κ qa_valid" in sampled.out and "judge panel: 3 distinct judges" in sampled.out


def test_one_folder_spelled_several_ways_or_copied_is_one_judge(tmp_path, monkeypatch):
    """A reviewer's case: one checkpoint folder named by its absolute path, with a trailing slash, relatively,
    through a symlink and as a copy gave five "judges"; its weights are one, so it is one judge. Another
    folder with other weights stays a judge of its own."""
    import shutil

    from medunlearn.amnesia.sources.llm_built.judge_panel import distinct_judges
    from medunlearn.llm.cache import BackendIdentity
    from medunlearn.llm.transformers_backend import weights_fingerprint

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights-a")
    (folder / "config.json").write_text("{}")
    (tmp_path / "link").symlink_to(folder)
    shutil.copytree(folder, tmp_path / "copy", copy_function=shutil.copy2)
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.safetensors").write_bytes(b"weights-bb")
    monkeypatch.chdir(tmp_path)
    specs = [str(folder), f"{folder}/", "ckpt", str(tmp_path / "link"), str(tmp_path / "copy"), str(other)]
    identities = {
        spec: BackendIdentity("transformers", spec, weights_fingerprint(spec, {})) for spec in specs
    }
    judges = distinct_judges(specs, identities, temperature=0.0)
    assert [judge.positions for judge in judges] == [(0, 1, 2, 3, 4), (5,)]
    # Sampling copies are judges of their own whatever their weights.
    assert len(distinct_judges(specs, identities, temperature=0.7)) == len(specs)
