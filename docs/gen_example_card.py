"""The AMNESIA dataset card example, rendered at site build time from a real 40-patient build.

mkdocs loads this file as a hook (`hooks:` in mkdocs.yml): `on_page_markdown` replaces the marker line in
docs/datasets/amnesia.md with the README.md that `build_amnesia_folder` writes, so the page shows exactly what
the code produces. Run it directly to print the card.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

MARKER = "<!-- medunlearn-amnesia-example-card -->"
PATIENTS, SEED = 40, 0


def example_card() -> tuple[str, str]:
    """``(yaml_header, body)`` of the README of a fictitious 40-patient, seed-0 AMNESIA folder."""
    from medunlearn.amnesia import build_amnesia_folder

    with tempfile.TemporaryDirectory(prefix="medunlearn-docs-") as tmp:
        folder = build_amnesia_folder(Path(tmp) / "amnesia", patients=PATIENTS, seed=SEED)
        text = (folder / "README.md").read_text()
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, flags=re.S)
    return (match.group(1), match.group(2)) if match else ("", text)


def render() -> str:
    header, body = example_card()
    # One heading level down, so the card's title sits under this page's own title.
    body = re.sub(r"^(#+) ", r"#\1 ", body, flags=re.M)
    return (
        f"The README.md of `medunlearn amnesia build --out amnesia --patients {PATIENTS} --seed {SEED}`, "
        "rendered. Its YAML header (the `configs:` block `load_dataset` reads) comes first:\n\n"
        f"```yaml\n---\n{header}\n---\n```\n\n{body}"
    )


def on_page_markdown(markdown: str, page, config, files) -> str:
    """mkdocs hook: fill the marker of docs/datasets/amnesia.md with the rendered card."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())


if __name__ == "__main__":
    print(render())
    sys.exit(0)
