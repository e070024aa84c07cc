"""``BACKEND:MODEL`` spec strings: how a command line, a config file or a pipeline names an LLM.

Two backends:

- ``transformers:NAME_OR_FOLDER``: a local causal LM through transformers, e.g. ``transformers:smollm2-135m``,
  ``transformers:tiny-llama`` or ``transformers:/models/my-checkpoint``.
- ``openai:MODEL@BASE_URL``: an OpenAI-compatible server (vLLM, TGI, llama.cpp, Ollama or a hosted API), e.g.
  ``openai:smollm2-135m@http://127.0.0.1:8000/v1``. MODEL is the name the server serves (it may contain ``/``
  and ``:``); the model ends at the first ``@`` followed by ``http://`` or ``https://``. Without ``@BASE_URL``
  the URL comes from ``$MEDUNLEARN_LLM_BASE_URL``, else the client's default (``$OPENAI_BASE_URL`` or
  OpenAI's).

A base URL is checked when the spec is parsed (:func:`check_server_url`, also what ``--vllm-url`` is checked
with): http or https, a host, brackets that close, a port from 1 to 65535, no space and no '#'; the error
shows it redacted.

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
from urllib.parse import urlsplit

from medunlearn.llm.errors import BackendSpecError
from medunlearn.utils.secrets import redact

BackendKind = Literal["transformers", "openai"]
BACKEND_KINDS: tuple[str, ...] = get_args(BackendKind)
_MODEL_AT_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://.+)$", re.DOTALL)
_HIGHEST_PORT = 65535


@dataclass(frozen=True)
class BackendSpec:
    """A parsed spec: which backend, which model, and (for a server) where."""

    kind: BackendKind
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        suffix = f"@{self.base_url}" if self.base_url else ""
        return f"{self.kind}:{self.model}{suffix}"


def server_url_problem(url: str) -> str | None:
    """What makes ``url`` unusable as a server's base URL, or None when it is usable.

    >>> server_url_problem("http://127.0.0.1:8000/v1") is None
    True
    >>> server_url_problem("http://127.0.0.1:99999/v1")
    "the port '99999' is not a number from 1 to 65535"
    >>> server_url_problem("http://[::1/v1")
    "the host has an unbalanced '[' or ']'"
    """
    if not isinstance(url, str) or not re.match(r"https?://", url, re.IGNORECASE):
        return "the URL must start with http:// or https://"
    if any(character.isspace() or not character.isprintable() for character in url):
        return "the URL holds a space or control character (percent-encode it: a space is %20)"
    if "#" in url:  # a base URL has no fragment: a '#' would cut a password short and send the rest nowhere
        return "the URL holds a '#' (a base URL has no fragment; percent-encode it in a password: %23)"
    try:
        parts = urlsplit(url)
    except ValueError:  # urllib's only complaint here: "Invalid IPv6 URL"
        return "the host has an unbalanced '[' or ']'"
    host_port = parts.netloc.rpartition("@")[2]
    after_host = host_port.rpartition("]")[2] if host_port.startswith("[") else host_port
    if (
        not parts.hostname
        or host_port.startswith(":")
        or host_port.startswith("[")
        and after_host[:1] not in ":"
    ):
        return "the URL names no host"
    port = after_host.partition(":")[2]
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= _HIGHEST_PORT):
        return f"the port {port!r} is not a number from 1 to {_HIGHEST_PORT}"
    return None


def check_server_url(url: str, where: str) -> str:
    """``url`` when it is a usable base URL (:func:`server_url_problem`), else :class:`BackendSpecError`
    ``"<where>: <problem>"``, ``where`` (which names the spec or option) redacted: no password is shown."""
    problem = server_url_problem(url)
    if problem is not None:
        raise BackendSpecError(f"{redact(where)}: {problem}")
    return url


def parse_spec(spec: str | BackendSpec) -> BackendSpec:
    """Parse ``BACKEND:MODEL`` (``openai:MODEL@BASE_URL`` for servers); raise :class:`BackendSpecError`."""
    if isinstance(spec, BackendSpec):
        return spec
    if not isinstance(spec, str):
        raise BackendSpecError(f"LLM spec {spec!r}: expected a string BACKEND:MODEL")
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise BackendSpecError(
            f"LLM spec {redact(repr(spec))}: expected BACKEND:MODEL, e.g. 'transformers:smollm2-135m' or "
            "'openai:MODEL@http://127.0.0.1:8000/v1'"
        )
    if kind not in BACKEND_KINDS:
        raise BackendSpecError(
            f"LLM spec {redact(repr(spec))}: unknown backend {kind!r}; choose one of {list(BACKEND_KINDS)}"
        )
    if kind == "transformers":
        return BackendSpec("transformers", rest)
    match = _MODEL_AT_URL.match(rest)
    if match:
        url = check_server_url(match.group("url"), f"LLM spec {spec!r}")
        return BackendSpec("openai", match.group("model"), url.rstrip("/"))
    if "@" in rest and "://" in rest:
        raise BackendSpecError(
            f"LLM spec {redact(repr(spec))}: the base URL after '@' must start with http:// or https://"
        )
    return BackendSpec("openai", rest)
