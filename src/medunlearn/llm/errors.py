"""Errors of :mod:`medunlearn.llm`; each says what is wrong and where (spec, request index, URL)."""

from __future__ import annotations

from medunlearn.errors import MedunlearnError


class LLMError(MedunlearnError):
    """Base of every error a user of :mod:`medunlearn.llm` can cause."""


class BackendSpecError(LLMError, ValueError):
    """A ``BACKEND:MODEL`` spec string that cannot be parsed."""


class RequestError(LLMError, ValueError):
    """A request that cannot be sent: bad messages, a negative ``max_tokens``, an invalid JSON schema."""


class ServerUnreachableError(LLMError, ConnectionError):
    """The OpenAI-compatible server did not answer; raised before any request is sent or anything written."""


class ServerAuthError(LLMError, PermissionError):
    """The server refused the API key (the message names the environment variable, never the key)."""


class ServerStartError(LLMError, RuntimeError):
    """A vLLM server launched by :class:`medunlearn.llm.server.VLLMServer` exited or never became ready."""


class MissingVLLMError(LLMError, FileNotFoundError):
    """The virtualenv holding vLLM (``make vllm-venv``) is absent."""


class MissingDependencyError(LLMError, ImportError):
    """An optional package of the ``llm`` extra is not installed."""
