"""The LLM calls of the construction (:mod:`~medunlearn.amnesia.sources.llm_built`): one :class:`BulkChat`
per distinct spec, and one stage's requests sent at once, stopping when some got no answer at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medunlearn.amnesia.sources.llm_built.construction_config import ConstructionConfig, public_spec
from medunlearn.errors import MedunlearnError
from medunlearn.llm import (
    BulkChat,
    ChatRequest,
    ChatResult,
    ResultCache,
    cache_identity,
    make_backend,
    parse_spec,
)


class IncompleteRunError(MedunlearnError, ConnectionError):
    """Some requests got no answer at all (the server went away mid-run). They are not cached and are not
    counted as the model's failures: rerunning the same command resumes from the cache."""


class StageChats:
    """One :class:`BulkChat` per distinct spec (a backend loaded once however many judges share it)."""

    def __init__(self, config: ConstructionConfig, backends: Mapping[str, Any] | None, progress: bool):
        self.cache = ResultCache(config.cache) if config.cache is not None else None
        self._chats: dict[str, BulkChat] = {}
        specs = [config.labeler_spec, config.generator, *config.judge_specs]
        for spec in dict.fromkeys(specs):
            backend = (backends or {}).get(spec)
            if backend is None:
                backend = make_backend(spec, **backend_options(spec, config))
            self._chats[spec] = BulkChat(backend, cache=self.cache, show_progress=progress)

    def __getitem__(self, spec: str) -> BulkChat:
        return self._chats[spec]

    def check_ready(self) -> None:
        """Every backend answers, before any request is sent or the cache file is made."""
        for chat in self._chats.values():
            chat.backend.check_ready()

    def identities(self) -> dict[str, Any]:
        """Each spec's cache identity (what its backend serves): what tells distinct judges apart."""
        return {spec: cache_identity(chat.backend) for spec, chat in self._chats.items()}

    @property
    def calls(self) -> int:
        return sum(chat.stats.calls for chat in self._chats.values())

    @property
    def cache_hits(self) -> int:
        return sum(chat.stats.cache_hits for chat in self._chats.values())

    def close(self) -> None:
        for chat in self._chats.values():
            chat.close()

    def complete(self, spec: str, requests: list[ChatRequest], stage: str) -> list[ChatResult]:
        """One stage's requests; stop (nothing counted as a skip) when some got no answer from the backend."""
        results = self._chats[spec].complete(requests)
        lost = [result for result in results if result.transient]
        if lost:
            raise IncompleteRunError(
                f"{stage}: {len(lost)} of {len(results)} requests to {public_spec(spec)} got no answer "
                f"(last: {lost[-1].error}); the answers so far are cached: rerun the same command to resume"
            )
        return results


def backend_options(spec: str, config: ConstructionConfig) -> dict:
    """The keyword arguments :func:`~medunlearn.llm.make_backend` gets for ``spec``: a server's time-out
    and concurrency; nothing for a local backend."""
    if parse_spec(spec).kind == "openai":
        from medunlearn.llm.openai_backend import ServerConfig

        return {"config": ServerConfig(concurrency=config.concurrency, timeout_s=config.request_timeout_s)}
    return {}
