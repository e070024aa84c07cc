"""Every ``evaluate`` module has a metric card and requirements; docs pages are copies of the cards."""

from __future__ import annotations

from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
OUR_MODULES = [
    "disease_leakage",
    "degeneration",
    "answer_forgetting",
    "model_utility",
    "forget_quality",
    "truth_ratio",
    "memorization",
    "mia",
    "contextual_contradiction",
]
OURS_DEFINITIONS = {
    "disease_leakage",
    "degeneration",
    "answer_forgetting",
    "model_utility",
    "contextual_contradiction",
}


def _card_body(card: str) -> str:
    assert card.startswith("---\n"), "a metric card starts with its Hub YAML header"
    return card.split("---\n", 2)[2]


@pytest.mark.parametrize("name", OUR_MODULES)
def test_metric_card_and_requirements(name):
    folder = REPOSITORY / "metrics" / name
    card = (folder / "README.md").read_text()
    for section in (
        "## Metric description",
        "### Inputs",
        "### Output values",
        "## Formula",
        "## Limitations and bias",
        "## Citation",
        "```bibtex",
    ):
        assert section in card, f"{name}'s card lacks {section!r}"
    assert ("## This definition is ours" in card) == (name in OURS_DEFINITIONS)
    requirements = (folder / "requirements.txt").read_text().split()
    assert "evaluate>=0.4.6" in requirements and "medunlearn[eval]" in requirements


@pytest.mark.parametrize("name", OUR_MODULES)
def test_docs_page_is_a_copy_of_the_card(name):
    page = (REPOSITORY / "docs" / "metrics" / f"{name}.md").read_text()
    card = (REPOSITORY / "metrics" / name / "README.md").read_text()
    comment, body = page.split("\n", 1)
    assert comment.startswith("<!--") and f"metrics/{name}/README.md" in comment
    assert body == _card_body(card), (
        f"docs/metrics/{name}.md is out of date: copy the card without its YAML header"
    )


def test_docs_index_links_every_module_and_shows_the_bare_name_after_the_install():
    index = (REPOSITORY / "docs" / "metrics" / "index.md").read_text()
    for name in OUR_MODULES:
        assert f"({name}.md)" in index
    install = index.index("medunlearn metrics install")
    assert install < index.index('evaluate.load("disease_leakage")  # by its bare name, offline')


@pytest.mark.parametrize("name", OUR_MODULES)
def test_card_shows_the_bare_name_after_the_install(name):
    card = (REPOSITORY / "metrics" / name / "README.md").read_text()
    assert card.index("medunlearn metrics install") < card.index(f'evaluate.load("{name}")')
    assert f'medunlearn.load_metric("{name}")' in card  # the way that needs no install
