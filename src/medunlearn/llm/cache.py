"""A persistent SQLite cache of chat results, so a rerun makes zero calls and a killed run resumes.

Key: a SHA-256 of (cache format, backend kind, model id, backend fingerprint, the full request — its messages,
sampling settings, schema and ``prompt_version``). The fingerprint pins the weights: a local folder's weight
files, or for a server what it serves under the name (its ``GET /models`` root or digest, else its URL; see
:func:`medunlearn.llm.openai_backend.served_fingerprint`). The retry policy is not in the key: the runner
serves a stored result only to a run whose policy makes the same attempts
(:func:`medunlearn.llm.retry.made_under`). Each result is committed as it arrives, in WAL mode, so a run
killed at any moment (SIGKILL included) loses at most the answers still in flight, and a rerun serves every
committed one from the cache. The rows also keep token counts, so a stage can report what it cost
(:meth:`ResultCache.usage`). See ``docs/llm.md``, "The cache".

What is stored: the request (the prompt text) and the result. Never a key or a URL: both stay outside the
cache (a URL that keys a server's answers enters the key only hashed).

>>> identity = BackendIdentity("openai", "smollm2-135m")
>>> request = ChatRequest([{"role": "user", "content": "Hi"}], prompt_version="greeting-v1")
>>> request_key(identity, request) == request_key(identity, ChatRequest([{"role": "user", "content": "Hi"}],
...                                                                     prompt_version="greeting-v1"))
True
>>> request_key(identity, request) == request_key(identity, ChatRequest([{"role": "user", "content": "Hi"}],
...                                                                     prompt_version="greeting-v2"))
False
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from medunlearn.llm.interface import ChatRequest, ChatResult
from medunlearn.llm.schema import canonical_json

# Bumped when the meaning of a stored row changes, so old rows are never read as new ones.
CACHE_FORMAT = 1

_CREATE = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    request TEXT NOT NULL,
    result TEXT NOT NULL,
    ok INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created REAL NOT NULL
)
"""


@dataclass(frozen=True)
class BackendIdentity:
    """What makes two backends give the same answers: kind, model id, and a fingerprint of the weights when
    the model id alone does not pin them (a local folder that may be retrained in place; what a server serves
    under a name)."""

    kind: str
    model: str
    fingerprint: str = ""


def request_key(identity: BackendIdentity, request: ChatRequest) -> str:
    payload = {
        "cache_format": CACHE_FORMAT,
        "backend": identity.kind,
        "model": identity.model,
        "fingerprint": identity.fingerprint,
        "request": request.to_json(),
    }
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


class ResultCache:
    """Results keyed by :func:`request_key`, in one SQLite file.

    Reading a cache file that does not exist creates nothing; the file is created by :meth:`open_for_writing`,
    which the runner calls only once the backend is known to be reachable.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._connection: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            # check_same_thread=False: the runner may drive an async backend from a worker thread (inside
            # Jupyter's running event loop); it only ever uses the connection from one thread at a time.
            self._connection = sqlite3.connect(self.path, check_same_thread=False)
            self._connection.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against a killed process in WAL mode (only a power cut can lose the last
            # commits).
            self._connection.execute("PRAGMA synchronous=NORMAL")
            self._connection.execute(_CREATE)
        return self._connection

    def open_for_writing(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._connect()

    def lookup(self, keys: Sequence[str]) -> dict[str, ChatResult]:
        """The cached results among ``keys`` (none when the file does not exist yet)."""
        if self._connection is None and not self.path.is_file():
            return {}
        connection = self._connect()
        found: dict[str, ChatResult] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):  # SQLite caps the number of bound parameters per statement
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, result in connection.execute(
                f"SELECT key, result FROM results WHERE key IN ({marks})", chunk
            ):
                found[key] = ChatResult.from_json(json.loads(result), cached=True)
        return found

    def put_many(
        self, identity: BackendIdentity, items: Iterable[tuple[str, ChatRequest, ChatResult]]
    ) -> None:
        """Store ``(key, request, result)`` rows in one transaction: a batch is committed whole or not at
        all."""
        rows = [
            (
                key,
                identity.kind,
                identity.model,
                request.prompt_version,
                canonical_json(request.to_json()),
                canonical_json(result.to_json()),
                int(result.ok),
                len(result.attempts),
                result.prompt_tokens,
                result.completion_tokens,
                time.time(),
            )
            for key, request, result in items
        ]
        if not rows:
            return
        connection = self._connect()
        with connection:
            connection.executemany(
                "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )

    def __len__(self) -> int:
        if self._connection is None and not self.path.is_file():
            return 0
        return self._connect().execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def usage(self) -> list[dict]:
        """Token usage stored in the cache, one row per (backend, model, prompt_version)."""
        if self._connection is None and not self.path.is_file():
            return []
        query = """
            SELECT backend, model, prompt_version, COUNT(*), SUM(1 - ok), SUM(attempts),
                   SUM(prompt_tokens), SUM(completion_tokens)
            FROM results GROUP BY backend, model, prompt_version ORDER BY backend, model, prompt_version
        """
        names = (
            "backend",
            "model",
            "prompt_version",
            "requests",
            "failed",
            "attempts",
            "prompt_tokens",
            "completion_tokens",
        )
        return [dict(zip(names, row)) for row in self._connect().execute(query)]

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
