"""The CLI reference, rendered from the parsers themselves (`medunlearn.cli.subcommand_parser`) at build time.

mkdocs loads this file as a hook (`hooks:` in mkdocs.yml): `on_page_markdown` replaces the marker line in
docs/cli.md with every parser's `--help`, so the published reference cannot drift from the code. Run it
directly to see the page:

    python docs/gen_cli_reference.py            # print the rendered markdown
    python docs/gen_cli_reference.py --out FILE # write it to FILE
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

MARKER = "<!-- medunlearn-cli-reference -->"
WIDTH = "100"  # argparse wraps to $COLUMNS: fix it so the page does not depend on the terminal


def _nested_parsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:  # argparse has no public accessor for sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.items())
    return found


def render() -> str:
    os.environ["COLUMNS"] = WIDTH
    from medunlearn.cli import SUBCOMMANDS, build_parser, subcommand_parser

    parts = ["## medunlearn\n\n```text\n" + build_parser().format_help().rstrip() + "\n```\n"]
    for name, (_, summary) in SUBCOMMANDS.items():
        parser = subcommand_parser(name)
        parts.append(
            f"\n## medunlearn {name}\n\n{summary}.\n\n```text\n{parser.format_help().rstrip()}\n```\n"
        )
        for sub_name, sub_parser in _nested_parsers(parser):
            parts.append(
                f"\n### medunlearn {name} {sub_name}\n\n```text\n{sub_parser.format_help().rstrip()}\n```\n"
            )
    return "".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """mkdocs hook: fill the marker of docs/cli.md with the rendered reference."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the medunlearn CLI reference (markdown).")
    parser.add_argument("--out", type=Path, help="write to this file instead of printing")
    args = parser.parse_args(argv)
    text = render()
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
