"""TOFU-format benchmarks: the Hub layout of ``locuslab/TOFU``, read from the Hub or a local folder of that
shape.

Layout [ref: the ``locuslab/TOFU`` dataset card]: one JSON-lines file per config at the folder root, declared
in the README's YAML ``configs:`` block; every config has a single ``train`` split.

* QA configs ``full``, ``forget01/05/10``, ``retain90/95/99``, ``holdout01/05/10``, ``real_authors``,
  ``world_facts``: ``question, answer``.
* ``forget{01,05,10}_perturbed`` and ``retain_perturbed``: ``question, answer, paraphrased_answer,
  paraphrased_question, perturbed_answer`` (a non-empty list of wrong answers written like the paraphrase;
  a single string is refused, not read as a list of characters).
* ``real_authors_perturbed`` and ``world_facts_perturbed``: ``question, answer, perturbed_answer`` (the wrong
  options of a multiple-choice question).

``load_tofu(source, config)`` reads one config (a Hub id or a local folder) with ``datasets.load_dataset``,
through ``medunlearn.data_loading.load_config`` so a local folder is read as it is now, not from the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from medunlearn.config_names import SplitName, is_forget_config, is_tofu_hub_split, retain_config_for
from medunlearn.data_loading import check_no_repeated_question, load_config, split_source
from medunlearn.errors import MedunlearnError, MissingInputError, shown
from medunlearn.utils.text_limits import text_problem

HUB_ID = "locuslab/TOFU"
FORGET_CONFIGS = ("forget01", "forget05", "forget10")
RETAIN_CONFIGS = ("retain99", "retain95", "retain90")
HOLDOUT_CONFIGS = ("holdout01", "holdout05", "holdout10")
QA_CONFIGS = ("full", *FORGET_CONFIGS, *RETAIN_CONFIGS, *HOLDOUT_CONFIGS, "real_authors", "world_facts")
PERTURBED_CONFIGS = (
    *(f"{name}_perturbed" for name in FORGET_CONFIGS),
    "retain_perturbed",
    "real_authors_perturbed",
    "world_facts_perturbed",
)
ALL_CONFIGS = QA_CONFIGS + PERTURBED_CONFIGS
QA_COLUMNS = ("question", "answer")
PERTURBED_COLUMNS = ("question", "answer", "paraphrased_answer", "paraphrased_question", "perturbed_answer")
OPTION_COLUMNS = ("question", "answer", "perturbed_answer")


class TofuInputError(MedunlearnError, ValueError):
    """A TOFU source, config or row the user gave cannot be used (the message names it)."""


def columns_of(config: str) -> tuple[str, ...]:
    """The columns a TOFU config must have."""
    if config in ("real_authors_perturbed", "world_facts_perturbed"):
        return OPTION_COLUMNS
    if config.endswith("_perturbed"):
        return PERTURBED_COLUMNS
    return QA_COLUMNS


@dataclass(frozen=True)
class TofuSplits:
    """The configs one forget split is evaluated and trained with [ref: OpenUnlearning ``eval/tofu.yaml``]."""

    forget: str  # e.g. forget10: trained on, then unlearned
    retain: str  # retain90: the rest of ``full``; what a retain model is fine-tuned on
    holdout: str  # holdout10: never seen, the non-members of the MIA
    forget_perturbed: str  # forget10_perturbed: the forget questions with paraphrased and perturbed answers
    retain_perturbed: str = "retain_perturbed"
    real_authors: str = "real_authors_perturbed"
    world_facts: str = "world_facts_perturbed"


def tofu_splits(forget: str) -> TofuSplits:
    """``forget10`` -> retain90, holdout10, forget10_perturbed.

    >>> tofu_splits("forget05").retain, tofu_splits("forget05").holdout
    ('retain95', 'holdout05')
    """
    if not is_forget_config(forget, "tofu"):
        raise TofuInputError(f"TOFU forget config must be one of {', '.join(FORGET_CONFIGS)}, got {forget!r}")
    split = SplitName.parse(forget)
    return TofuSplits(forget, str(split.complement()), str(split.holdout()), f"{forget}_perturbed")


def load_tofu(source: str | Path = HUB_ID, config: str = "full"):
    """One TOFU config's ``train`` split as a ``datasets.Dataset`` (Hub id or local folder of the Hub
    layout)."""
    # Further configs of the Hub dataset (larger forget splits and their complements) are read when asked for.
    if config not in ALL_CONFIGS and not is_tofu_hub_split(config):
        raise TofuInputError(f"unknown TOFU config {config!r}; known: {', '.join(ALL_CONFIGS)}")
    source = str(source)
    path = Path(source)
    looks_like_hub_id = source.count("/") == 1 and not path.is_absolute() and not source.startswith(".")
    if not path.exists() and not looks_like_hub_id:
        raise MissingInputError(f"TOFU folder {source} does not exist (and is not a Hub id such as {HUB_ID})")
    try:
        dataset = load_config(source, config, "train")
    except MedunlearnError:
        raise  # already names the file and line (medunlearn.data_loading.check_local_folder)
    except (ValueError, FileNotFoundError) as error:  # datasets names the configs or the missing file
        raise TofuInputError(f"{source}: cannot load TOFU config {config!r}: {error}") from error
    missing = [column for column in columns_of(config) if column not in dataset.column_names]
    if missing:
        raise TofuInputError(f"{source}: config {config!r} lacks column(s) {', '.join(missing)}")
    _check_text_columns(dataset, source, config)
    # As AMNESIA's builder refuses a QA row given twice: it would weigh double in a loss and every score.
    check_no_repeated_question(dataset, split_source(source, config, "train"))
    return dataset


def _check_text_columns(dataset, source: str, config: str) -> None:
    """Every question and answer is text that is not blank: a null or a number would reach the scoring as a
    float, and a blank answer would be scored as the end-of-text token alone (as AMNESIA's reader refuses it).
    Every ``perturbed_answer`` is a non-empty list of such texts: a single string would be scored one
    character at a time (a string is a sequence too), so one wrong answer is written as a list of one."""
    for column in ("question", "answer", "paraphrased_answer"):
        if column not in dataset.column_names:
            continue
        for row, value in enumerate(dataset[column], start=1):
            problem = _text_problem(value)
            if problem:
                raise TofuInputError(f"{source}: config {config!r} row {row}, field {column!r}: {problem}")
    if "perturbed_answer" not in dataset.column_names:
        return
    for row, value in enumerate(dataset["perturbed_answer"], start=1):
        if not (isinstance(value, list) and value):
            got = "an empty list" if value == [] else shown(value, limit=80)
            raise TofuInputError(
                f"{source}: config {config!r} row {row}, field 'perturbed_answer': expected a non-empty list "
                f'of texts (one wrong answer is ["..."]), got {got}'
            )
        for item, text in enumerate(value, start=1):
            problem = _text_problem(text)
            if problem:
                raise TofuInputError(
                    f"{source}: config {config!r} row {row}, field 'perturbed_answer', item {item}: {problem}"
                )


def _text_problem(value) -> str | None:
    """Why ``value`` is no usable text (not a string; blank, too long or holding a NUL:
    :func:`medunlearn.utils.text_limits.text_problem`), or ``None``."""
    if not isinstance(value, str):
        return f"expected text, got {shown(value, limit=80)}"
    return text_problem(value, blank_ok=False)


__all__ = [
    "ALL_CONFIGS",
    "FORGET_CONFIGS",
    "HOLDOUT_CONFIGS",
    "HUB_ID",
    "PERTURBED_CONFIGS",
    "QA_CONFIGS",
    "RETAIN_CONFIGS",
    "TofuInputError",
    "TofuSplits",
    "columns_of",
    "load_tofu",
    "retain_config_for",
    "tofu_splits",
]
