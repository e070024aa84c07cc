"""The OpenAI-compatible server backend against a scripted server on loopback (fast, deterministic)."""

from __future__ import annotations

import json
import logging
import socket

import pytest

from medunlearn.llm import BulkChat, ChatRequest, RetryPolicy, ServerUnreachableError
from medunlearn.llm.openai_backend import OpenAIServerBackend, ServerConfig

SCHEMA = {"type": "object", "properties": {"label": {"enum": ["yes", "no"]}}, "required": ["label"]}
CANARY_KEY = "sk-medunlearn-canary-7f3a9c1e5d"


def requests_for(*texts: str, **settings) -> list[ChatRequest]:
    return [ChatRequest([{"role": "user", "content": text}], **settings) for text in texts]


def chat_for(server, tmp_path=None, **config) -> BulkChat:
    backend = OpenAIServerBackend(server.model, ServerConfig(base_url=server.base_url, **config))
    return BulkChat(backend, cache=tmp_path / "llm.sqlite" if tmp_path else None, show_progress=False)


def test_answers_and_token_counts_come_back_in_order(fake_server):
    server = fake_server()
    results = chat_for(server).complete(requests_for("a", "b", "c", max_tokens=5, seed=4))
    assert [r.text for r in results] == [f"echo {t} seed=4 t=0.0" for t in "abc"]
    assert all(
        r.prompt_tokens == 7 and r.completion_tokens == 4 and r.finish_reason == "stop" for r in results
    )
    body = server.state.bodies[0]
    assert body["model"] == fake_server.model and body["max_tokens"] == 5 and "response_format" not in body


def test_a_429_then_a_200_is_retried_by_the_client(fake_server):
    def reply(call, body):
        if call == 1:
            return 429, {"retry-after-ms": "10"}, {"error": {"message": "rate limited"}}
        return 200, {}, fake_server.completion_body(fake_server.echo_answer(body))

    server = fake_server(reply)
    chat = chat_for(server)
    (result,) = chat.complete(requests_for("q"))
    assert result.ok and server.state.calls == 2
    assert chat.stats.calls == 1  # one attempt; the transport retry happened inside the client


def test_a_server_that_keeps_failing_gives_a_failed_uncached_result_and_the_run_goes_on(
    fake_server, tmp_path
):
    def reply(call, body):
        if "bad" in body["messages"][-1]["content"]:
            return 503, {"retry-after-ms": "5"}, {"error": {"message": "overloaded"}}
        return 200, {}, fake_server.completion_body(fake_server.echo_answer(body))

    server = fake_server(reply)
    chat = chat_for(server, tmp_path, max_retries=2)
    bad, good = chat.complete(requests_for("bad", "good"))
    assert good.ok and not bad.ok and bad.transient and bad.finish_reason == "error"
    assert "HTTP 503" in bad.error and server.base_url in bad.error
    assert len(chat.cache) == 1  # the transport failure is not cached: a rerun tries it again
    rerun = chat_for(server, tmp_path, max_retries=0)
    rerun.complete(requests_for("bad", "good"))
    assert rerun.stats.cache_hits == 1 and rerun.stats.calls == 1


def test_a_schema_is_sent_as_response_format_and_invalid_answers_are_retried_with_new_seeds(fake_server):
    answers = iter(['{"label": "perhaps"}', "not json", '{"label": "yes"}'])

    server = fake_server(lambda call, body: (200, {}, fake_server.completion_body(next(answers))))
    chat = chat_for(server)
    chat.policy = RetryPolicy(max_attempts=3, retry_temperature=0.6)
    (result,) = chat.complete(requests_for("q", json_schema=SCHEMA, schema_name="answer", seed=20))
    assert result.ok and result.parsed == {"label": "yes"}
    assert [(a.seed, a.temperature) for a in result.attempts] == [(20, 0.0), (21, 0.6), (22, 0.6)]
    assert [(b["seed"], b["temperature"]) for b in server.state.bodies] == [(20, 0.0), (21, 0.6), (22, 0.6)]
    assert server.state.bodies[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
    }


