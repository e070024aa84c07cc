"""Secrets never leave in a message: one redaction for every error and log line a command prints.

`redact` replaces, in any text:

- the credentials of a URL (``https://user:password@host`` and ``https://TOKEN@host``) by ``***``;
- the value of a query parameter whose name says it is a secret (``?api_key=…``, ``&token=…``);
- the value of a ``Bearer`` authorization;
- tokens of the shapes Hugging Face (``hf_…``) and OpenAI (``sk-…``) issue;
- the value of every secret environment variable (`SECRET_VARIABLES`) that is set, wherever it appears.

`medunlearn.cli.main` runs every command inside `redacted_output` (what it prints to stdout and stderr,
its error line included, goes through `redact`), and `RedactingFilter` does the same for log records.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping

# The environment variables that hold tokens; `medunlearn env` prints only whether each is set.
SECRET_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "MEDUNLEARN_LLM_API_KEY")
MASK = "***"
# A value shorter than this is not searched for: "1" or "yes" in a variable would mask every digit.
_SHORTEST_SECRET = 6

_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/@?#]+@")
_SECRET_QUERY = re.compile(
    r"(?P<name>[?&;](?:[\w-]*(?:key|token|secret|password|passwd|sig|signature|auth)[\w-]*)=)[^&#\s'\"]+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<name>\bBearer\s+)[\w.~+/=-]+", re.IGNORECASE)
_TOKEN_SHAPES = re.compile(r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,})\b")


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with every secret it holds replaced by ``***`` (see the module's list).

    >>> redact("cannot reach http://admin:s3cret@10.0.0.2:8000/v1?api_key=abc123&model=x")
    'cannot reach http://***@10.0.0.2:8000/v1?api_key=***&model=x'
    """
    environ = os.environ if environ is None else environ
    for name in SECRET_VARIABLES:
        value = environ.get(name) or ""
        if len(value) >= _SHORTEST_SECRET:
            text = text.replace(value, MASK)
    text = _URL_CREDENTIALS.sub(lambda match: f"{match['scheme']}{MASK}@", text)
    text = _SECRET_QUERY.sub(lambda match: f"{match['name']}{MASK}", text)
    text = _BEARER.sub(lambda match: f"{match['name']}{MASK}", text)
    return _TOKEN_SHAPES.sub(MASK, text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message (its arguments merged in first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class RedactingStream:
    """A text stream whose writes go through `redact`; every other attribute is the wrapped stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)  # what the caller wrote, as `TextIOBase.write` reports it

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """Run the body with `sys.stdout` and `sys.stderr` redacting what is written to them."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
