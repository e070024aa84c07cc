"""The small pieces of medunlearn.llm: spec strings, schema checks, the attempt loop, usage, the import
boundary."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys

import pytest

from medunlearn.errors import MedunlearnError
from medunlearn.llm import (
    BackendSpec,
    BackendSpecError,
    BulkChat,
    ChatRequest,
    RequestError,
    RetryPolicy,
    parse_spec,
)
from medunlearn.llm.retry import Completion, resolve_batch

MODULES = [
    "medunlearn.llm.interface",
    "medunlearn.llm.schema",
    "medunlearn.llm.spec",
    "medunlearn.llm.retry",
    "medunlearn.llm.cache",
    "medunlearn.llm.runner",
    "medunlearn.llm.sync",
    "medunlearn.llm.transformers_backend",
    "medunlearn.llm.openai_backend",
    "medunlearn.llm.server",
]
SCHEMA = {"type": "object", "properties": {"label": {"enum": ["yes", "no"]}}, "required": ["label"]}


@pytest.mark.parametrize("module", MODULES)
def test_module_doctests_pass(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("transformers:smollm2-135m", BackendSpec("transformers", "smollm2-135m")),
        ("transformers:/models/ckpt", BackendSpec("transformers", "/models/ckpt")),
        ("openai:gpt-4o-mini", BackendSpec("openai", "gpt-4o-mini")),
        (
            "openai:org/model@https://api.example.org/v1/",
            BackendSpec("openai", "org/model", "https://api.example.org/v1"),
        ),
        (
            "openai:llama3:8b@http://localhost:11434/v1",
            BackendSpec("openai", "llama3:8b", "http://localhost:11434/v1"),
        ),
    ],
)
def test_spec_strings_parse(spec, expected):
    assert parse_spec(spec) == expected


@pytest.mark.parametrize("spec", ["smollm2", "nope:model", "openai:", "openai:model@ftp://host/v1"])
def test_bad_spec_strings_say_what_is_expected(spec):
    with pytest.raises(BackendSpecError, match="LLM spec") as caught:
        parse_spec(spec)
    assert isinstance(caught.value, MedunlearnError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "request_, message",
    [
        (ChatRequest([]), "request 0: messages is empty"),
        (ChatRequest([{"content": "x"}]), "message 0"),
        (ChatRequest([{"role": "user", "content": "x"}], max_tokens=0), "max_tokens"),
        (
            ChatRequest([{"role": "user", "content": "x"}], json_schema={"type": "objekt"}),
            "not a valid JSON schema",
        ),
    ],
)
def test_bad_requests_fail_before_any_call(request_, message):
    from medunlearn.llm.runner import EchoBackend

    with pytest.raises(RequestError, match=message):
        BulkChat(EchoBackend(), show_progress=False).complete([request_])


def scripted(answers):
    """A batch generator answering from ``answers`` in order, one per request attempt."""
    queue = list(answers)

    def generate(requests, sampling):
        return [
            Completion(text=queue.pop(0), finish_reason="stop", prompt_tokens=5, completion_tokens=2)
            for _ in requests
        ]

    return generate


def test_invalid_answers_are_retried_with_new_seeds_then_reported_failed():
    requests = [
        ChatRequest([{"role": "user", "content": "q"}], seed=10, json_schema=SCHEMA) for _ in range(2)
    ]
    # Request 0: invalid, then valid. Request 1: invalid three times.
    results = resolve_batch(
        requests,
        scripted(['{"label": "maybe"}', "nope", '{"label": "no"}', "{", "{"]),
        RetryPolicy(max_attempts=3, retry_temperature=0.5),
    )
    assert results[0].ok and results[0].parsed == {"label": "no"}
    assert [(a.seed, a.temperature) for a in results[0].attempts] == [(10, 0.0), (11, 0.5)]
    assert not results[1].ok and results[1].parsed is None and len(results[1].attempts) == 3
    assert "after 3 attempt(s)" in results[1].error and "not valid JSON" in results[1].error
    assert results[1].prompt_tokens == 15 and results[1].completion_tokens == 6  # every attempt counts


def test_answers_without_schema_are_never_retried():
    results = resolve_batch(
        [ChatRequest([{"role": "user", "content": "q"}])], scripted(["anything"]), RetryPolicy()
    )
    assert results[0].ok and len(results[0].attempts) == 1 and results[0].parsed is None


def test_identical_requests_are_made_once():
    from medunlearn.llm.runner import EchoBackend

    chat = BulkChat(EchoBackend(), show_progress=False)
    request = ChatRequest([{"role": "user", "content": "same"}])
    results = chat.complete([request, request, ChatRequest([{"role": "user", "content": "other"}])])
    assert [r.text for r in results] == ["same", "same", "other"] and chat.stats.calls == 2


def test_the_llm_package_imports_no_pipeline_package():
    """medunlearn.llm sits below amnesia/biodivergence/evaluation/unlearn (docs/contributing.md, "Layers"):
    importing all of it pulls none of them in."""
    code = (
        "import sys, importlib\n"
        f"for m in {MODULES!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[:2] in "
        "[['medunlearn', p] for p in ('amnesia', 'biodivergence', 'evaluation', 'unlearn', 'tofu', 'cli')])\n"
        "print(bad); assert not bad, bad\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr
