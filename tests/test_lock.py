"""The lock (requirements/constraints.txt, written by `make lock`) satisfies pyproject.toml's requirements.

`make lock-check` re-resolves against PyPI; this test is its offline half: every requirement of the ``dev``
extra (which includes every other extra) has a pin in the lock that satisfies it, and torch is pinned to the
version the Makefile installs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")
from packaging.markers import default_environment  # noqa: E402
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "constraints.txt"
MODELS_LOCK = ROOT / "requirements" / "offline-models.txt"


def read_pins(path: Path) -> dict[str, str]:
    """``name == version`` lines of a uv/pip-compile output (comments and markers left out)."""
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;]+)", line)
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(3)
    return pins


def project_requirements(pyproject: dict, extra: str = "dev") -> list[Requirement]:
    """The project's dependencies and those of ``extra``, with its self-references (``medunlearn[a,b]``)
    expanded into those extras' requirements."""
    optional = pyproject["project"]["optional-dependencies"]
    name = canonicalize_name(pyproject["project"]["name"])
    found = [Requirement(text) for text in pyproject["project"]["dependencies"]]
    pending, seen = [extra], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for text in optional[current]:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == name:
                pending.extend(requirement.extras)
            else:
                found.append(requirement)
    return found


def unsatisfied(requirements: list[Requirement], pins: dict[str, str]) -> list[str]:
    environment = default_environment()
    problems = []
    for requirement in requirements:
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        pinned = pins.get(canonicalize_name(requirement.name))
        if pinned is None:
            problems.append(f"{requirement}: not in the lock")
        elif not requirement.specifier.contains(pinned, prereleases=True):
            problems.append(f"{requirement}: the lock pins {pinned}")
    return problems


def test_every_requirement_of_the_dev_extra_is_pinned_by_the_lock_to_a_version_it_allows():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert unsatisfied(project_requirements(pyproject), read_pins(LOCK)) == []


def test_a_raised_lower_bound_the_lock_does_not_meet_is_reported():
    pyproject = {
        "project": {
            "name": "medunlearn",
            "dependencies": ["tqdm>=4.66"],
            "optional-dependencies": {"train": ["torch>=2.13"], "dev": ["medunlearn[train]", "ruff>=0.6"]},
        }
    }
    pins = {"tqdm": "4.65.0", "torch": "2.13.0"}
    assert unsatisfied(project_requirements(pyproject), pins) == [
        "tqdm>=4.66: the lock pins 4.65.0",
        "ruff>=0.6: not in the lock",
    ]


def test_torch_is_locked_at_the_version_the_makefile_installs_first():
    version = re.search(r"^TORCH_VERSION \?= (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert read_pins(LOCK)["torch"] == version


def test_the_offline_model_packages_are_pinned():
    requirements = [
        Requirement(line)
        for line in (ROOT / "requirements" / "offline-models.in").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert unsatisfied(requirements, read_pins(MODELS_LOCK)) == []
