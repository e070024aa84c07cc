r"""Locating a field of a JSON text for an error message: a key given twice (found while parsing, then
located), and the key path of a value no file can hold (a lone surrogate, a non-finite number).

Python's ``json`` keeps the last value of a repeated key without a word (``{"answer": "A", "answer": "B"}``
reads as ``{"answer": "B"}``); `medunlearn.utils.user_files.parse_json`, the one JSON reader of user files,
passes `unique_keys` as ``object_pairs_hook`` and, when it raises, names the line and key that
`first_repeated_key` finds.

>>> import json
>>> json.loads('{"a": 1, "b": {"a": 2}}', object_pairs_hook=unique_keys)
{'a': 1, 'b': {'a': 2}}
>>> try:
...     json.loads('{"a": 1, "a": 2}', object_pairs_hook=unique_keys)
... except DuplicateKeyError:
...     print("refused")
refused
>>> first_repeated_key('{"a": {"b": 1},\n "c": [{"b": 2}],\n "a": 3}')
(3, 1, 'a')
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any


class DuplicateKeyError(Exception):
    """An object of a JSON text gives a key twice (`first_repeated_key` then finds where)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """`json`'s ``object_pairs_hook``: the object as a dict, or `DuplicateKeyError` when a key comes twice
    (``json`` itself keeps the last value without a word)."""
    value = dict(pairs)
    if len(value) < len(pairs):
        raise DuplicateKeyError
    return value


# A JSON token `first_repeated_key` must see: a string (a key when a colon follows), or a bracket.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"(?=(\s*:)?)|[{}\[\]]')


def first_repeated_key(text: str) -> tuple[int, int, str]:
    """``(line, first line, key path)`` of the first key in `text` (valid JSON) that its own object gave
    before: the lines (1-based) of its two occurrences and the dotted path to it (``metrics.forget_quality``;
    a list item keeps its parent's key)."""
    stack: list[tuple[dict | None, str]] = []  # per open object: its keys' lines (an array: None), its path
    last_key = ""
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token in ("{", "["):
            parent = stack[-1][1] if stack else ""
            path = last_key if stack and stack[-1][0] is not None else parent
            stack.append(({} if token == "{" else None, path))
        elif token in ("}", "]"):
            stack.pop()
        elif match.group(1) is not None and stack and stack[-1][0] is not None:
            seen, path = stack[-1]
            key = json.loads(token)
            last_key = f"{path}.{key}" if path else key
            at = text.count("\n", 0, match.start()) + 1
            if key in seen:
                return at, seen[key], last_key
            seen[key] = at
    raise AssertionError("no repeated key found")  # pragma: no cover - `unique_keys` found one


# A lone \\uD800-\\uDBFF or \\uDC00-\\uDFFF escape (one not in a pair) decodes to a str no file can hold.
LONE_SURROGATE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def holds_lone_surrogate(value: Any) -> bool:
    return isinstance(value, str) and any("\ud800" <= character <= "\udfff" for character in value)


def key_path_of(value: Any, found_in: Callable[[Any], bool], prefix: str = "") -> tuple[bool, str | None]:
    """``(found, path)``: whether `value` holds a value `found_in` accepts (a key counts as one), and the
    dotted key path to the first (``a.b``; a list item keeps its parent's key; ``None`` for the whole
    value)."""
    if found_in(value):
        return True, prefix or None
    if isinstance(value, dict):
        children = ((f"{prefix}.{key}" if prefix else str(key), key, item) for key, item in value.items())
    elif isinstance(value, list):
        children = ((prefix, None, item) for item in value)
    else:
        return False, None
    for path, key, item in children:
        if key is not None and found_in(key):
            return True, path
        found, where = key_path_of(item, found_in, path)
        if found:
            return True, where
    return False, None
