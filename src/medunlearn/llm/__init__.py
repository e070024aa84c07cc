"""Bulk chat completions, reproducibly: two backends, JSON-schema answers, a persistent SQLite cache.

>>> from medunlearn.llm import BulkChat, ChatRequest
>>> chat = BulkChat.from_spec(  # doctest: +SKIP
...     "openai:smollm2-135m@http://127.0.0.1:8000/v1", cache="llm.sqlite"
... )
>>> results = chat.complete(  # doctest: +SKIP
...     [ChatRequest([{"role": "user", "content": "Hi"}], max_tokens=16)]
... )

See ``docs/llm.md``. This package imports nothing from the AMNESIA or BioDivergence pipelines, which build on
it.
"""

from medunlearn.llm.cache import BackendIdentity, ResultCache, request_key
from medunlearn.llm.errors import (
    BackendSpecError,
    LLMError,
    MissingDependencyError,
    MissingVLLMError,
    RequestError,
    ServerAuthError,
    ServerStartError,
    ServerUnreachableError,
)
from medunlearn.llm.interface import Attempt, ChatRequest, ChatResult, UsageSummary, summarize_usage
from medunlearn.llm.retry import RetryPolicy
from medunlearn.llm.runner import BulkChat, RunStats, cache_identity, make_backend
from medunlearn.llm.spec import BackendSpec, parse_spec

__all__ = [
    "Attempt",
    "BackendIdentity",
    "BackendSpec",
    "BackendSpecError",
    "BulkChat",
    "ChatRequest",
    "ChatResult",
    "LLMError",
    "MissingDependencyError",
    "MissingVLLMError",
    "RequestError",
    "ResultCache",
    "RetryPolicy",
    "RunStats",
    "ServerAuthError",
    "ServerStartError",
    "ServerUnreachableError",
    "UsageSummary",
    "cache_identity",
    "make_backend",
    "parse_spec",
    "request_key",
    "summarize_usage",
]
