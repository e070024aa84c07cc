"""The one async client for OpenAI-compatible servers (medunlearn.llm.openai_client): the key comes from the
environment only, the settings never hold it, and calls in flight stay within the limit; the evaluation's vLLM
engine goes through it too (against the scripted server of conftest.py)."""

from __future__ import annotations

import asyncio

import pytest

from medunlearn.llm.openai_client import NO_KEY, BoundedClient, ClientSettings, api_key_from, bounded_client

CANARY_KEY = "sk-medunlearn-canary-0b5e2d7a91"


def test_the_first_set_variable_gives_the_key_and_none_set_gives_the_placeholder(monkeypatch):
    monkeypatch.delenv("MEDUNLEARN_TEST_KEY_A", raising=False)
    monkeypatch.setenv("MEDUNLEARN_TEST_KEY_B", "")  # set but empty: skipped, as an unset one
    monkeypatch.setenv("MEDUNLEARN_TEST_KEY_C", CANARY_KEY)
    assert api_key_from(
        ("MEDUNLEARN_TEST_KEY_A", None, "MEDUNLEARN_TEST_KEY_B", "MEDUNLEARN_TEST_KEY_C")
    ) == (CANARY_KEY)
    assert api_key_from(("MEDUNLEARN_TEST_KEY_A", "MEDUNLEARN_TEST_KEY_B")) == NO_KEY


def test_the_client_gets_the_settings_and_the_key_which_the_settings_never_show(monkeypatch):
    monkeypatch.setenv("MEDUNLEARN_TEST_KEY", CANARY_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-named-so-not-read")
    settings = ClientSettings(
        "http://127.0.0.1:9/v1", timeout_s=12.5, max_retries=3, key_variables=("MEDUNLEARN_TEST_KEY",)
    )
    client = settings.client()
    assert client.api_key == CANARY_KEY and client.max_retries == 3 and client.timeout == 12.5
    assert str(client.base_url) == "http://127.0.0.1:9/v1/"
    assert CANARY_KEY not in repr(settings) and "MEDUNLEARN_TEST_KEY" in repr(settings)
    # No variable named (the vLLM engine's servers): the placeholder, whatever the environment holds.
    assert ClientSettings("http://127.0.0.1:9/v1", 1.0, 0).client().api_key == NO_KEY


def test_limited_calls_never_exceed_the_concurrency_and_each_returns_its_own_result():
    async def run() -> tuple[list[int], int]:
        bounded = BoundedClient(client=None, concurrency=3)
        running, most = 0, 0

        async def call(value: int) -> int:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)
            running -= 1
            return value * 10

        results = await asyncio.gather(*(bounded.limited(lambda v=v: call(v)) for v in range(10)))
        return results, most

    results, most = asyncio.run(run())
    assert results == [v * 10 for v in range(10)] and most == 3


def test_a_backend_at_a_server_sends_its_key_and_keeps_concurrency(fake_server, monkeypatch):
    from medunlearn.llm import BulkChat, ChatRequest
    from medunlearn.llm.openai_backend import OpenAIServerBackend, ServerConfig

    monkeypatch.setenv("MEDUNLEARN_LLM_API_KEY", CANARY_KEY)
    server = fake_server(delay_s=0.05)
    backend = OpenAIServerBackend(server.model, ServerConfig(base_url=server.base_url, concurrency=2))
    requests = [ChatRequest([{"role": "user", "content": str(i)}], max_tokens=4) for i in range(6)]
    BulkChat(backend, show_progress=False).complete(requests)
    assert server.state.max_in_flight == 2
    assert server.state.authorizations == [f"Bearer {CANARY_KEY}"] * 6


def test_the_vllm_engine_sends_no_key_and_keeps_max_in_flight(fake_server, monkeypatch, tmp_path):
    """A vLLM server this run started or named gets the placeholder, never a key of the environment; the
    engine's requests stay within ``max_in_flight`` and come back in order, cut at the end-of-turn id."""
    from medunlearn.evaluation.engines import GreedySettings, VLLMEngine

    monkeypatch.setenv("MEDUNLEARN_LLM_API_KEY", CANARY_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)

    def reply(call, body):
        tokens = [token + 100 for token in body["prompt"]] + [2, 7]  # 2 is the end-of-turn id
        choice = {"index": 0, "text": "", "finish_reason": "stop", "token_ids": tokens}
        return (
            200,
            {},
            {"id": "c", "object": "text_completion", "created": 0, "model": "m", "choices": [choice]},
        )

    server = fake_server(reply=reply, delay_s=0.05)
    engine = VLLMEngine(tmp_path, url=server.base_url, served_model="m", max_in_flight=2)
    engine._checked_url = True  # the served-root check has its own tests (test_vllm_engine_checks.py)
    batches = [[[1, 2], [3]], [[4], [5], [6]]]
    settings = GreedySettings(pad_token_id=0, eos_token_ids=[2], max_new_tokens=4)
    assert list(engine.generate(batches, settings)) == [[[101, 102], [103]], [[104], [105], [106]]]
    assert server.state.max_in_flight == 2
    assert server.state.authorizations == [f"Bearer {NO_KEY}"] * 5
    assert {body["max_tokens"] for body in server.state.bodies} == {4}


@pytest.mark.parametrize("concurrency", [1, 4])
def test_bounded_client_closes_its_client(concurrency):
    async def run():
        async with bounded_client(ClientSettings("http://127.0.0.1:9/v1", 1.0, 0, concurrency)) as bounded:
            client = bounded.client
            assert not client.is_closed()
        return client

    assert asyncio.run(run()).is_closed()
