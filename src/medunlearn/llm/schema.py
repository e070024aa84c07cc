"""JSON-schema answers: check a schema before any call, and parse + validate an answer after it.

Constrained decoding (xgrammar locally, guided decoding on a vLLM server) makes valid JSON likely, not
certain: an answer cut at ``max_tokens`` is unfinished JSON, and a hosted API may not enforce every keyword.
So every answer is validated with ``jsonschema`` after generation, whatever produced it.

>>> schema = {"type": "object", "properties": {"label": {"enum": ["yes", "no"]}}, "required": ["label"]}
>>> parse_json_answer('{"label": "yes"}', schema)
({'label': 'yes'}, None)
>>> parse_json_answer('{"label": "maybe"}', schema)[1]
"schema violation at $.label: 'maybe' is not one of ['yes', 'no']"
>>> parse_json_answer('{"label": "ye', schema)[1][:15]
'not valid JSON:'
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from medunlearn.llm.errors import RequestError

# Some servers without guided decoding wrap JSON in a Markdown fence even when asked for JSON only.
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(?P<body>.*?)\n?```\s*$", re.DOTALL)


def canonical_json(value: Any) -> str:
    """One text per JSON value (sorted keys, no spaces): what fingerprints and cache keys hash."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def schema_fingerprint(schema: dict) -> str:
    """A short stable id of a schema, to compile it once per backend.

    >>> schema_fingerprint({"type": "object"}) == schema_fingerprint({"type": "object"})
    True
    """
    return hashlib.sha256(canonical_json(schema).encode()).hexdigest()[:16]


def check_schema(schema: dict, where: str = "request") -> None:
    """Raise :class:`RequestError` when ``schema`` is not a valid JSON schema (draft 2020-12 rules)."""
    import jsonschema

    if not isinstance(schema, dict):
        raise RequestError(f"{where}: json_schema must be a dict, got {type(schema).__name__}")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as error:
        raise RequestError(f"{where}: json_schema is not a valid JSON schema: {error.message}") from None


def strip_code_fence(text: str) -> str:
    r"""The JSON inside a Markdown code fence, or ``text`` unchanged.

    >>> strip_code_fence('```json\n{"a": 1}\n```')
    '{"a": 1}'
    """
    match = _FENCE.match(text)
    return match.group("body") if match else text


def _path(error) -> str:
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)


def parse_json_answer(text: str, schema: dict) -> tuple[Any, str | None]:
    """``(value, None)`` when ``text`` is JSON valid against ``schema``, else ``(None, reason)``."""
    import jsonschema

    try:
        value = json.loads(strip_code_fence(text))
    except json.JSONDecodeError as error:
        return None, f"not valid JSON: {error.msg} at character {error.pos}"
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        return None, f"schema violation at {_path(error)}: {error.message}"
    return value, None