def test_concurrency_is_bounded(fake_server):
    server = fake_server(delay_s=0.05)
    chat_for(server, concurrency=3).complete(requests_for(*[str(i) for i in range(12)]))
    assert server.state.calls == 12 and 2 <= server.state.max_in_flight <= 3


def test_a_rerun_makes_zero_calls(fake_server, tmp_path):
    server = fake_server()
    requests = requests_for("a", "b", json_schema=None) + requests_for("c", json_schema={"type": "string"})
    server.state.reply = lambda call, body: (
        200,
        {},
        fake_server.completion_body(json.dumps(fake_server.echo_answer(body))),
    )
    first = chat_for(server, tmp_path).complete(requests)
    calls = server.state.calls
    rerun = chat_for(server, tmp_path)
    assert rerun.complete(requests) == first and server.state.calls == calls
    assert rerun.stats.calls == 0 and rerun.stats.cache_hits == 3


def test_an_unreachable_server_is_named_and_nothing_is_written(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    chat = BulkChat.from_spec(f"openai:m@{url}", cache=tmp_path / "out" / "llm.sqlite", show_progress=False)
    with pytest.raises(ServerUnreachableError, match=f"cannot reach the LLM server at {url}"):
        chat.complete(requests_for("q"))
    assert not (tmp_path / "out").exists()


def test_the_api_key_is_sent_but_never_logged_printed_or_cached(
    fake_server, tmp_path, monkeypatch, caplog, capsys
):
    monkeypatch.setenv("MEDUNLEARN_LLM_API_KEY", CANARY_KEY)
    caplog.set_level(logging.DEBUG)
    server = fake_server(
        lambda call, body: (
            (500, {"retry-after-ms": "5"}, {"error": {"message": "boom"}})
            if call == 1
            else (200, {}, fake_server.completion_body(fake_server.echo_answer(body)))
        )
    )
    chat = BulkChat.from_spec(server.spec, cache=tmp_path / "llm.sqlite", show_progress=True)
    results = chat.complete(requests_for("a", "b", json_schema=None))
    print(results, chat.backend.config, chat.backend.__dict__)
    assert server.state.authorizations and all(
        a == f"Bearer {CANARY_KEY}" for a in server.state.authorizations
    )
    captured = capsys.readouterr()
    written = b"".join(path.read_bytes() for path in tmp_path.rglob("*") if path.is_file())
    assert written and caplog.text and captured.out
    for where, text in [
        ("log", caplog.text),
        ("stdout", captured.out),
        ("stderr", captured.err),
        ("cache files", written.decode(errors="replace")),
        ("results", repr(results)),
    ]:
        assert CANARY_KEY not in text, f"the API key leaked into the {where}"


def test_the_fallback_key_variable_is_used_when_the_first_is_unset(fake_server, monkeypatch):
    monkeypatch.delenv("MEDUNLEARN_LLM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    server = fake_server()
    chat_for(server).complete(requests_for("q"))
    assert server.state.authorizations == [f"Bearer {CANARY_KEY}"]


def test_a_server_lost_mid_run_fails_the_queued_requests_at_once(tmp_path):
    """Once a call has lost the connection after the client's retries, the requests still queued are not sent
    (each would wait through the same backoff); all come back failed and uncached, none raises."""
    from medunlearn.llm.interface import ChatResult

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    backend = OpenAIServerBackend("m", ServerConfig(base_url=url, concurrency=1, max_retries=0))
    collected: list[tuple[int, ChatResult]] = []
    backend.run(requests_for("a", "b", "c"), [0, 1, 2], RetryPolicy(), collected.extend)
    results = [result for _, result in sorted(collected)]
    assert all(not r.ok and r.transient for r in results)
    assert url in results[0].error and "APIConnectionError" in results[0].error
    assert all("not sent: the server stopped answering" in r.error for r in results[1:])
