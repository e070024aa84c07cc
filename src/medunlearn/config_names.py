"""The names of forget, retain and holdout configs, in one place: parse, build, validate, and list a folder's.

The grammar [ours for AMNESIA, docs/benchmarks/amnesia.md "Splits"; ref: the ``locuslab/TOFU`` dataset card]:

* AMNESIA: ``forget_X`` and its complement ``retain_{100-X}`` (random patient-level split), and
  ``disease_D_forget_X`` / ``disease_D_retain_{100-X}`` (disease D, lowercase letters, digits and ``_``);
  X is a whole percentage.
* TOFU: ``forgetXX``, ``retainXX``, ``holdoutXX`` with two digits (``forget05`` → ``retain95``,
  ``holdout05``); the Hub also has ``full_minus_forgetXX`` and ``…_perturbed`` variants.
* MUSE: the ``scal`` and ``sust`` folds ``forget_1`` … ``forget_4`` (:data:`MUSE_FOLDS`; ref: the
  ``muse-bench/MUSE-News`` dataset card).

A name that does not follow it raises :class:`ConfigNameError`, whose message names the forms it needs.

>>> name = SplitName.parse("disease_cancer_forget_15")
>>> name.disease, name.percent, str(name.complement())
('cancer', 15, 'disease_cancer_retain_85')
>>> str(SplitName("forget", 5, benchmark="tofu").holdout())
'holdout05'
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from medunlearn.errors import InputError

Role = Literal["forget", "retain", "holdout"]
Benchmark = Literal["amnesia", "tofu"]

_AMNESIA = re.compile(
    r"(?:disease_(?P<disease>[a-z0-9_]+?)_)?(?P<role>forget|retain)_(?P<percent>0|[1-9]\d*)"
)
_TOFU = re.compile(r"(?P<role>forget|retain|holdout)(?P<percent>\d\d)")
_DISEASE = re.compile(r"[a-z0-9_]+")
# MUSE's scalability and sustainability folds, in order (the Hub's split names).
MUSE_FOLDS = ("forget_1", "forget_2", "forget_3", "forget_4")
# Every split config of the TOFU Hub: the above, the Hub's ``full_minus_forgetXX``, and perturbed sets.
_TOFU_HUB_SPLIT = re.compile(r"(?:forget|retain|holdout|full_minus_forget)\d\d(?:_perturbed)?")
_FORMS = (
    "forget_X, retain_X, disease_<name>_forget_X, disease_<name>_retain_X "
    "(TOFU: forgetXX, retainXX, holdoutXX)"
)
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(?P<yaml>.*?)^---[ \t]*$", re.DOTALL | re.MULTILINE)


class ConfigNameError(InputError):
    """A config name that does not follow the benchmark's naming (the message says which form it needs)."""


@dataclass(frozen=True)
class SplitName:
    """One forget, retain or holdout config name, parsed: ``str()`` gives the name back.

    ``percent`` is the share of the benchmark the config holds (``retain_90``: 90); ``disease`` is set for an
    AMNESIA disease-level config only; TOFU has no ``retain`` of its own beyond the complement of a forget
    config, and only TOFU has ``holdout`` configs.
    """

    role: Role
    percent: int
    disease: str | None = None
    benchmark: Benchmark = "amnesia"

    def __post_init__(self) -> None:
        if self.role not in ("forget", "retain", "holdout"):
            raise ConfigNameError(f"config role must be forget, retain or holdout, got {self.role!r}")
        if self.benchmark not in ("amnesia", "tofu"):
            raise ConfigNameError(f"benchmark must be amnesia or tofu, got {self.benchmark!r}")
        if (
            isinstance(self.percent, bool)
            or not isinstance(self.percent, int)
            or not 0 <= self.percent <= 100
        ):
            raise ConfigNameError(f"config percentage must be a whole number in 0..100, got {self.percent!r}")
        if self.benchmark == "amnesia" and self.role == "holdout":
            raise ConfigNameError("AMNESIA has one `full` holdout split, no holdout_X config")
        if self.disease is not None and (self.benchmark != "amnesia" or not _DISEASE.fullmatch(self.disease)):
            raise ConfigNameError(
                f"disease {self.disease!r}: only an AMNESIA config has one (lowercase letters, digits, _)"
            )

    @classmethod
    def parse(cls, name: str) -> SplitName:
        """The parts of ``name``; :class:`ConfigNameError` when it follows neither benchmark's grammar.

        >>> SplitName.parse("retain_90"), SplitName.parse("forget01").benchmark
        (SplitName(role='retain', percent=90, disease=None, benchmark='amnesia'), 'tofu')
        """
        amnesia = _AMNESIA.fullmatch(name) if isinstance(name, str) else None
        if amnesia:
            return cls(amnesia["role"], int(amnesia["percent"]), amnesia["disease"])
        tofu = _TOFU.fullmatch(name) if isinstance(name, str) else None
        if tofu:
            return cls(tofu["role"], int(tofu["percent"]), benchmark="tofu")
        raise ConfigNameError(f"config name {name!r} is not of the form {_FORMS}")

    def __str__(self) -> str:
        if self.benchmark == "tofu":
            return f"{self.role}{self.percent:02d}"
        prefix = f"disease_{self.disease}_" if self.disease else ""
        return f"{prefix}{self.role}_{self.percent}"

    @property
    def name(self) -> str:
        return str(self)

    def complement(self) -> SplitName:
        """The config that completes this one to ``full``: ``forget_10`` ↔ ``retain_90``."""
        if self.role == "holdout":
            raise ConfigNameError(f"{self}: a holdout config has no complement in `full`")
        other: Role = "retain" if self.role == "forget" else "forget"
        return SplitName(other, 100 - self.percent, self.disease, self.benchmark)

    def holdout(self) -> SplitName:
        """TOFU: the never-seen questions as many as this forget config's (``forget05`` → ``holdout05``)."""
        if self.benchmark != "tofu" or self.role != "forget":
            raise ConfigNameError(f"{self}: only a TOFU forget config has a holdoutXX config")
        return SplitName("holdout", self.percent, benchmark="tofu")


