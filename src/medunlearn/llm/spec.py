"""``BACKEND:MODEL`` spec strings: how a command line, a config file or a pipeline names an LLM.

Two backends:

- ``transformers:NAME_OR_FOLDER``: a local causal LM through transformers, e.g. ``transformers:smollm2-135m``,
  ``transformers:tiny-llama`` or ``transformers:/models/my-checkpoint``.
- ``openai:MODEL@BASE_URL``: an OpenAI-compatible server (vLLM, TGI, llama.cpp, Ollama or a hosted API), e.g.
  ``openai:smollm2-135m@http://127.0.0.1:8000/v1``. MODEL is the name the server serves (it may contain ``/``
  and ``:``); the model ends at the first ``@`` followed by ``http://`` or ``https://``. Without ``@BASE_URL``
  the URL comes from ``$MEDUNLEARN_LLM_BASE_URL``, else the client's default (``$OPENAI_BASE_URL`` or
  OpenAI's).

A spec never holds an API key: keys are read from an environment variable (see
:class:`medunlearn.llm.openai_backend.ServerConfig`).

>>> parse_spec("transformers:smollm2-135m")
BackendSpec(kind='transformers', model='smollm2-135m', base_url=None)
>>> parse_spec("openai:meta-llama/Llama-3.1-8B-Instruct@http://127.0.0.1:8000/v1")
BackendSpec(kind='openai', model='meta-llama/Llama-3.1-8B-Instruct', base_url='http://127.0.0.1:8000/v1')
>>> str(parse_spec("openai:llama3:8b@http://localhost:11434/v1"))
'openai:llama3:8b@http://localhost:11434/v1'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

from medunlearn.llm.errors import BackendSpecError

BackendKind = Literal["transformers", "openai"]
BACKEND_KINDS: tuple[str, ...] = get_args(BackendKind)
_MODEL_AT_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


@dataclass(frozen=True)
class BackendSpec:
    """A parsed spec: which backend, which model, and (for a server) where."""

    kind: BackendKind
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        suffix = f"@{self.base_url}" if self.base_url else ""
        return f"{self.kind}:{self.model}{suffix}"


def parse_spec(spec: str | BackendSpec) -> BackendSpec:
    """Parse ``BACKEND:MODEL`` (``openai:MODEL@BASE_URL`` for servers); raise :class:`BackendSpecError`."""
    if isinstance(spec, BackendSpec):
        return spec
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise BackendSpecError(
            f"LLM spec {spec!r}: expected BACKEND:MODEL, e.g. 'transformers:smollm2-135m' or "
            "'openai:MODEL@http://127.0.0.1:8000/v1'"
        )
    if kind not in BACKEND_KINDS:
        raise BackendSpecError(
            f"LLM spec {spec!r}: unknown backend {kind!r}; choose one of {list(BACKEND_KINDS)}"
        )
    if kind == "transformers":
        return BackendSpec("transformers", rest)
    match = _MODEL_AT_URL.match(rest)
    if match:
        return BackendSpec("openai", match.group("model"), match.group("url").rstrip("/"))
    if "@" in rest and "://" in rest:
        raise BackendSpecError(
            f"LLM spec {spec!r}: the base URL after '@' must start with http:// or https://"
        )
    return BackendSpec("openai", rest)
