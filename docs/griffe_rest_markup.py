"""A griffe extension for the API reference (mkdocs.yml): the reST markup some docstrings still use, rendered
as Markdown instead of shown raw.

- ``:class:`~medunlearn.models.ModelArguments``` (any ``:role:``) becomes inline code of the name (the last
  component with ``~``, the whole path without);
- a paragraph ending in ``::`` (a reST literal block follows) ends in ``:``; the indented block after it is
  already a Markdown code block;
- a reST section title (a line underlined with ``---`` or ``===``) becomes a bold line, not a heading that
  would enter the page's table of contents;
- a Hugging Face-style argument line, ``name (`float`, *optional*, defaults to `1.0`):``, keeps only the type,
  without backticks, in its parentheses (the Type column renders it as code already, so backticks would show
  literally); the qualifiers are dropped when they only repeat the Default column ("optional, defaults to
  `1.0`"), and open the description otherwise ("defaults to the model's name").

The docstrings themselves are converted as they are edited; this keeps the rendered pages clean meanwhile.
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`<>]+?)`")
LITERAL_BLOCK_MARKER = re.compile(r"(\S)::[ \t]*$", re.M)
SECTION_TITLE = re.compile(r"^([^\n]*\S[^\n]*)\n[-=~^]{3,}[ \t]*$", re.M)
# An argument line of a Google-style "Args:" section whose parenthesised type carries backticks.
HF_ARGUMENT = re.compile(r"^([ \t]+\*{0,2}\w+) \(([^\n]*?`[^\n]*?)\):[ \t]*", re.M)
# Where the type ends and the Hugging Face qualifiers begin (a comma inside Literal[...] is not one of them).
# "optional", "defaults to `1.0`" or both: nothing the Default column does not say.
PLAIN_DEFAULT = re.compile(r"(?:optional)?(?:,?\s*defaults? to (?:`[^`]*`|``[^`]*``|[\w.\-]+))?")
QUALIFIERS = re.compile(r",\s*(?=\*optional\*|optional\b|defaults? to\b)")


def _argument_line(match: re.Match) -> str:
    name, inside = match.group(1), match.group(2)
    parts = QUALIFIERS.split(inside, maxsplit=1)
    type_text = parts[0].replace("`", "").strip()
    if len(parts) == 1:
        return f"{name} ({type_text}): "
    qualifiers = parts[1].replace("*optional*", "optional").strip()
    if PLAIN_DEFAULT.fullmatch(qualifiers):
        return f"{name} ({type_text}): "  # the table's Default column shows it, from the signature
    return f"{name} ({type_text}): ({qualifiers}) "


def rest_to_markdown(text: str) -> str:
    text = ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)
    text = LITERAL_BLOCK_MARKER.sub(r"\1:", text)
    text = HF_ARGUMENT.sub(_argument_line, text)
    return SECTION_TITLE.sub(r"**\1**", text)


class RestMarkup(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rest_to_markdown(obj.docstring.value)
