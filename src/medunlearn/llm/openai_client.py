"""The one async client for OpenAI-compatible servers (vLLM, TGI, llama.cpp, Ollama, a hosted API) [ours].

An ``openai.AsyncOpenAI`` with the caller's time-out and transport retries (the client retries
408/409/429/5xx, time-outs and lost connections with exponential backoff, honouring ``Retry-After``), and a
limit on the requests in flight at once. The chat backend (:mod:`medunlearn.llm.openai_backend`) and the
evaluation's vLLM engine (:mod:`medunlearn.evaluation.engines`) both talk to their server through it
(``docs/llm.md``).

The API key is read from the environment when the client is made, from the variables the caller names (the
first one set), and handed to the client only: it is never printed, logged, put in an error message or stored.
With no variable named, or none set, a placeholder is sent: local servers need no key.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from medunlearn.llm.errors import MissingDependencyError

if TYPE_CHECKING:
    import openai

# Local servers (vLLM, llama.cpp, Ollama) accept any key; the client needs a non-empty one.
NO_KEY = "EMPTY"

T = TypeVar("T")


def import_openai():
    """The ``openai`` package; without it, :class:`MissingDependencyError` (an ``ImportError``) saying how to
    install it."""
    try:
        import openai
    except ImportError as error:
        raise MissingDependencyError(
            "talking to an OpenAI-compatible server needs openai: pip install 'medunlearn[llm]'"
        ) from error
    return openai


def api_key_from(environment_variables: tuple[str | None, ...]) -> str:
    """The value of the first of ``environment_variables`` that is set and not empty, else :data:`NO_KEY`.

    >>> api_key_from(())
    'EMPTY'
    """
    for name in environment_variables:
        key = os.environ.get(name) if name else None
        if key:
            return key
    return NO_KEY


@dataclass(frozen=True)
class ClientSettings:
    """How to reach one OpenAI-compatible server.

    Parameters:
        base_url (`str` or `None`): e.g. ``http://127.0.0.1:8000/v1``; None: the client's default
            (``$OPENAI_BASE_URL`` or OpenAI's own API).
        timeout_s (`float`): per HTTP request.
        max_retries (`int`): the client's transport retries.
        concurrency (`int`, defaults to 1): requests in flight at once (:meth:`BoundedClient.limited`).
        key_variables (`tuple[str]`, defaults to ``()``): the environment variables that may hold the API key,
            tried in order when the client is made. The settings name the variables, never the key, so
            printing them prints no secret.
    """

    base_url: str | None
    timeout_s: float
    max_retries: int
    concurrency: int = 1
    key_variables: tuple[str | None, ...] = ()

    def client(self) -> openai.AsyncOpenAI:
        """A new ``openai.AsyncOpenAI`` for these settings (use it as an async context manager)."""
        return import_openai().AsyncOpenAI(
            api_key=api_key_from(self.key_variables),
            base_url=self.base_url,
            timeout=self.timeout_s,
            max_retries=self.max_retries,
        )


class BoundedClient:
    """An open ``openai.AsyncOpenAI`` (``client``) and the limit on the calls in flight through it."""

    def __init__(self, client: openai.AsyncOpenAI, concurrency: int):
        self.client = client
        self._slots = asyncio.Semaphore(concurrency)

    async def limited(self, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()`` once fewer than ``concurrency`` limited calls are running. The call is made only
        then, so one cancelled while it waits leaves no coroutine behind."""
        async with self._slots:
            return await call()


@asynccontextmanager
async def bounded_client(settings: ClientSettings) -> AsyncIterator[BoundedClient]:
    """Open a client for ``settings`` and close it (its connections) on the way out."""
    async with settings.client() as client:
        yield BoundedClient(client, settings.concurrency)
