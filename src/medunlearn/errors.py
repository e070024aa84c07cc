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


class FileContentError(InputError):
    """A user's file cannot be read as what it should be: wrong encoding, a parse error, a wrong type.

    The message names the file, the line (1-based, as an editor shows it; `unit="row"` for a record counted
    from 1) and the field where known.
    """

    def __init__(
        self, source: str, line: int | None, field_name: str | None, problem: str, unit: str = "line"
    ):
        self.source, self.line, self.field_name, self.problem = source, line, field_name, problem
        where = source
        if line is not None:
            where += f", {unit} {line}"
        if field_name is not None:
            where += f", field '{field_name}'"
        super().__init__(f"{where}: {problem}")


def plain(value):
    """``value`` as the Python value it stands for: a numpy scalar (``np.float64(-0.5)``, ``np.str_('x')``,
    what a pandas or parquet cell holds) becomes ``-0.5`` or ``'x'``; anything else is returned as it is.
    Checked by the type's module, so this module still imports nothing."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def shown(value, limit: int = 200) -> str:
    """``repr`` of :func:`plain` ``value`` for an error message, cut at ``limit`` characters: a user reads
    ``-0.5`` and ``'P000007'``, never ``np.float64(-0.5)`` or ``np.str_('P000007')``.

    >>> class Scalar:  # stands in for a numpy scalar here (this module imports nothing)
    ...     __module__, ndim = "numpy", 0
    ...     def item(self):
    ...         return "P000007"
    >>> shown(Scalar()), shown(0.5), shown("x" * 300, limit=10)
    ("'P000007'", '0.5', "'xxxxxxxx…")
    """
    text = repr(plain(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"
