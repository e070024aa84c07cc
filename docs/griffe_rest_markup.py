"""A griffe extension for the API reference (mkdocs.yml): the reST markup some docstrings still use, rendered
as Markdown instead of shown raw.

- ``:class:`~medunlearn.models.ModelArguments``` (any ``:role:``) becomes inline code of the name (the last
  component with ``~``, the whole path without);
- a paragraph ending in ``::`` (a reST literal block follows) ends in ``:``; the indented block after it is
  already a Markdown code block;
- a reST section title (a line underlined with ``---`` or ``===``) becomes a bold line, not a heading that
  would enter the page's table of contents.

The docstrings themselves are converted as they are edited; this keeps the rendered pages clean meanwhile.
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`<>]+?)`")
LITERAL_BLOCK_MARKER = re.compile(r"(\S)::[ \t]*$", re.M)
SECTION_TITLE = re.compile(r"^([^\n]*\S[^\n]*)\n[-=~^]{3,}[ \t]*$", re.M)


def rest_to_markdown(text: str) -> str:
    text = ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)
    text = LITERAL_BLOCK_MARKER.sub(r"\1:", text)
    return SECTION_TITLE.sub(r"**\1**", text)


class RestMarkup(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rest_to_markdown(obj.docstring.value)
