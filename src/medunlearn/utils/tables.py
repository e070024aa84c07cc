"""Helpers for the rich tables commands print."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def in_sections(table, rows: Iterable[dict], key: str) -> Iterator[dict]:
    """``rows`` one by one, adding a section line to the rich ``table`` between rows whose ``row[key]``
    differs (a method's rows, a forget config's rows), so groups read apart."""
    previous = None
    for row in rows:
        if previous is not None and row[key] != previous:
            table.add_section()
        previous = row[key]
        yield row
