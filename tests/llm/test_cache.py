"""The SQLite result cache: round trips, WAL, usage, and reads that create nothing."""

from __future__ import annotations

import sqlite3

from medunlearn.llm import Attempt, BackendIdentity, ChatRequest, ChatResult, ResultCache, request_key

IDENTITY = BackendIdentity("openai", "m")


def test_results_round_trip_and_are_marked_cached(tmp_path):
    cache = ResultCache(tmp_path / "c.sqlite")
    request = ChatRequest(
        [{"role": "user", "content": "q"}], json_schema={"type": "object"}, prompt_version="v1"
    )
    result = ChatResult('{"a": 1}', parsed={"a": 1}, attempts=(Attempt(3, 0.0, "stop", 11, 4),))
    key = request_key(IDENTITY, request)
    cache.open_for_writing()
    cache.put_many(IDENTITY, [(key, request, result)])
    cache.close()
    found = ResultCache(tmp_path / "c.sqlite").lookup([key, "absent"])
    assert list(found) == [key] and found[key] == result and found[key].cached


def test_wal_mode_and_usage_by_prompt_version(tmp_path):
    cache = ResultCache(tmp_path / "c.sqlite")
    cache.open_for_writing()
    rows = []
    for index, version in enumerate(["label-v1", "label-v1", "qa-v2"]):
        request = ChatRequest([{"role": "user", "content": str(index)}], prompt_version=version)
        result = ChatResult(
            "x", attempts=(Attempt(0, 0.0, "stop", 10, 2),) * (index + 1), error="bad" if index == 2 else None
        )
        rows.append((request_key(IDENTITY, request), request, result))
    cache.put_many(IDENTITY, rows)
    assert cache._connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    usage = {row["prompt_version"]: row for row in cache.usage()}
    assert usage["label-v1"]["requests"] == 2 and usage["label-v1"]["prompt_tokens"] == 30
    assert usage["qa-v2"]["failed"] == 1 and usage["qa-v2"]["attempts"] == 3 and len(cache) == 3


def test_lookups_on_a_missing_file_create_nothing(tmp_path):
    cache = ResultCache(tmp_path / "sub" / "c.sqlite")
    assert cache.lookup(["k"]) == {} and len(cache) == 0 and cache.usage() == []
    assert not (tmp_path / "sub").exists()


def test_the_key_covers_backend_model_request_and_prompt_version():
    request = ChatRequest([{"role": "user", "content": "q"}])
    keys = {
        request_key(IDENTITY, request),
        request_key(BackendIdentity("transformers", "m"), request),
        request_key(BackendIdentity("openai", "other"), request),
        request_key(IDENTITY, ChatRequest([{"role": "user", "content": "q"}], seed=1)),
        request_key(IDENTITY, ChatRequest([{"role": "user", "content": "q"}], prompt_version="v2")),
        request_key(
            IDENTITY, ChatRequest([{"role": "user", "content": "q"}], json_schema={"type": "string"})
        ),
    }
    assert len(keys) == 6


def test_committed_rows_are_visible_to_another_process_connection(tmp_path):
    """Each put_many commits: another connection (a resumed run) sees the rows at once."""
    cache = ResultCache(tmp_path / "c.sqlite")
    cache.open_for_writing()
    requests = [ChatRequest([{"role": "user", "content": str(i)}]) for i in range(3)]
    cache.put_many(IDENTITY, [(request_key(IDENTITY, r), r, ChatResult("x")) for r in requests])
    reader = sqlite3.connect(tmp_path / "c.sqlite")
    assert reader.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 3
