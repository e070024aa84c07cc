"""The columns, column types and row count of a benchmark's parquet data file, checked as ``datasets`` will
give them back (one home for the AMNESIA and the BioDivergence audits).

``datasets.load_dataset`` reads a parquet column in the type the file stores: a patient id stored as binary
comes back as ``b'P000006'``, a confidence stored as text as ``'0.9'``, a null as ``None``. An audit that
reads the file with pandas and converts (``astype(str)``, ``to_numeric``) would pass such a folder; this
check says, for each column a benchmark expects, whether the file holds that type and no null, naming the
file, the field and, for a null, the row (from 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

TEXT = "text"
TEXT_LIST = "a list of text"
NUMBER = "a number"


def column_names_problem(found: Sequence[str], expected: Sequence[str], source: str | Path) -> str | None:
    """`found` (a data file's column names, in order) against the layout's `expected` columns, as a message
    naming `source` and the columns extra or missing; ``None`` when they are the same, in the same order. A
    column the layout does not name would be published and loaded with the split unchecked.

    >>> column_names_problem(["id", "text", "secret"], ["id", "text"], "train.parquet")
    "train.parquet: columns ['id', 'text', 'secret'], expected ['id', 'text'] (extra: ['secret'])"
    """
    found, expected = list(found), list(expected)
    if found == expected:
        return None
    extra = [name for name in found if name not in expected]
    missing = [name for name in expected if name not in found]
    differs = [f"extra: {extra}"] * bool(extra) + [f"missing: {missing}"] * bool(missing)
    return f"{source}: columns {found}, expected {expected} ({'; '.join(differs) or 'in another order'})"


def row_count_problem(rows: int, recorded: int | None, source: str | Path, record: str) -> str | None:
    """A data file of `rows` rows against the count its build `record` (``build.json``) wrote for it, as a
    message naming `source` and both counts; ``None`` when they agree or nothing was recorded. A split cut
    short or emptied after the build still follows every other invariant.

    >>> row_count_problem(10, 230, "v1.0/train.parquet", "build.json")
    'v1.0/train.parquet: 10 rows, build.json records 230'
    """
    if recorded is None or rows == recorded:
        return None
    return f"{source}: {rows} rows, {record} records {recorded}"


def column_type_problem(table, expected: Mapping[str, str], source: str | Path) -> str | None:
    """The first problem of `table` (a `pyarrow.Table`, as read from the parquet file `source`) against
    `expected` (``{column: TEXT | TEXT_LIST | NUMBER}``), as a message naming file, field and row; ``None``
    when every expected column is there, of its type, without a null (a list holds no null item either)."""
    return column_kind_problem(table, expected, source) or column_null_problem(table, expected, source)


def column_kind_problem(table, expected: Mapping[str, str], source: str | Path) -> str | None:
    """The first expected column of `table` that is missing or stored as another type, named with `source`
    and the field (a whole column's problem: no row)."""
    for name, kind in expected.items():
        if name not in table.column_names:
            return f"{source}, field '{name}': the column is missing (expected {kind})"
        stored = table.schema.field(name).type
        if not _holds(stored, kind):
            return f"{source}, field '{name}': expected {kind}, the column holds {stored}"
    return None


def column_null_problem(table, expected: Mapping[str, str], source: str | Path) -> str | None:
    """The first null of the expected columns of `table` (or null item of a list column), named with `source`,
    the row (from 1) and the field; a missing column is :func:`column_kind_problem`'s to name."""
    for name, kind in expected.items():
        if name not in table.column_names:
            continue
        row = _first_null_row(table[name], kind)
        if row is not None:
            got = "a null item" if kind == TEXT_LIST and table[name][row - 1].is_valid else "None"
            return f"{source}, row {row}, field '{name}': expected {kind}, got {got}"
    return None


def _holds(arrow_type, kind: str) -> bool:
    """Whether a column of `arrow_type` reads back as `kind`."""
    import pyarrow as pa

    def is_text(value_type) -> bool:
        return pa.types.is_string(value_type) or pa.types.is_large_string(value_type)

    if kind == TEXT:
        return is_text(arrow_type)
    if kind == TEXT_LIST:
        is_list = pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)
        return is_list and is_text(arrow_type.value_type)
    return pa.types.is_floating(arrow_type) or pa.types.is_integer(arrow_type)


def _first_null_row(column, kind: str) -> int | None:
    """The first row (from 1) of `column` that is null or, for a list, holds a null item."""
    import pyarrow.compute as pc

    column = column.combine_chunks()
    rows = [pc.index(pc.is_null(column), True).as_py()] if column.null_count else []
    if kind == TEXT_LIST:
        items = pc.list_flatten(column)
        if items.null_count:
            item = pc.index(pc.is_null(items), True).as_py()
            rows.append(pc.list_parent_indices(column)[item].as_py())
    return min(rows) + 1 if rows else None
