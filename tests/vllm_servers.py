"""Real vLLM servers for tests: skip when the vLLM venv is absent, start several at once, stop them all.

The server start is what such a test costs (about a minute each on a loaded 2-core machine), so the servers
a test module needs start in parallel, once per module (see tests/conftest.py::vllm_server for the
SmolLM2 chat server the LLM tests share).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

VLLM_VENV = Path(__file__).resolve().parents[1] / ".venv-vllm"


def require_vllm_venv() -> Path:
    """The vLLM venv's Python; skips the test, with the reason, when the venv is absent."""
    python = VLLM_VENV / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"the vLLM venv {VLLM_VENV} is absent: make it with `make vllm-venv` (CI does)")
    return python


def start_together(services) -> None:
    """Call ``start()`` of every service (a :class:`~medunlearn.llm.server.VLLMServer`, or anything with
    ``start`` and ``stop``) at once, in threads; if one fails, every one is stopped and the first error is
    raised."""
    errors: list[BaseException] = []

    def start(service):
        try:
            service.start()
        except BaseException as error:  # re-raised below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=start, args=(service,)) for service in services]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        for service in services:
            service.stop()
        raise errors[0]