def parse_config_name(name: str) -> SplitName:
    """:meth:`SplitName.parse`."""
    return SplitName.parse(name)


def is_forget_config(name: str, benchmark: Benchmark | None = None) -> bool:
    """Is ``name`` a forget config (``forget_10``, ``disease_cancer_forget_5``, TOFU ``forget05``), of
    ``benchmark`` when given?"""
    try:
        split = SplitName.parse(name)
    except ConfigNameError:
        return False
    return split.role == "forget" and benchmark in (None, split.benchmark)


def forget_config(percent: int, disease: str | None = None, benchmark: Benchmark = "amnesia") -> str:
    """The forget config of ``percent`` %: ``forget_10``, ``disease_cancer_forget_10``, TOFU ``forget10``."""
    return str(SplitName("forget", percent, disease, benchmark))


def retain_config_for(forget_config: str) -> str:
    """The retain config that completes a forget config to ``full``.

    >>> (
    ...     retain_config_for("forget_10"),
    ...     retain_config_for("disease_cancer_forget_5"),
    ...     retain_config_for("forget05"),
    ... )
    ('retain_90', 'disease_cancer_retain_95', 'retain95')
    """
    if not is_forget_config(forget_config):
        raise ConfigNameError(
            f"forget config {forget_config!r} is not of the form forget_X or disease_<name>_forget_X "
            "(TOFU: forgetXX); pass the retain config explicitly"
        )
    return str(SplitName.parse(forget_config).complement())


def forget_config_of(name: str) -> str | None:
    """The forget config a forget or retain config belongs to (``retain_90`` → ``forget_10``); None for any
    other name (``notes``, ``full``, ``holdout05``)."""
    try:
        split = SplitName.parse(name)
    except ConfigNameError:
        return None
    if split.role == "holdout":
        return None
    return str(split if split.role == "forget" else split.complement())


def amnesia_config_pairs(percentages: Iterable[int], diseases: Iterable[str] = ()) -> list[str]:
    """Every AMNESIA forget config and its retain config, random level first, then each disease in order.

    >>> amnesia_config_pairs([5], ["cancer"])
    ['forget_5', 'retain_95', 'disease_cancer_forget_5', 'disease_cancer_retain_95']
    """
    percentages = list(percentages)
    names = []
    for disease in [None, *diseases]:
        for percent in percentages:
            forget = SplitName("forget", percent, disease)
            names += [str(forget), str(forget.complement())]
    return names


def is_tofu_hub_split(name: str) -> bool:
    """Is ``name`` a split config the TOFU Hub dataset may have (``forget20``, ``full_minus_forget05``,
    ``holdout10_perturbed``, …), beyond the ones a local folder is built with?"""
    return bool(_TOFU_HUB_SPLIT.fullmatch(name))


def readme_configs(readme_text: str, source: str = "README.md") -> list[str]:
    """The config names of a dataset card's YAML ``configs:`` block, in order; empty without one."""
    import yaml

    header = _FRONT_MATTER.match(readme_text)
    if not header:
        return []
    try:
        card = yaml.safe_load(header["yaml"]) or {}
    except yaml.YAMLError as error:
        raise InputError(f"{source}: the YAML header cannot be read: {error}") from error
    configs = card.get("configs") if isinstance(card, dict) else None
    if not isinstance(configs, list):
        return []
    return [
        str(entry["config_name"]) for entry in configs if isinstance(entry, dict) and "config_name" in entry
    ]


def folder_configs(folder: str | os.PathLike) -> list[str]:
    """The configs a dataset folder offers: the names in its ``README.md``'s ``configs:`` block, in order.

    Empty when the folder has no README or the README has no ``configs:`` block (then ``datasets`` infers the
    configs, and only loading tells).
    """
    readme = Path(folder) / "README.md"
    if not readme.is_file():
        return []
    return readme_configs(readme.read_text(encoding="utf-8"), str(readme))


def forget_configs(names: Iterable[str]) -> list[str]:
    """The forget configs among ``names``, in order (e.g. of :func:`folder_configs`)."""
    return [name for name in names if is_forget_config(name)]


__all__ = [
    "Benchmark",
    "ConfigNameError",
    "Role",
    "SplitName",
    "amnesia_config_pairs",
    "folder_configs",
    "forget_config",
    "forget_config_of",
    "forget_configs",
    "is_forget_config",
    "is_tofu_hub_split",
    "parse_config_name",
    "readme_configs",
    "retain_config_for",
]
