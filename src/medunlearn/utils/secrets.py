"""Secrets never leave in a message: one redaction for every error and log line a command prints.

`redact` replaces, in any text:

- the credentials of a URL (``https://user:password@host`` and ``https://TOKEN@host``) by ``***``: all of
  the userinfo, up to the last ``@`` before the host, whatever the password holds (``@``, ``#``, spaces);
- the value of a query parameter whose name says it is a secret (``?api_key=…``, ``&token=…``);
- the value of a ``Bearer`` authorization;
- tokens of the shapes Hugging Face (``hf_…``) and OpenAI (``sk-…``) issue;
- the value of every secret environment variable (`SECRET_VARIABLES`) that is set, wherever it appears.

`medunlearn.cli.main` runs every command inside `redacted_output` (what it prints to stdout and stderr,
its error line included, goes through `redact`), and `RedactingFilter` does the same for log records. A bug's
traceback, printed by `sys.excepthook` after the command's streams are restored, is redacted too.
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

_SCHEME = r"[a-zA-Z][a-zA-Z0-9+.-]*://"
# The userinfo runs to the LAST '@' before the host: a password may hold '@', '#', '?' or a space. An '@'
# followed by another URL (``openai:m@http://…``, a second spec on the line) is not a host's.
#
# A '/' is where it gets ambiguous: ``http://host/a@b`` is a host and a path that holds an '@' (``/@user``,
# npm's ``/@scope/``), ``http://u:pa/ss@host`` a password that holds a '/'. The text before the first '/'
# decides, as it is unambiguous there:
# - ``user:secret`` with a secret that is not a port (not digits only) cannot be a host, so the password
#   runs on past the '/' to the last '@' on the line (masking a path too much is safe; showing a password
#   is not);
# - a host (``host``, ``host:8000``, ``[::1]:8000``) is a host: an '@' after its '/' is the path's and is
#   left alone, since masking it would hide the host of every such URL in an error. A bare token holding a
#   '/' (``http://ab/cd@host``) reads the same way and is shown; tokens of the shapes we know are masked by
#   `_TOKEN_SHAPES` wherever they appear.
_PASSWORD_WITH_SLASH = r"[^/@:\s\[\]]*:(?!\d*(?:[/?#\s]|$))[^/@\r\n]*/[^\r\n]*"
_URL_CREDENTIALS = re.compile(
    rf"(?P<scheme>\b{_SCHEME})(?:{_PASSWORD_WITH_SLASH}|[^/\r\n]*)@(?!{_SCHEME})", re.MULTILINE
)
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
    >>> redact("LLM spec 'openai:m@http://alice:p@ss#SECRET word@127.0.0.1:9/v1' and openai:n@http://h:9/v1")
    "LLM spec 'openai:m@http://***@127.0.0.1:9/v1' and openai:n@http://h:9/v1"
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
    except BaseException:
        # A bug's traceback is printed by `sys.excepthook` once the streams above are restored: redact it too.
        _redact_uncaught_tracebacks()
        raise
    finally:
        sys.stdout, sys.stderr = saved


def _redact_uncaught_tracebacks() -> None:
    """Make `sys.excepthook` print through `redact` (once; the hook's own output is unchanged otherwise)."""
    hook = sys.excepthook
    if getattr(hook, "redacting", False):
        return

    def redacting_hook(kind, value, traceback) -> None:
        saved = sys.stderr
        sys.stderr = RedactingStream(saved)
        try:
            hook(kind, value, traceback)
        finally:
            sys.stderr = saved

    redacting_hook.redacting = True
    sys.excepthook = redacting_hook
