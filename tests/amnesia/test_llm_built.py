"""The LLM construction pipeline (medunlearn.amnesia.sources.llm_built) on scripted LLMs: every stage, the
report, the cache (zero calls on rerun), kill-and-resume, an unreachable server, and no API key anywhere."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from amnesia_llm_fakes import ScriptedBackend, ScriptedModel, ScriptedServer, write_notes_csv

from medunlearn.amnesia.hub import CONSTRUCTION_FILE
from medunlearn.amnesia.pipeline import build_amnesia_from_notes
from medunlearn.amnesia.sources.llm_built import (
    MAX_ANSWER_CHARS,
    MAX_FINDINGS,
    SKIP_CHECKS,
    SKIP_NO_LABEL,
    SKIP_PANEL,
    ConstructionConfig,
    ConstructionError,
    IncompleteRunError,
    check_qa,
    construct_records,
    fleiss_kappa_of_votes,
    groundedness,
    judge_schema,
    load_prompt,
    qa_schema,
)
from medunlearn.errors import InputError
from medunlearn.llm import ServerUnreachableError

SPEC = "transformers:scripted"
BUILD = {"disease_level": ["cancer"], "forget_percentages": [25], "progress": False}


@pytest.fixture()
def notes_csv(tmp_path) -> Path:
    path = tmp_path / "notes.csv"
    write_notes_csv(path)
    return path


def config(tmp_path, **changes) -> ConstructionConfig:
    changes.setdefault("max_regenerations", 1)
    return ConstructionConfig(generator=SPEC, cache=tmp_path / "llm.sqlite", **changes)


def build(tmp_path, notes_csv, backend, out="out", **changes):
    return build_amnesia_from_notes(
        tmp_path / out, notes_csv, config(tmp_path, **changes), backends={SPEC: backend}, **BUILD
    )


def folder_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_checks_and_groundedness():
    note = "She had a breast mass of 3 cm. Biopsy showed ductal carcinoma."
    assert groundedness("ductal carcinoma", note) == 1.0
    assert groundedness("lobular carcinoma", note) == 0.5
    assert groundedness("the", note) == 0.0  # no content word: nothing to ground
    assert (
        check_qa(
            {"question": "What did the biopsy show?", "answer": "ductal carcinoma"}, "factual", note, set()
        )
        == []
    )
    assert check_qa({"question": "", "answer": "x"}, "factual", note, set()) == ["empty question or answer"]
    verbatim = {"question": "Was the ductal carcinoma seen?", "answer": "ductal carcinoma"}
    assert check_qa(verbatim, "factual", note, set()) == ["answer verbatim in the question"]
    duplicate = {"question": "What did the biopsy show?", "answer": "ductal carcinoma"}
    assert check_qa(duplicate, "factual", note, {"what did the biopsy show"}) == ["duplicate question"]
    reasoning = {
        "question": "Why cancer?",
        "answer": "breast mass and carcinoma",
        "findings": ["breast mass"],
    }
    assert check_qa(reasoning, "reasoning", note, set()) == ["fewer than 2 findings from the note"]


def test_fleiss_kappa_matches_a_hand_computation():
    # 4 items, 3 judges. Per item P_i = (sum_j n_ij^2 - n) / (n (n - 1)): 1/3, 1, 1, 1/3, so P = 2/3;
    # p(yes) = 6/12, p(no) = 6/12, so P_e = 1/2; kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3.
    votes = [[True, True, False], [True, True, True], [False, False, False], [True, False, False]]
    assert fleiss_kappa_of_votes(votes) == pytest.approx(1 / 3)
    assert fleiss_kappa_of_votes([[True, True], [True, True]]) is None  # one category: undefined
    assert fleiss_kappa_of_votes([[True, False]]) is None  # one item


def test_schemas_fix_the_counts():
    import jsonschema

    schema = qa_schema(4, 4)
    qa = {"question": "q", "answer": "a"}
    good = {"factual": [qa] * 4, "reasoning": [{**qa, "findings": ["x", "y"]}] * 4}
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "factual": [qa] * 3}, schema)
    # Every string is bounded, so a guided decoder closes a runaway answer and the longest one fits the limit.
    long_answer = {"question": "q", "answer": "x" * (MAX_ANSWER_CHARS + 1)}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "factual": [long_answer, qa, qa, qa]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**good, "reasoning": [{**qa, "findings": ["x"] * (MAX_FINDINGS + 1)}] * 4}, schema
        )
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"label_supported": True, "ratings": []}, judge_schema(2))


def test_prompts_are_versioned_and_overridable(tmp_path):
    builtin = load_prompt("qa_generation")
    assert builtin.version == "amnesia-qa-generation-v1" and builtin.source == "builtin"
    override = tmp_path / "judge.yaml"
    override.write_text("version: my-judge-v2\nsystem: Be strict.\nuser: Rate {n_qa} pairs of {title}.\n")
    prompt = load_prompt("judge", override)
    assert prompt.version == "my-judge-v2"
    assert prompt.messages(n_qa=2, title="T")[1]["content"] == "Rate 2 pairs of T."
    (tmp_path / "bad.yaml").write_text("version: v1\nsystem: s\n")
    with pytest.raises(ConstructionError, match=r"bad\.yaml, field 'user'"):
        load_prompt("judge", tmp_path / "bad.yaml")
    (tmp_path / "fields.yaml").write_text("version: v1\nsystem: s\nuser: 'needs {nothing}'\n")
    with pytest.raises(ConstructionError, match=r"fields\.yaml, field 'user'.*nothing"):
        load_prompt("judge", tmp_path / "fields.yaml").messages(title="T")


def test_pipeline_labels_regenerates_judges_and_reports(tmp_path, notes_csv):
    # Judge 3 (seed 2) finds no question clear: outvoted 2 to 1, every QA stays valid. The judges sample, so
    # the three copies of the generator are three distinct judges (greedy copies would be one).
    backend = ScriptedBackend(ScriptedModel(judge_rules={2: lambda question: False}))
    folder, construction = build(tmp_path, notes_csv, backend, judge_temperature=0.7)
    report = construction.report
    assert report["notes"] == {"in_file": 5, "used": 5, "sample": None, "kept": 3}
    # p4's label request fails (the scripted model answers outside the enum): the rule-based label is used;
    # p5 has neither, and is skipped.
    assert report["labels"]["llm"] == 3 and report["labels"]["rule_fallback"] == 1
    assert report["skips"] == {SKIP_CHECKS: 1, SKIP_NO_LABEL: 1}
    assert construction.skipped[SKIP_CHECKS] == ["p4"] and construction.skipped[SKIP_NO_LABEL] == ["p5"]
    # Round 0's first factual answer is ungrounded for p1-p3 (and everything of p4): regenerated once.
    assert report["qa"]["failed_checks"] == {"groundedness below 0.5": 3 + 16}
    assert report["qa"]["regenerated_slots"] == {"1": 3 + 8}
    assert report["qa"]["accepted"] == 24 and construction.qa.num_rows == 24
    panel = report["panel"]
    assert panel["qa_valid"] == {"ours": 1.0, "paper": 0.976, "n": 24}
    assert panel["labels_supported"]["paper"] == 0.918
    assert [j["qa_valid"] for j in panel["per_judge"]] == [1.0, 1.0, 0.0]
    assert [j["agreement_with_majority"] for j in panel["per_judge"]] == [1.0, 1.0, 0.0]
    assert panel["fleiss_kappa"]["qa_valid"] == pytest.approx(-0.5)  # always 2 yes / 1 no: below chance
    assert panel["fleiss_kappa"]["correctness"] is None  # unanimous
    assert set(report["tokens"]) == {"disease_label", "qa_generation", "judge"}
    assert (
        # 3 judges × (3 patients in round 0 + 3 with a regenerated QA in round 1); 50 prompt tokens each
        report["tokens"]["judge"]["requests"] == 3 * 6 and report["tokens"]["judge"]["prompt_tokens"] == 900
    )
    # Every QA reports its groundedness.
    accepted = [d for d in report["qa_details"] if d["accepted"]]
    assert len(accepted) == 24 and all(d["groundedness"] >= 0.5 for d in accepted)

    card = (folder / "README.md").read_text()
    for text in (
        "## LLM construction",
        "91.8%",
        "97.6%",
        "amnesia-qa-generation-v1",
        "amnesia-judge-v1",
        "`transformers:scripted`",
        SKIP_CHECKS,
        "Fleiss' κ",
    ):
        assert text in card
    assert json.loads((folder / CONSTRUCTION_FILE).read_text())["panel"] == panel
    build_file = json.loads((folder / "amnesia_build.json").read_text())
    assert build_file["parameters"]["prompt_versions"]["judge"] == "amnesia-judge-v1"


def test_panel_majority_rejects_and_regeneration_then_skip(tmp_path, notes_csv):
    # Judges 2 and 3 reject every round-0 factual question 2: the QA is regenerated and accepted.
    def rule(question):
        return "finding 2 " not in question

    backend = ScriptedBackend(ScriptedModel(judge_rules={1: rule, 2: rule}))
    _, construction = build(tmp_path, notes_csv, backend, judge_temperature=0.7)  # 3 sampling judges
    qa = construction.report["qa"]
    assert qa["rejected_by_panel"] == 3 and qa["accepted"] == 24

    # With no regeneration allowed, every patient is skipped: by the checks, or by the panel; and a build with
    # no patient left says so and writes nothing.
    def scripted(**options):
        return {SPEC: ScriptedBackend(ScriptedModel(judge_rules={1: rule, 2: rule}, **options))}

    strict = construct_records(
        notes_csv,
        config(tmp_path / "strict", max_regenerations=0, judge_temperature=0.7),
        backends=scripted(),
        progress=False,
    )
    assert strict.report["skips"] == {SKIP_CHECKS: 4, SKIP_NO_LABEL: 1}
    panel_only = construct_records(
        notes_csv,
        # its own cache: this model answers otherwise
        config(tmp_path / "panel", max_regenerations=0, judge_temperature=0.7),
        backends=scripted(first_round_bad=False),
        progress=False,
    )
    assert panel_only.report["skips"] == {SKIP_PANEL: 3, SKIP_CHECKS: 1, SKIP_NO_LABEL: 1}
    with pytest.raises(InputError, match=r"notes\.csv: no patient left after construction"):
        build(tmp_path, notes_csv, scripted()[SPEC], out="none", max_regenerations=0, judge_temperature=0.7)
    assert not (tmp_path / "none").exists()


def test_rerun_makes_zero_calls_and_writes_the_same_folder(tmp_path, notes_csv):
    backend = ScriptedBackend(ScriptedModel())
    folder, first = build(tmp_path, notes_csv, backend)
    files = folder_files(folder)
    assert first.calls == backend.calls > 0
    rerun_backend = ScriptedBackend(ScriptedModel())
    folder, rerun = build_amnesia_from_notes(
        tmp_path / "out", notes_csv, config(tmp_path), backends={SPEC: rerun_backend}, overwrite=True, **BUILD
    )
    assert rerun_backend.calls == 0 and rerun.calls == 0 and rerun.cache_hits > 0
    assert folder_files(folder) == files


def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path, notes_csv):
    reference, _ = build(tmp_path / "ref", notes_csv, ScriptedBackend(ScriptedModel()))
    expected = folder_files(reference)
    total = ScriptedBackend(ScriptedModel())
    build(tmp_path / "count", notes_csv, total)
    for stop_at in (3, total.calls // 2, total.calls - 1):
        work = tmp_path / f"kill-{stop_at}"
        with pytest.raises(KeyboardInterrupt):
            build(work, notes_csv, ScriptedBackend(ScriptedModel(), interrupt_after=stop_at))
        assert not (work / "out").exists()
        resumed_backend = ScriptedBackend(ScriptedModel())
        folder, resumed = build(work, notes_csv, resumed_backend)
        assert resumed_backend.calls == total.calls - stop_at  # nothing committed is asked again
        assert folder_files(folder) == expected


def test_sample_is_seeded(tmp_path, notes_csv):
    backend = ScriptedBackend(ScriptedModel(first_round_bad=False))
    first = construct_records(
        notes_csv, config(tmp_path, sample=3, seed=1), backends={SPEC: backend}, progress=False
    )
    again = construct_records(
        notes_csv, config(tmp_path, sample=3, seed=1), backends={SPEC: backend}, progress=False
    )
    assert first.report["notes"]["used"] == 3
    assert first.report["qa_details"] == again.report["qa_details"] and again.calls == 0


def test_bad_settings_fail_before_any_call(tmp_path, notes_csv):
    backend = ScriptedBackend(ScriptedModel())
    with pytest.raises(ConstructionError, match="unknown prompt"):
        build(tmp_path, notes_csv, backend, prompts={"jduge": "x.yaml"})
    with pytest.raises(ConstructionError, match="no such prompt file"):
        build(tmp_path, notes_csv, backend, prompts={"judge": tmp_path / "missing.yaml"})
    (tmp_path / "empty.csv").write_text("patient_uid,title,patient\np1,T,\n")
    with pytest.raises(Exception, match=r"empty\.csv, row 1, field 'patient'"):
        build(tmp_path, tmp_path / "empty.csv", backend)
    assert backend.calls == 0 and not (tmp_path / "llm.sqlite").exists()


def test_unreachable_judge_server_names_the_url_and_writes_nothing(tmp_path, notes_csv):
    from medunlearn.llm.server import free_loopback_port

    url = f"http://127.0.0.1:{free_loopback_port()}/v1"
    cfg = config(tmp_path, judges=(SPEC, f"openai:judge@{url}"))
    with pytest.raises(ServerUnreachableError, match=url.replace(".", r"\.")):
        build_amnesia_from_notes(
            tmp_path / "out", notes_csv, cfg, backends={SPEC: ScriptedBackend(ScriptedModel())}, **BUILD
        )
    assert not (tmp_path / "llm.sqlite").exists() and not (tmp_path / "out").exists()


def test_server_pipeline_never_writes_the_api_key(tmp_path, notes_csv, monkeypatch, caplog, capsys):
    key = "sk-test-NEVER-WRITE-ME-7f3a9c"
    monkeypatch.setenv("MEDUNLEARN_LLM_API_KEY", key)
    caplog.set_level(logging.DEBUG)
    server = ScriptedServer(ScriptedModel())
    try:
        cfg = ConstructionConfig(generator=server.spec, cache=tmp_path / "llm.sqlite", max_regenerations=1)
        folder, construction = build_amnesia_from_notes(tmp_path / "out", notes_csv, cfg, **BUILD)
        assert construction.report["notes"]["kept"] == 3 and construction.calls == server.calls
        folder, rerun = build_amnesia_from_notes(tmp_path / "out", notes_csv, cfg, overwrite=True, **BUILD)
        assert rerun.calls == 0
    finally:
        server.stop()
    assert server.authorizations and all(a == f"Bearer {key}" for a in server.authorizations)  # it was sent
    captured = capsys.readouterr()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.startswith("llm.sqlite") for p in written)
    for path in written:
        assert key.encode() not in path.read_bytes(), path
    assert key not in captured.out + captured.err + caplog.text
    assert "127.0.0.1" not in (folder / "README.md").read_text()  # the card names models, not machines


def test_cli_builds_prints_the_tables_and_reruns_with_zero_calls(tmp_path, notes_csv, capsys):
    from medunlearn.cli import main as cli_main

    server = ScriptedServer(ScriptedModel())
    out = tmp_path / "out"
    argv = ["amnesia", "build", "--out", str(out), "--source", "pmc-patients", "--notes", str(notes_csv)]
    argv += ["--generate", server.spec, "--max-regenerations", "1", "--disease-level", "cancer"]
    try:
        assert cli_main(argv) == 0
        first = capsys.readouterr().out
        calls = server.calls
        assert cli_main(argv + ["--overwrite"]) == 0
        rerun = capsys.readouterr().out
    finally:
        server.stop()
    assert "panel figures" in first and "91.8%" in first and "judges" in first and "tokens" in first
    assert f"{calls} LLM calls in this run" in first and "0 LLM calls in this run" in rerun
    assert server.calls == calls  # the rerun sent nothing
    assert (tmp_path / "out.llm-cache.sqlite").is_file()  # the default cache sits beside --out


def test_cli_keeps_the_report_of_a_build_with_no_patient_left(tmp_path, notes_csv, capsys):
    from medunlearn.cli import main as cli_main

    server = ScriptedServer(ScriptedModel())
    out = tmp_path / "out"
    argv = ["amnesia", "build", "--out", str(out), "--source", "pmc-patients", "--notes", str(notes_csv)]
    argv += ["--generate", server.spec, "--disease-level", "cancer"]
    report = tmp_path / "out.construction.json"
    try:
        assert cli_main(argv + ["--max-regenerations", "0"]) == 2  # every patient fails a check in round 0
        assert "no patient left after construction" in capsys.readouterr().err
        assert not out.exists()  # no folder, but the counts that say why
        assert json.loads(report.read_text())["skips"] == {SKIP_CHECKS: 4, SKIP_NO_LABEL: 1}
        assert cli_main(argv + ["--max-regenerations", "1"]) == 0
    finally:
        server.stop()
    assert out.is_dir() and not report.exists()  # the failed build's report does not outlive a good build


def test_cli_names_an_unreachable_url_and_writes_nothing(tmp_path, notes_csv, capsys):
    from medunlearn.cli import main as cli_main
    from medunlearn.llm.server import free_loopback_port

    url = f"http://127.0.0.1:{free_loopback_port()}/v1"
    out = tmp_path / "out"
    argv = ["amnesia", "build", "--out", str(out), "--source", "pmc-patients", "--notes", str(notes_csv)]
    assert cli_main(argv + ["--generate", f"openai:m@{url}"]) == 2
    assert url in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [notes_csv]
    assert cli_main(argv + ["--generate", "openai:m", "--qa", "qa.jsonl"]) == 2
    assert "no --qa" in capsys.readouterr().err


def test_a_server_gone_mid_run_stops_the_build_and_a_rerun_resumes(tmp_path, notes_csv):
    reference, _ = build(tmp_path / "ref", notes_csv, ScriptedBackend(ScriptedModel()))
    with pytest.raises(IncompleteRunError, match="rerun the same command to resume"):
        build(tmp_path, notes_csv, ScriptedBackend(ScriptedModel(), lost_after=8))
    assert not (tmp_path / "out").exists()  # lost answers are never counted as the model's failures
    resumed_backend = ScriptedBackend(ScriptedModel())
    folder, _ = build(tmp_path, notes_csv, resumed_backend)
    assert folder_files(folder) == folder_files(reference)


def test_the_last_round_judges_no_patient_already_lost(tmp_path, notes_csv):
    # Round 0 is the last round here, and every labelled patient's first factual answer fails the checks: the
    # patients are lost whatever the panel says, so no judge is asked, and the skip names the checks.
    backend = ScriptedBackend(ScriptedModel())
    strict = construct_records(
        notes_csv, config(tmp_path, max_regenerations=0), backends={SPEC: backend}, progress=False
    )
    qa = strict.report["qa"]
    assert strict.report["tokens"]["judge"]["requests"] == 0 and qa["judged"] == 0
    # p1-p3 pass 7 of 8 checks each; the hopeless p4 passes none.
    assert qa["passed_checks"] == qa["not_judged_patient_lost"] == 21
    assert strict.report["skips"] == {SKIP_CHECKS: 4, SKIP_NO_LABEL: 1}
    # With one regeneration, round 0 is judged (its failed slot can still be written again) and round 1
    # judges the three patients whose regenerated answer passed, not the hopeless one. The default panel,
    # three greedy copies of the generator, is one distinct judge: one request per patient and round.
    regenerated = construct_records(
        notes_csv,
        config(tmp_path / "one", max_regenerations=1),
        backends={SPEC: ScriptedBackend(ScriptedModel())},
        progress=False,
    )
    assert regenerated.report["tokens"]["judge"]["requests"] == 3 + 3
    assert regenerated.report["qa"]["not_judged_patient_lost"] == 0
    # judge_all asks the panel about every QA that passed the checks: p1-p3's 7 each, by the judge; the kept
    # patients are the same (none), and the round-0 judge requests are those a run with a regeneration sends.
    judged_all = construct_records(
        notes_csv,
        config(tmp_path / "one", max_regenerations=0, judge_all=True),
        backends={SPEC: ScriptedBackend(ScriptedModel())},
        progress=False,
    )
    assert judged_all.report["tokens"]["judge"]["requests"] == 3
    assert judged_all.report["qa"]["judged"] == 21 and judged_all.report["qa"]["not_judged_patient_lost"] == 0
    assert judged_all.report["skips"] == strict.report["skips"] and judged_all.cache_hits > 0
    assert judged_all.calls == 0  # every label, QA and round-0 judge answer was cached by the run above


def test_server_requests_get_the_configured_time_out_and_concurrency():
    from medunlearn.amnesia.sources.llm_built.stage_chats import backend_options as _backend_options

    spec = "openai:m@http://127.0.0.1:9/v1"
    options = _backend_options(spec, ConstructionConfig(generator=spec, concurrency=48, request_timeout_s=42))
    assert (options["config"].concurrency, options["config"].timeout_s) == (48, 42)
    assert _backend_options(SPEC, ConstructionConfig(generator=SPEC)) == {}  # local: no server settings
    with pytest.raises(ConstructionError, match="request_timeout_s must be positive"):
        ConstructionConfig(generator=spec, request_timeout_s=0).check()


# The report form of one try, as the construction wrote it before attempts were typed: the keys an attempt
# reached, in this order (an independent restatement of amnesia_construction.json's ``tries`` format).
TRY_KEYS = ("round", "groundedness", "checks_failed", "judged", "votes", "valid", "error")


def test_an_attempt_is_written_in_the_report_format():
    from medunlearn.amnesia.sources.llm_built import Attempt

    rating = {"clarity": True, "correctness": False, "derivability": True, "clinical_significance": True}
    qa = {"question": "Q?", "answer": "A"}
    cases = [
        (
            Attempt(round=1, qa=None, error="no schema-valid answer"),
            {"round": 1, "error": "no schema-valid answer"},
        ),
        (
            Attempt(round=0, qa=qa, groundedness=0.25, checks_failed=["groundedness below 0.5"]),
            {"round": 0, "groundedness": 0.25, "checks_failed": ["groundedness below 0.5"]},
        ),
        (
            Attempt(round=2, qa=qa, groundedness=1.0, checks_failed=[], judged=False),
            {"round": 2, "groundedness": 1.0, "checks_failed": [], "judged": False},
        ),
        (
            Attempt(round=0, qa=qa, groundedness=0.5, checks_failed=[], votes=[rating, None], valid=False),
            {"round": 0, "groundedness": 0.5, "checks_failed": [], "votes": [rating, None], "valid": False},
        ),
    ]
    for attempt, expected in cases:
        summary = attempt.summary()
        assert json.dumps(summary) == json.dumps(expected)  # same keys, same order: same bytes on disk
        assert list(summary) == [key for key in TRY_KEYS if key in expected]
        assert Attempt.from_summary(summary) == Attempt(**{**vars(attempt), "qa": None})


def test_the_written_tries_round_trip_through_attempts(tmp_path, notes_csv):
    from medunlearn.amnesia.sources.llm_built import Attempt

    # Judge 2 rejects round 0's second factual question: generation failures aside, every kind of try
    # (failed checks, rejected, accepted, regenerated) is in the file.
    backend = ScriptedBackend(ScriptedModel(judge_rules={1: lambda q: "finding 2 " not in q}))
    folder, construction = build(tmp_path, notes_csv, backend, judge_temperature=0.7, judges=(SPEC, SPEC))
    text = (folder / CONSTRUCTION_FILE).read_text()
    report = json.loads(text)
    tries = [attempt for detail in report["qa_details"] for attempt in detail["tries"]]
    assert {key for attempt in tries for key in attempt} == {
        "round",
        "groundedness",
        "checks_failed",
        "votes",
        "valid",
    }
    assert any(not attempt["valid"] for attempt in tries if "valid" in attempt)
    # Read back into attempts and written again as the build writes the file: the same bytes.
    for detail in report["qa_details"]:
        detail["tries"] = [Attempt.from_summary(attempt).summary() for attempt in detail["tries"]]
    assert json.dumps(report, indent=2, sort_keys=True) + "\n" == text
    assert report == construction.report
    # The lost patient's unjudged tries and a failed generation round-trip too.
    strict = construct_records(
        notes_csv,
        config(tmp_path / "strict", max_regenerations=0),
        backends={SPEC: ScriptedBackend(ScriptedModel())},
        progress=False,
    )
    unjudged = [t for d in strict.report["qa_details"] for t in d["tries"] if "judged" in t]
    assert unjudged and all(Attempt.from_summary(t).summary() == t for t in unjudged)
