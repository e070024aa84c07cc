"""A griffe extension for the API reference (mkdocs.yml): the reST and Hugging Face markup some docstrings
use, rendered as Markdown instead of shown raw.

- ``:class:`~medunlearn.models.ModelArguments``` (any ``:role:``) becomes inline code of the name (the last
  component with ``~``, the whole path without);
- a paragraph ending in ``::`` (a reST literal block follows) ends in ``:``; the indented block after it is
  already a Markdown code block;
- a reST section title (a line underlined with ``---`` or ``===``) becomes a bold line, not a heading that
  would enter the page's table of contents;
- a reST simple table (rows between ``=====  =====`` borders, a blank first cell continuing the row above)
  becomes a Markdown table;
- a doctest (``>>>`` lines and their output) becomes a ``pycon`` code block without its ``# doctest:``
  directives (Markdown would read ``>>>`` as three nested quotes);
- a Hugging Face-style argument line, ``name (`float`, *optional*, defaults to `1.0`):``, keeps only the type,
  without backticks, in its parentheses (the Type column renders it as code already, so backticks would show
  literally); the qualifiers are dropped when they only repeat the Default column ("optional, defaults to
  `1.0`"), and open the description otherwise ("defaults to the model's name"). A type that only lists
  strings (`` `"qa"`, `"notes"` or `"both"` ``) is shown as ``Literal["qa", "notes", "both"]``;
- a Hugging Face note (``> [!NOTE]`` and its ``>`` lines) becomes an admonition, and a Hugging Face doc link
  (``[`~transformers.TrainingArguments`]``) inline code of the name.

The docstrings keep the markup ``help()`` and the Hugging Face anchors read; this keeps the rendered pages
clean.
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
# '"qa", "notes" or "both"': griffe would read the commas as a tuple and show ('qa', 'notes' or 'both').
STRING_CHOICES = re.compile(r'"[^"]*"(?:(?:,| or) "[^"]*")+')
TABLE_BORDER = re.compile(r"^=+(?: +=+)+ *$")
DOCTEST_DIRECTIVE = re.compile(r"[ \t]*# doctest:[^\n]*$", re.M)
HF_NOTE = re.compile(r"^> \[!(NOTE|TIP|IMPORTANT|WARNING|CAUTION)\][ \t]*\n((?:>[^\n]*(?:\n|$))*)", re.M)
ADMONITIONS = {"NOTE": "note", "TIP": "tip", "IMPORTANT": "info", "WARNING": "warning", "CAUTION": "danger"}
# [`~transformers.TrainingArguments`] or [`UnlearningConfig`], not a Markdown link ([`x`](url), [`x`][ref]).
HF_LINK = re.compile(r"\[`(~?)([\w.]+)`\](?![(\[])")


def _argument_type(type_text: str) -> str:
    if STRING_CHOICES.fullmatch(type_text):
        return "Literal[" + ", ".join(re.findall(r'"[^"]*"', type_text)) + "]"
    return type_text


def _argument_line(match: re.Match) -> str:
    name, inside = match.group(1), match.group(2)
    parts = QUALIFIERS.split(inside, maxsplit=1)
    type_text = _argument_type(parts[0].replace("`", "").strip())
    if len(parts) == 1:
        return f"{name} ({type_text}): "
    qualifiers = parts[1].replace("*optional*", "optional").strip()
    if PLAIN_DEFAULT.fullmatch(qualifiers):
        return f"{name} ({type_text}): "  # the table's Default column shows it, from the signature
    return f"{name} ({type_text}): ({qualifiers}) "


def _column_spans(border: str) -> list[tuple[int, int | None]]:
    starts = [m.start() for m in re.finditer(r"=+", border)]
    return [(start, end) for start, end in zip(starts, [*starts[1:], None])]


def _table_rows(lines: list[str], spans: list[tuple[int, int | None]]) -> list[list[str]]:
    rows: list[list[str]] = []
    for line in lines:
        cells = [line[start:end].strip() for start, end in spans]
        if rows and not cells[0]:  # a blank first cell continues the row above
            rows[-1] = [f"{old} {new}".strip() for old, new in zip(rows[-1], cells)]
        else:
            rows.append(cells)
    return rows


def _markdown_table(rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return ["", line(rows[0]), "|" + " --- |" * len(rows[0]), *(line(row) for row in rows[1:]), ""]


def _table_end(lines: list[str], i: int) -> int | None:
    """The line after the simple table whose top border is line ``i`` (None: no table starts there)."""
    if not TABLE_BORDER.match(lines[i]):
        return None
    borders = [j for j in range(i + 1, len(lines)) if lines[j] == lines[i]][:2]
    if len(borders) < 2 or borders[0] - i < 2:
        return None
    return borders[1] + 1


def simple_tables_to_markdown(text: str) -> str:
    """Each reST simple table (border, header, border, rows, border) as a Markdown table."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        end = _table_end(lines, i)
        if end is None:
            out.append(lines[i])
            i += 1
            continue
        spans, middle = _column_spans(lines[i]), [j for j in range(i + 1, end) if lines[j] == lines[i]][0]
        header = _table_rows(lines[i + 1 : middle], spans)
        out += _markdown_table(header[:1] + _table_rows(lines[middle + 1 : end - 1], spans))
        i = end
    return "\n".join(out)


def doctests_to_code_blocks(text: str) -> str:
    """Each run of ``>>>`` lines and their output (up to a blank line) in a ``pycon`` fence."""
    lines, out, in_fence, i = text.split("\n"), [], False, 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        if stripped.startswith("```"):
            in_fence = not in_fence
        if in_fence or not stripped.startswith(">>>"):
            out.append(lines[i])
            i += 1
            continue
        indent = lines[i][: len(lines[i]) - len(stripped)]
        end = i
        while end < len(lines) and lines[end].strip() and lines[end].startswith(indent):
            end += 1
        block = DOCTEST_DIRECTIVE.sub("", "\n".join(line[len(indent) :] for line in lines[i:end]))
        out += ["", f"{indent}```pycon", *(indent + line for line in block.split("\n")), f"{indent}```", ""]
        i = end
    return "\n".join(out)


def _admonition(match: re.Match) -> str:
    body, previous = [], ""
    for line in match.group(2).rstrip("\n").split("\n"):
        line = re.sub(r"^> ?", "", line)
        if line.startswith("- ") and previous.strip() and not previous.startswith("- "):
            body.append("")  # Python-Markdown needs a blank line before a list
        body.append(f"    {line}" if line.strip() else "")
        previous = line if not line.startswith("  ") else previous
    return f"!!! {ADMONITIONS[match.group(1)]}\n" + "\n".join(body) + "\n"


def rest_to_markdown(text: str) -> str:
    text = ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)
    text = LITERAL_BLOCK_MARKER.sub(r"\1:", text)
    text = HF_ARGUMENT.sub(_argument_line, text)
    text = HF_NOTE.sub(_admonition, text)
    text = HF_LINK.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)
    text = doctests_to_code_blocks(simple_tables_to_markdown(text))
    return SECTION_TITLE.sub(r"**\1**", text)


class RestMarkup(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rest_to_markdown(obj.docstring.value)
