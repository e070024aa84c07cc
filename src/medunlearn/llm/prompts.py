r"""Versioned prompt templates as data files (docs/llm.md): YAML with ``version``, ``system`` and ``user``.

The ``version`` goes into every request's ``prompt_version``, so it is part of the LLM cache key: bump it when
the wording changes and old answers are never read for the new prompt. The dataset card names the version and
the file's SHA-256. A user replaces a built-in prompt with their own file of the same shape. The AMNESIA
construction pipeline (``medunlearn/amnesia/sources/llm_built/prompts/*.yaml``) and BioDivergence mining
(``medunlearn/biodivergence/mining/prompts/*.yaml``) both load their prompts here; a pipeline that reports
its own error class passes it as ``error``.

>>> text = "version: demo-v1\nsystem: Be brief.\nuser: Label {claim}.\n"
>>> template = parse_prompt(text, "inline", "demo")
>>> template.messages(claim="X")[1]
{'role': 'user', 'content': 'Label X.'}
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from medunlearn.llm.errors import LLMError


class PromptError(LLMError, ValueError):
    """A prompt file that cannot be used: missing, not YAML, a field missing, or a template that cannot be
    filled (the message names the file and the field)."""


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt: a ``version`` (part of the cache key, named in the card), a system and a user template.

    ``error`` is the exception class a template that cannot be filled raises (default :class:`PromptError`).
    """

    name: str
    version: str
    system: str
    user: str
    source: str  # "builtin" or the override file's path
    sha256: str
    error: type[Exception] = field(default=PromptError, repr=False, compare=False)

    def messages(self, **fields: Any) -> list[dict[str, str]]:
        """The chat messages, the user template filled with ``fields`` (``str.format``)."""
        try:
            user = self.user.format(**fields)
        except (KeyError, IndexError, ValueError) as error:
            raise self.error(
                f"{self.source}, field 'user': cannot fill the template ({error!r}); "
                f"available fields: {', '.join(sorted(fields))}; write literal braces as {{{{ and }}}}"
            ) from None
        return [{"role": "system", "content": self.system.strip()}, {"role": "user", "content": user.strip()}]

    def describe(self) -> dict[str, str]:
        """What a card or report names: the prompt, its version, where it came from and its digest."""
        return {"name": self.name, "version": self.version, "source": self.source, "sha256": self.sha256}


def parse_prompt(text: str, source: str, name: str, error: type[Exception] = PromptError) -> PromptTemplate:
    """A :class:`PromptTemplate` from the YAML ``text`` of ``source`` (a path or "builtin"); a problem raises
    ``error``, and so does filling the template later."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as yaml_error:
        raise error(f"{source}: not valid YAML: {yaml_error}") from None
    if not isinstance(data, dict):
        raise error(f"{source}: expected a mapping with version, system and user")
    for key in ("version", "system", "user"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise error(f"{source}, field {key!r}: missing or empty (a non-empty string is needed)")
    return PromptTemplate(
        name=name,
        version=data["version"].strip(),
        system=data["system"],
        user=data["user"],
        source=source,
        sha256=hashlib.sha256(text.encode()).hexdigest()[:16],
        error=error,
    )


def load_prompt(
    name: str,
    package: str,
    path: str | os.PathLike | None = None,
    error: type[Exception] = PromptError,
) -> PromptTemplate:
    """The built-in prompt ``package/prompts/NAME.yaml``, or the YAML file at ``path`` that replaces it; a
    problem with it raises ``error`` (default :class:`PromptError`)."""
    if path is None:
        builtin = resources.files(package).joinpath("prompts").joinpath(f"{name}.yaml")
        text = builtin.read_text(encoding="utf-8")
        return parse_prompt(text, "builtin", name, error)
    if not Path(path).is_file():
        raise error(f"{path}: no such prompt file (for prompt {name!r})")
    return parse_prompt(Path(path).read_text(encoding="utf-8"), str(path), name, error)
