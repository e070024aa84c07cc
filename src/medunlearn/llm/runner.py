"""Bulk chat completions: cache lookup, one backend, the attempt loop, results committed as they arrive.

>>> from medunlearn.llm import BulkChat, ChatRequest
>>> chat = BulkChat(EchoBackend(), cache=None, show_progress=False)
>>> [result.text for result in chat.complete([ChatRequest([{"role": "user", "content": "hello"}])])]
['hello']
>>> chat.stats
RunStats(requests=1, cache_hits=0, calls=1, failed=0)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from medunlearn.llm.cache import BackendIdentity, ResultCache, request_key
from medunlearn.llm.errors import RequestError
from medunlearn.llm.interface import ChatRequest, ChatResult, validate_requests
from medunlearn.llm.retry import Completion, RetryPolicy, made_under, resolve_batch
from medunlearn.llm.spec import BackendSpec, parse_spec

# (index into the run's unique requests, its result): what a backend hands back, one batch at a time.
ResultsCallback = Callable[[list[tuple[int, ChatResult]]], None]


class Backend(Protocol):
    """What :class:`BulkChat` needs of a backend (and, optionally, ``served_identity()``: see
    :func:`cache_identity`)."""

    identity: BackendIdentity  # names the backend; the cache keys on :func:`cache_identity`

    def check_ready(self) -> None:
        """Raise a :class:`~medunlearn.llm.errors.LLMError` when the backend cannot serve (server
        unreachable)."""

    def run(
        self,
        requests: Sequence[ChatRequest],
        todo: Sequence[int],
        policy: RetryPolicy,
        on_results: ResultsCallback,
    ) -> None:
        """Complete ``requests[i]`` for each ``i`` in ``todo``, calling ``on_results`` as results arrive.

        ``requests`` is the whole run (cached ones included), so a backend that batches can plan its batches
        from the whole list and form the same batches on a resumed run.
        """


def cache_identity(backend: Backend) -> BackendIdentity:
    """What the cache keys a backend's answers on: its ``served_identity()`` when it has one (a server, asked
    what it serves now), else its ``identity``."""
    served = getattr(backend, "served_identity", None)
    return served() if served is not None else backend.identity


@dataclass
class RunStats:
    """Counters of a :class:`BulkChat`, over all its ``complete`` calls.

    ``calls`` counts completion attempts sent to the model (schema retries included; the server client's own
    transport retries are not); ``cache_hits`` counts requests served from the cache.
    """

    requests: int = 0
    cache_hits: int = 0
    calls: int = 0
    failed: int = 0


class BulkChat:
    """Complete many chat requests with one backend, through a persistent cache.

    Parameters:
        backend: a :class:`~medunlearn.llm.transformers_backend.TransformersBackend` or
            :class:`~medunlearn.llm.openai_backend.OpenAIServerBackend` (or anything with the
            :class:`Backend` methods); :meth:`from_spec` builds one from a ``BACKEND:MODEL`` string.
        cache (`str`, `Path` or `None`): the SQLite cache file; None keeps nothing between runs.
        policy (`RetryPolicy`): how often a schema-invalid answer is asked for again.
        show_progress (`bool`, defaults to True): a tqdm bar over the requests.
    """

    def __init__(
        self,
        backend: Backend,
        cache: str | Path | ResultCache | None = None,
        policy: RetryPolicy | None = None,
        show_progress: bool = True,
    ):
        self.backend = backend
        self.cache = cache if isinstance(cache, ResultCache) or cache is None else ResultCache(cache)
        self.policy = policy or RetryPolicy()
        if self.policy.max_attempts < 1:
            raise RequestError(f"RetryPolicy.max_attempts must be at least 1, got {self.policy.max_attempts}")
        self.show_progress = show_progress
        self.stats = RunStats()

    @classmethod
    def from_spec(
        cls,
        spec: str | BackendSpec,
        cache: str | Path | ResultCache | None = None,
        policy: RetryPolicy | None = None,
        show_progress: bool = True,
        **backend_options,
    ) -> BulkChat:
        """``BulkChat.from_spec("openai:smollm2-135m@http://127.0.0.1:8000/v1", cache="llm.sqlite")``.

        ``backend_options`` go to the backend: ``config=`` (a ``TransformersConfig`` or ``ServerConfig``), and
        for transformers any keyword of :func:`medunlearn.models.load_model_and_tokenizer` (``texts=`` for
        tiny-llama).
        """
        return cls(
            make_backend(spec, **backend_options), cache=cache, policy=policy, show_progress=show_progress
        )

    def complete(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """One result per request, in order. Raises only before the first call (bad request, unreachable
        server); once calls start, a failed request becomes a result with ``error`` set."""
        from tqdm.auto import tqdm

        requests = list(requests)
        validate_requests(requests)
        identity = cache_identity(self.backend)  # a server is asked what it serves: before anything is read
        keys = [request_key(identity, request) for request in requests]
        unique: dict[str, ChatRequest] = {}  # identical requests are made once: same key, same answer
        for key, request in zip(keys, requests):
            unique.setdefault(key, request)
        unique_keys, unique_requests = list(unique), list(unique.values())
        stored = self.cache.lookup(unique_keys) if self.cache is not None else {}
        # A stored result made under another retry policy is asked again (and replaced).
        results = {key: r for key, r in stored.items() if made_under(unique[key], r, self.policy)}
        hits = len(results)
        todo = [index for index, key in enumerate(unique_keys) if key not in results]
        fresh: list[ChatResult] = []
        if todo:
            # before anything is written: an unreachable server leaves no cache file
            self.backend.check_ready()
            if self.cache is not None:
                self.cache.open_for_writing()
            bar = tqdm(
                total=len(unique_keys),
                initial=hits,
                desc=f"{identity.kind}:{identity.model}",
                unit="request",
                disable=not self.show_progress,
            )

            def on_results(batch: list[tuple[int, ChatResult]]) -> None:
                if self.cache is not None:
                    storable = [(unique_keys[i], unique_requests[i], r) for i, r in batch if not r.transient]
                    self.cache.put_many(identity, storable)
                for index, result in batch:
                    results[unique_keys[index]] = result
                    fresh.append(result)
                bar.update(len(batch))

            try:
                self.backend.run(unique_requests, todo, self.policy, on_results)
            finally:
                bar.close()
        self.stats.requests += len(requests)
        self.stats.cache_hits += hits
        self.stats.calls += sum(len(result.attempts) for result in fresh)
        self.stats.failed += sum(not result.ok for result in fresh)
        return [results[key] for key in keys]

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> BulkChat:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def make_backend(spec: str | BackendSpec, **options) -> Backend:
    """The backend a spec names (its heavy imports happen only here, for the backend chosen)."""
    spec = parse_spec(spec)
    if spec.kind == "transformers":
        from medunlearn.llm.transformers_backend import TransformersBackend

        return TransformersBackend.from_pretrained(spec.model, **options)
    from medunlearn.llm.openai_backend import OpenAIServerBackend

    return OpenAIServerBackend.from_spec(spec, **options)


class EchoBackend:
    """A backend that answers each request with its last message: for examples and tests of the plumbing."""

    identity = BackendIdentity("echo", "echo")

    def check_ready(self) -> None:
        pass

    def run(self, requests, todo, policy, on_results) -> None:
        def generate(batch, sampling):
            return [Completion(text=r.messages[-1]["content"], finish_reason="stop") for r in batch]

        for index in todo:
            on_results([(index, resolve_batch([requests[index]], generate, policy)[0])])
