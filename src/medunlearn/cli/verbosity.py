"""How much a ``medunlearn`` command prints: ``--quiet``, the default, or ``--verbose`` (docs/cli.md).

- default: our own lines and one progress bar per stage of real work (training steps, evaluation passes, LLM
  requests, writing a dataset folder); the libraries' per-operation bars (every ``datasets`` map, every model
  load or save, Hub transfers) and the Trainer's ``{'loss': …}`` lines are off; their warnings and errors are
  printed. Written to a log instead of a terminal, a bar is redrawn once a minute (medunlearn.utils.progress).
- ``--verbose``: the libraries' own output comes back: their progress bars, their info-level logs and the
  Trainer's log lines.
- ``--quiet``: no progress bar, no warning, no library log below error; what is left is the result and errors.

The level is set through the libraries' environment variables before they are imported, so that processes a
command starts (``accelerate launch``, study workers) follow it too. A variable the user set wins.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator, MutableMapping

from medunlearn.utils.progress import LEVEL_VARIABLE, bar_environment
from medunlearn.utils.secrets import RedactingFilter, redact

QUIET, DEFAULT, VERBOSE = "quiet", "default", "verbose"

_NO_LIBRARY_BARS = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
_LIBRARY_LOGS = ("TRANSFORMERS_VERBOSITY", "DATASETS_VERBOSITY", "HF_HUB_VERBOSITY")


def library_environment(level: str) -> dict[str, str]:
    """The environment variables that give the libraries (transformers, datasets, huggingface_hub, tqdm)
    the output of ``level``."""
    if level == VERBOSE:
        return dict.fromkeys(_LIBRARY_LOGS, "info")
    if level == DEFAULT:
        return dict(_NO_LIBRARY_BARS)
    return {
        **_NO_LIBRARY_BARS,
        **dict.fromkeys(_LIBRARY_LOGS, "error"),
        "TQDM_DISABLE": "1",  # every tqdm bar, the Trainer's and ours included (tqdm >= 4.66)
        "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
        "PYTHONWARNINGS": "ignore",  # for the processes a command starts
    }


def output_level(environ: MutableMapping[str, str] | None = None) -> str:
    """The level the running command was given (``default`` outside a command)."""
    environ = os.environ if environ is None else environ
    return environ.get(LEVEL_VARIABLE, DEFAULT)


@contextlib.contextmanager
def output_at(level: str, environ: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """Run the body at ``level``; the environment, the warning filters and our logger's level are restored
    afterwards (so that in-process callers, such as tests, are left as they were)."""
    environ = os.environ if environ is None else environ
    # A bar written to a log is redrawn rarely (medunlearn.utils.progress): its line stays one line.
    wanted = library_environment(level) | bar_environment(_is_terminal(sys.stderr))
    settings = {LEVEL_VARIABLE: level} | {
        name: value for name, value in wanted.items() if name not in environ
    }
    saved = {name: environ.get(name) for name in settings}
    environ.update(settings)
    logger = logging.getLogger("medunlearn")
    previous_level = logger.level
    previous_factory = logging.getLogRecordFactory()
    logging.setLogRecordFactory(_redacting_factory(previous_factory))
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _redacting_showwarning(warnings.showwarning)
            if level == QUIET:
                warnings.simplefilter("ignore")
                logger.setLevel(logging.ERROR)
            yield
    finally:
        logger.setLevel(previous_level)
        logging.setLogRecordFactory(previous_factory)
        for name, value in saved.items():
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _redacting_factory(factory):
    """Log records, ours and the libraries', with their secrets redacted (`medunlearn.utils.secrets`)."""
    redacting = RedactingFilter()

    def make_record(*args, **kwargs):
        record = factory(*args, **kwargs)
        redacting.filter(record)
        return record

    return make_record


def _redacting_showwarning(show):
    """Warnings printed with their secrets redacted; the catch_warnings block restores the original."""

    def show_redacted(message, category, filename, lineno, file=None, line=None):
        show(redact(str(message)), category, filename, lineno, file, line)

    return show_redacted
