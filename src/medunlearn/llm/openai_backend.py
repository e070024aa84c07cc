"""Chat completions from an OpenAI-compatible server (vLLM, TGI, llama.cpp, Ollama, a hosted API).

Built on the one async client of :mod:`medunlearn.llm.openai_client`: ``openai.AsyncOpenAI``, whose
``max_retries`` retries 408/409/429/5xx and connection errors with exponential backoff (honouring
``Retry-After``), with at most ``concurrency`` requests in flight at once; a schema is sent as
``response_format={"type": "json_schema", ...}`` (vLLM enforces it by guided decoding).

The API key is read from an environment variable when the client is made and handed to the client only: it is
never printed, logged, put in an error message, stored in the cache or in any file. Specs and configs name the
variable, not the key.

The cache keys the answers on what the server serves, asked of its ``GET /models`` before the cache is read
(:meth:`OpenAIServerBackend.served_identity`, :func:`served_fingerprint`; ``docs/llm.md``, "The cache").
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path

from medunlearn.llm.cache import BackendIdentity
from medunlearn.llm.errors import ServerAuthError, ServerUnreachableError
from medunlearn.llm.interface import ChatRequest
from medunlearn.llm.openai_client import ClientSettings, bounded_client, import_openai
from medunlearn.llm.retry import BackendCallError, Completion, RetryPolicy, resolve_one
from medunlearn.llm.schema import canonical_json
from medunlearn.llm.spec import BackendSpec, check_server_url, parse_spec
from medunlearn.llm.sync import run_sync


@dataclass
class ServerConfig:
    """Settings of the OpenAI-compatible server backend.

    Parameters:
        base_url (`str` or `None`): e.g. ``http://127.0.0.1:8000/v1``; None: ``$MEDUNLEARN_LLM_BASE_URL``,
            else the client's default (``$OPENAI_BASE_URL`` or OpenAI's own API).
        api_key_env (`str`, defaults to ``"MEDUNLEARN_LLM_API_KEY"``): the environment variable holding the
            key.
        fallback_api_key_env (`str` or `None`, defaults to ``"OPENAI_API_KEY"``): read when ``api_key_env`` is
            unset; when neither is set, a placeholder is sent (local servers need none).
        concurrency (`int`, defaults to 8): requests in flight at once.
        timeout_s (`float`, defaults to 300): per HTTP request; a time-out is retried like a 5xx.
        max_retries (`int`, defaults to 5): the client's transport retries (429, 5xx, time-outs, lost
            connections) with exponential backoff from 0.5 s to 8 s, or the server's ``Retry-After``.
        connect_timeout_s (`float`, defaults to 15): the reachability check before a run (``GET /models``).
        strict_schema (`bool`, defaults to True): send ``"strict": true`` with the schema (OpenAI only
            enforces strict schemas; vLLM enforces either way).
    """

    base_url: str | None = None
    api_key_env: str = "MEDUNLEARN_LLM_API_KEY"
    fallback_api_key_env: str | None = "OPENAI_API_KEY"
    concurrency: int = 8
    timeout_s: float = 300.0
    max_retries: int = 5
    connect_timeout_s: float = 15.0
    strict_schema: bool = True


def response_format(request: ChatRequest, strict: bool) -> dict:
    """The ``response_format`` argument for a request with a schema.

    >>> response_format(ChatRequest([], json_schema={"type": "object"}, schema_name="label"), strict=True)
    {'type': 'json_schema', 'json_schema': {'name': 'label', 'schema': {'type': 'object'}, 'strict': True}}
    """
    return {
        "type": "json_schema",
        "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": strict},
    }


# Fields of a ``GET /models`` entry that pin the weights behind a served name: vLLM lists the folder or Hub id
# it loaded as ``root`` (and a LoRA adapter's base as ``parent``); ``digest`` is a content hash where a server
# lists one.
PINNING_FIELDS = ("root", "parent", "digest")


def served_fingerprint(listing: list[dict] | None, model: str, where: str) -> str:
    """What pins the weights answering for ``model`` at ``where``, from the server's ``GET /models``
    ``listing`` (None: the server has no such route) [ours]; the cache-key text of a server backend.

    - The model's entry lists ``root`` or ``digest``: those (with ``parent``), plus, when ``root`` is a folder
      this machine can read, its weight files' names, sizes and modification times (a checkpoint retrained in
      place is new weights under the old root). The URL is left out: the same weights answer the same on any
      host or port.
    - Otherwise (no listing, no entry for ``model``, an entry with neither): the base URL ``where``. Two
      servers are then never taken for one, but a server that changes its weights under one name and URL is.

    >>> listing = [{"id": "m", "root": "/models/a"}]
    >>> served_fingerprint(listing, "m", "http://a:1/v1") == served_fingerprint(listing, "m", "http://b:2/v1")
    True
    >>> served_fingerprint(listing, "m", "http://a:1/v1") == served_fingerprint(
    ...     [{"id": "m", "root": "/models/b"}], "m", "http://a:1/v1"
    ... )
    False
    >>> served_fingerprint([{"id": "m"}], "m", "http://a:1/v1") == served_fingerprint(None, "m", "http://b:2/v1")
    False
    """
    entry = next((item for item in listing or () if item.get("id") == model), None) or {}
    pinned = {name: str(entry[name]) for name in PINNING_FIELDS if entry.get(name)}
    if "root" not in pinned and "digest" not in pinned:
        pinned = {"url": where}
    elif "root" in pinned and Path(pinned["root"]).is_dir():
        from medunlearn.llm.transformers_backend import weights_fingerprint

        pinned["files"] = weights_fingerprint(pinned["root"], {})
    return hashlib.sha256(canonical_json(pinned).encode()).hexdigest()[:16]


class OpenAIServerBackend:
    """Chat completions from the model ``model`` served at ``config.base_url``.

    ``identity`` names the backend (kind and served name: what a stage's settings record); the cache keys its
    answers on :meth:`served_identity`, which also pins the weights the server serves under that name.
    """

    def __init__(self, model: str, config: ServerConfig | None = None):
        self.model = model
        self.config = config or ServerConfig()
        self.identity = BackendIdentity("openai", model)

    @classmethod
    def from_spec(cls, spec: str | BackendSpec, config: ServerConfig | None = None) -> OpenAIServerBackend:
        spec = parse_spec(spec)
        config = config or ServerConfig()
        if spec.base_url:
            config = replace(config, base_url=spec.base_url)
        return cls(spec.model, config)

    @property
    def base_url(self) -> str | None:
        if self.config.base_url:
            return self.config.base_url
        from_environment = os.environ.get("MEDUNLEARN_LLM_BASE_URL") or None
        if from_environment is not None:
            check_server_url(from_environment, f"$MEDUNLEARN_LLM_BASE_URL {from_environment!r}")
        return from_environment

    @property
    def where(self) -> str:
        """The server named in messages: its URL, or the client's default."""
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or "the openai client's default URL"

    def _client_settings(self, **overrides) -> ClientSettings:
        """How the client reaches the server: the key from ``api_key_env``, else ``fallback_api_key_env``."""
        options = {
            "timeout_s": self.config.timeout_s,
            "max_retries": self.config.max_retries,
            "concurrency": self.config.concurrency,
            **overrides,
        }
        keys = (self.config.api_key_env, self.config.fallback_api_key_env)
        return ClientSettings(base_url=self.base_url, key_variables=keys, **options)

    def check_ready(self) -> None:
        """Ask the server for its models; raise :class:`ServerUnreachableError` naming the URL if it does not
        answer."""
        run_sync(self._list_models())

    def served_identity(self) -> BackendIdentity:
        """The cache identity of what answers: ``identity`` plus :func:`served_fingerprint` of the server's
        ``GET /models`` (asked now; raises like :meth:`check_ready` when the server does not answer)."""
        listing = run_sync(self._list_models())
        return BackendIdentity("openai", self.model, served_fingerprint(listing, self.model, self.where))

    async def _list_models(self) -> list[dict] | None:
        """The server's ``GET /models`` entries (None when it has no such route)."""
        openai = import_openai()
        try:
            settings = self._client_settings(timeout_s=self.config.connect_timeout_s, max_retries=1)
            async with settings.client() as client:
                page = await client.models.list()
                return [entry.model_dump() for entry in page.data]
        except openai.APIConnectionError as error:
            # No claim about what was written: a caller may have written files before asking (the mining
            # stages before the labels); the command says what it kept.
            raise ServerUnreachableError(
                f"cannot reach the LLM server at {self.where} ({type(error).__name__}: {error}); "
                "is it running?"
            ) from None
        except openai.AuthenticationError:
            raise ServerAuthError(
                f"the LLM server at {self.where} refused the API key (read from ${self.config.api_key_env}"
                + (f" or ${self.config.fallback_api_key_env}" if self.config.fallback_api_key_env else "")
                + ")"
            ) from None
        except openai.NotFoundError:
            return None  # it answered: some servers have no /models route, and completions may still work

    def run(self, requests, todo, policy: RetryPolicy, on_results) -> None:
        run_sync(self._run(requests, todo, policy, on_results))

    async def _run(self, requests, todo, policy: RetryPolicy, on_results) -> None:
        # Set once a call loses the connection after all of the client's retries: the server went away
        # mid-run, so the requests still queued fail at once instead of each waiting through the same backoff.
        lost_connection: list[str] = []
        async with bounded_client(self._client_settings()) as bounded:
            client = bounded.client

            async def complete(request: ChatRequest, seed: int, temperature: float) -> Completion:
                if lost_connection:
                    raise BackendCallError(f"not sent: the server stopped answering ({lost_connection[0]})")
                try:
                    return await self._complete(client, request, seed, temperature)
                except ConnectionLostError as error:
                    lost_connection.append(str(error))
                    raise

            async def one(index: int) -> None:
                result = await bounded.limited(lambda: resolve_one(requests[index], complete, policy))
                on_results([(index, result)])  # committed as it arrives, while the others are in flight

            await asyncio.gather(*(one(index) for index in todo))

    async def _complete(self, client, request: ChatRequest, seed: int, temperature: float) -> Completion:
        openai = import_openai()
        arguments = {
            "model": self.model,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "temperature": temperature,
            "top_p": request.top_p,
            "seed": seed,
        }
        if request.json_schema is not None:
            arguments["response_format"] = response_format(request, self.config.strict_schema)
        try:
            response = await client.chat.completions.create(**arguments)
        except openai.APIStatusError as error:
            raise BackendCallError(f"HTTP {error.status_code} from {self.where}: {error.message}") from None
        except openai.APITimeoutError as error:
            raise BackendCallError(f"{type(error).__name__} talking to {self.where}: {error}") from None
        except openai.APIConnectionError as error:
            raise ConnectionLostError(f"{type(error).__name__} talking to {self.where}: {error}") from None
        choice = response.choices[0]
        usage = response.usage
        return Completion(
            text=choice.message.content or "",
            finish_reason=choice.finish_reason or "stop",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )


class ConnectionLostError(BackendCallError):
    """The connection failed after the client's retries (a time-out is not this: the server may just be
    busy)."""
