"""What the cache keys a server's answers on (what it serves, not only the name it serves it under), and which
retry policy a stored result is served to: two scripted OpenAI-compatible servers on loopback."""

from __future__ import annotations

import json

from medunlearn.llm import BackendIdentity, BulkChat, ChatRequest, ChatResult, ResultCache, RetryPolicy
from medunlearn.llm.cache import request_key
from medunlearn.llm.interface import Attempt
from medunlearn.llm.openai_backend import OpenAIServerBackend, ServerConfig

SCHEMA = {"type": "object", "properties": {"label": {"enum": ["yes", "no"]}}, "required": ["label"]}


def requests_for(*texts: str, **settings) -> list[ChatRequest]:
    return [ChatRequest([{"role": "user", "content": text}], **settings) for text in texts]


def chat_for(server, cache, policy: RetryPolicy | None = None) -> BulkChat:
    backend = OpenAIServerBackend(server.model, ServerConfig(base_url=server.base_url, max_retries=0))
    return BulkChat(backend, cache=cache, policy=policy, show_progress=False)


def served_as(fake_server, who: str, **entry):
    """A server whose answers start with its own name ``who``; ``entry``: its ``/models`` entry's fields."""

    def reply(call, body):
        return 200, {}, fake_server.completion_body(f"{who}: {body['messages'][-1]['content']}")

    return fake_server(reply, models=[{"id": fake_server.model, "object": "model", **entry}])


def texts(results) -> list[str]:
    return [result.text for result in results]


def test_two_servers_serving_different_weights_under_one_name_share_no_answer(fake_server, tmp_path):
    cache = tmp_path / "llm.sqlite"
    a = served_as(fake_server, "A", root="/models/a")
    b = served_as(fake_server, "B", root="/models/b")
    assert texts(chat_for(a, cache).complete(requests_for("q1", "q2"))) == ["A: q1", "A: q2"]
    on_b = chat_for(b, cache)
    assert texts(on_b.complete(requests_for("q1", "q2"))) == ["B: q1", "B: q2"]
    assert b.state.calls == 2 and on_b.stats.cache_hits == 0
    again_on_a = chat_for(a, cache)  # each server's answers stay its own, both cached
    assert texts(again_on_a.complete(requests_for("q1", "q2"))) == ["A: q1", "A: q2"]
    assert a.state.calls == 2 and again_on_a.stats.cache_hits == 2


def test_the_same_weights_on_another_port_are_served_from_the_cache(fake_server, tmp_path):
    cache = tmp_path / "llm.sqlite"
    first = served_as(fake_server, "A", root="/models/a")
    restarted = served_as(fake_server, "A-restarted", root="/models/a")  # a new port, the same root
    chat_for(first, cache).complete(requests_for("q"))
    rerun = chat_for(restarted, cache)
    assert texts(rerun.complete(requests_for("q"))) == ["A: q"]
    assert restarted.state.calls == 0 and rerun.stats.cache_hits == 1


def test_servers_that_list_no_root_are_told_apart_by_their_url(fake_server, tmp_path):
    cache = tmp_path / "llm.sqlite"
    a, b = served_as(fake_server, "A"), served_as(fake_server, "B")
    assert texts(chat_for(a, cache).complete(requests_for("q"))) == ["A: q"]
    assert texts(chat_for(b, cache).complete(requests_for("q"))) == ["B: q"]
    assert b.state.calls == 1


def test_a_root_folder_retrained_in_place_is_new_weights(fake_server, tmp_path):
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights v1")
    server = served_as(fake_server, "A", root=str(folder))
    cache = tmp_path / "llm.sqlite"
    chat_for(server, cache).complete(requests_for("q"))
    (folder / "model.safetensors").write_bytes(b"weights v2, retrained")
    rerun = chat_for(server, cache)
    rerun.complete(requests_for("q"))
    assert server.state.calls == 2 and rerun.stats.cache_hits == 0


def test_answers_cached_by_older_code_under_the_bare_name_are_not_served(fake_server, tmp_path):
    """Older versions keyed a server's answers on ("openai", served name) alone: such rows simply miss."""
    server = served_as(fake_server, "A", root="/models/a")
    (request,) = requests_for("q")
    old_identity = BackendIdentity("openai", server.model)
    cache = ResultCache(tmp_path / "llm.sqlite")
    cache.open_for_writing()
    stale = ChatResult("answer of other weights", attempts=(Attempt(0, 0.0, "stop"),))
    cache.put_many(old_identity, [(request_key(old_identity, request), request, stale)])
    cache.close()
    assert texts(chat_for(server, tmp_path / "llm.sqlite").complete([request])) == ["A: q"]
    assert server.state.calls == 1


def test_a_failure_stored_under_one_attempt_is_asked_again_by_a_run_allowed_three(fake_server, tmp_path):
    def reply(call, body):
        question = body["messages"][-1]["content"]
        first_attempt = body["seed"] == 0
        text = "not json" if question == "hard" and first_attempt else json.dumps({"label": "yes"})
        return 200, {}, fake_server.completion_body(text)

    server = fake_server(reply, models=[{"id": fake_server.model, "root": "/models/a"}])
    cache = tmp_path / "llm.sqlite"
    requests = requests_for("hard", "easy", json_schema=SCHEMA)
    hard, easy = chat_for(server, cache, RetryPolicy(max_attempts=1)).complete(requests)
    assert not hard.ok and easy.ok and len(hard.attempts) == 1
    allowed_three = chat_for(server, cache, RetryPolicy(max_attempts=3))
    hard, easy = allowed_three.complete(requests)
    assert hard.ok and hard.parsed == {"label": "yes"} and [a.seed for a in hard.attempts] == [0, 1]
    # The first-attempt success is what any policy makes of its request: served from the cache.
    assert easy.cached and allowed_three.stats.cache_hits == 1 and allowed_three.stats.calls == 2
    rerun = chat_for(server, cache, RetryPolicy(max_attempts=3))
    rerun.complete(requests)
    assert rerun.stats.calls == 0 and rerun.stats.cache_hits == 2
    # A success at attempt 2 was made at the retry temperature: another one asks again.
    other_temperature = chat_for(server, cache, RetryPolicy(max_attempts=3, retry_temperature=0.3))
    hard, _ = other_temperature.complete(requests)
    assert other_temperature.stats.cache_hits == 1 and hard.attempts[1].temperature == 0.3
