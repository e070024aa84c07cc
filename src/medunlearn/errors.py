"""The one error base of medunlearn.

Every error a user can cause (a bad file, row or field; a missing option; an unknown method) is a
:class:`MedunlearnError`. ``medunlearn.cli.main`` catches it once and prints
``medunlearn <command>: error: <message>`` with exit status 2, without a traceback. Anything else is a bug and
keeps its traceback.

Package errors subclass it next to the code that raises them, and most also keep the built-in class a
Python caller would expect (``ValueError``, ``FileNotFoundError``), so ``except ValueError`` still works:

>>> class PoolFormatError(MedunlearnError, ValueError): ...
>>> isinstance(PoolFormatError("pool.jsonl row 3, field 'label': unknown"), ValueError)
True

This module imports nothing, so any layer may import it.
"""

from __future__ import annotations


class MedunlearnError(Exception):
    """Base of every error a user can cause; the message says what is wrong and where (file, row, field)."""


class InputError(MedunlearnError, ValueError):
    """Bad input in general: an option, a file's content, a field's value."""


class MissingInputError(MedunlearnError, FileNotFoundError):
    """A file, folder or model that was named does not exist."""


class OutputExistsError(MedunlearnError, FileExistsError):
    """The output folder exists and replacing it was not asked for."""
