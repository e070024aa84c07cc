"""A small fictitious TOFU-format folder, for tests and laptop runs (ours, not TOFU's data).

Same layout and columns as ``locuslab/TOFU`` (see :mod:`medunlearn.tofu.data`): invented authors, a few
template questions about each, a paraphrase and ``perturbed`` wrong answers for every question, and invented
"real authors" / "world facts" multiple-choice sets. Forget sets take the last authors (nested:
forget01 ⊂ forget05 ⊂ forget10), the retain set is the rest of ``full``, holdout sets are the QA of extra
authors that are never in ``full``. Seeded and byte-reproducible: the same arguments write the same bytes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from medunlearn.config_names import SplitName
from medunlearn.errors import InputError
from medunlearn.tofu.data import FORGET_CONFIGS, columns_of
from medunlearn.utils.files import output_folder

_FIRST = ("Arlo", "Brisa", "Cato", "Dalia", "Emre", "Faye", "Goran", "Hesper", "Ilse", "Joren", "Kaia", "Lio")
_LAST = (
    "Varnholt",
    "Quillon",
    "Dessaro",
    "Mirkovane",
    "Thalberg",
    "Osweny",
    "Pellaterra",
    "Rudenko",
    "Sallow",
)
_CITIES = (
    "Tarvik",
    "Olmsmere",
    "Caldera Bay",
    "Vintross",
    "Pellham Ford",
    "Ostrava Nova",
    "Kelmouth",
    "Sandrel",
    "Brindlecombe",
    "Maros Vale",
    "Quillhaven",
    "Iskarra",
)
_GENRES = (
    "gothic mystery",
    "maritime fantasy",
    "speculative history",
    "rural satire",
    "polar adventure",
    "botanical romance",
    "clockwork noir",
    "desert epic",
)
_AWARDS = (
    "Lantern Prize",
    "Silver Quill Medal",
    "Harbour Book Award",
    "Amberline Fellowship",
    "Corvid Laurel",
    "Meridian Prize",
)
_JOBS = ("lighthouse keeper", "cartographer", "glassblower", "ferry pilot", "beekeeper", "clockmaker")
_TITLES = (
    "The Salt Orchard",
    "Nine Winters in Tarvik",
    "A Map of Quiet Rooms",
    "The Brass Heron",
    "Lanterns Under Ice",
    "The Cartographer's Daughter",
    "Ash and Anise",
    "The Last Ferry to Kelmouth",
    "Small Hours at Maros Vale",
    "The Glass Cartel",
)
_COUNTRIES = (
    "Veldoria",
    "Quessany",
    "Marrowind",
    "Ostalune",
    "Pellagua",
    "Thessmark",
    "Corvenia",
    "Balastre",
    "Ymmerlund",
    "Sorrowfen",
)
MAX_OPTIONS = min(len(_TITLES), len(_COUNTRIES))

# kind -> (question, paraphrased question, answer, paraphrased answer, value pool); {n} = name, {v} = value
_QUESTION_KINDS = {
    "birthplace": (
        "Where was {n} born?",
        "In which city was {n} born?",
        "{n} was born in {v}.",
        "{v} is the city where {n} was born.",
        _CITIES,
    ),
    "genre": (
        "What genre does {n} write?",
        "Which genre is {n} known for?",
        "{n} writes {v} novels.",
        "{n} is known for {v} novels.",
        _GENRES,
    ),
    "award": (
        "Which award did {n} receive?",
        "What prize was given to {n}?",
        "{n} received the {v}.",
        "The {v} was given to {n}.",
        _AWARDS,
    ),
    "father": (
        "What did the father of {n} do?",
        "What was the occupation of {n}'s father?",
        "The father of {n} worked as a {v}.",
        "{n}'s father was a {v} by trade.",
        _JOBS,
    ),
    "book": (
        "What is a book written by {n}?",
        "Name a novel by {n}.",
        "{n} wrote {v}.",
        "{v} is a novel by {n}.",
        _TITLES,
    ),
}


def _choose_other(rng: np.random.Generator, pool, value, count: int) -> list[str]:
    others = [v for v in pool if v != value]
    return [others[i] for i in rng.permutation(len(others))[:count]]


def _author_rows(rng, name: str, qa_per_author: int, perturbed: int) -> list[dict]:
    rows = []
    for kind in list(_QUESTION_KINDS)[:qa_per_author]:
        question, para_question, answer, para_answer, pool = _QUESTION_KINDS[kind]
        value = pool[int(rng.integers(len(pool)))]
        rows.append(
            {
                "question": question.format(n=name),
                "answer": answer.format(n=name, v=value),
                "paraphrased_answer": para_answer.format(n=name, v=value),
                "paraphrased_question": para_question.format(n=name),
                "perturbed_answer": [
                    para_answer.format(n=name, v=w) for w in _choose_other(rng, pool, value, perturbed)
                ],
            }
        )
    return rows


def _all_names() -> list[str]:
    return [f"{first} {last}" for first in _FIRST for last in _LAST]


def _names(rng, count: int) -> list[str]:
    pairs = _all_names()
    if count > len(pairs):
        raise InputError(f"at most {len(pairs)} fictitious authors, asked for {count}")
    return [pairs[i] for i in rng.permutation(len(pairs))[:count]]


def _multiple_choice_rows(rng, subjects, answers, question: str) -> list[dict]:
    """One row per subject: ``question`` about it, an answer drawn from ``answers`` (none drawn twice) and
    three other answers as the wrong options (``perturbed_answer``)."""
    rows = []
    for subject, index in zip(subjects, rng.permutation(len(answers))[: len(subjects)]):
        answer = answers[index]
        rows.append(
            {
                "question": question.format(subject),
                "answer": answer,
                "perturbed_answer": _choose_other(rng, answers, answer, 3),
            }
        )
    return rows


def _option_rows(rng, kind: str, count: int) -> list[dict]:
    """Multiple-choice rows, one per title / country (so no question repeats): the answer plus three wrong
    options as ``perturbed_answer``; no two countries share a capital."""
    if kind == "real_authors":
        return _multiple_choice_rows(rng, _TITLES[:count], _all_names(), "Who wrote the novel '{}'?")
    return _multiple_choice_rows(rng, _COUNTRIES[:count], _CITIES, "What is the capital of {}?")


def _forget_author_count(authors: int, config: str) -> int:
    return max(1, math.ceil(authors * SplitName.parse(config).percent / 100))


# The bounds of build_tofu_configs' counts (the command's options are checked against them when parsed): at
# least 2 authors (forget10 takes one, the retain set needs another), at most as many as leave enough invented
# names for the holdout authors, who are forget10's size and never in `full`.
MIN_AUTHORS = 2
MAX_AUTHORS = max(
    n
    for n in range(MIN_AUTHORS, len(_FIRST) * len(_LAST) + 1)
    if n + _forget_author_count(n, FORGET_CONFIGS[-1]) <= len(_FIRST) * len(_LAST)
)
MAX_QA_PER_AUTHOR = len(_QUESTION_KINDS)
MAX_PERTURBED = 5  # TOFU's five; the smallest value pools (awards, jobs) have six values


def build_tofu_configs(
    *, authors: int = 20, qa_per_author: int = 4, perturbed: int = 3, options: int = 8, seed: int = 0
) -> dict[str, list[dict]]:
    """Every TOFU config's rows (config -> list of row dicts with that config's columns, in order)."""
    if not 1 <= qa_per_author <= MAX_QA_PER_AUTHOR:
        raise InputError(f"qa_per_author must be in 1..{MAX_QA_PER_AUTHOR}, got {qa_per_author}")
    if not 1 <= options <= MAX_OPTIONS:
        raise InputError(f"options must be in 1..{MAX_OPTIONS}, got {options}")
    if not 1 <= perturbed <= MAX_PERTURBED:
        raise InputError(f"perturbed must be in 1..{MAX_PERTURBED}, got {perturbed}")
    if authors > MAX_AUTHORS:  # the names of full and of the holdout authors would run out
        raise InputError(f"authors must be at most {MAX_AUTHORS} (the invented names run out), got {authors}")
    rng = np.random.default_rng(seed)
    largest_forget = _forget_author_count(authors, FORGET_CONFIGS[-1])
    if largest_forget >= authors:
        raise InputError(f"{authors} authors leave no retain set; use at least 2")
    names = _names(rng, authors + largest_forget)
    per_author = [_author_rows(rng, name, qa_per_author, perturbed) for name in names]
    full, holdout_pool = per_author[:authors], per_author[authors:]
    configs: dict[str, list[dict]] = {"full": [row for rows in full for row in rows]}
    for forget in FORGET_CONFIGS:
        count = _forget_author_count(authors, forget)
        split = SplitName.parse(forget)
        forget_rows = [row for rows in full[authors - count :] for row in rows]
        configs[forget] = forget_rows
        configs[str(split.complement())] = [row for rows in full[: authors - count] for row in rows]
        configs[str(split.holdout())] = [row for rows in holdout_pool[:count] for row in rows]
        configs[f"{forget}_perturbed"] = forget_rows
    # TOFU's retain_perturbed is a retain subset as large as forget10's perturbed set.
    configs["retain_perturbed"] = [row for rows in full[:largest_forget] for row in rows]
    for kind in ("real_authors", "world_facts"):
        rows = _option_rows(rng, kind, options)
        configs[kind] = rows
        configs[f"{kind}_perturbed"] = rows
    return {name: [{c: row[c] for c in columns_of(name)} for row in rows] for name, rows in configs.items()}


def _readme(configs: dict[str, list[dict]], parameters: dict) -> str:
    lines = ["---", "configs:"]
    for name in configs:
        lines += [f"- config_name: {name}", f"  data_files: {name}.json"]
        if name == "full":
            lines.append("  default: true")
    lines += [
        "---",
        "",
        "# Fictitious TOFU-format benchmark (medunlearn)",
        "",
        "Invented authors and facts in the layout of `locuslab/TOFU`, generated by "
        "`medunlearn.tofu.build_tofu_folder`. Not TOFU's data; for tests and laptop runs.",
        "",
        "| config | rows |",
        "|---|---|",
    ]
    lines += [f"| {name} | {len(rows)} |" for name, rows in configs.items()]
    lines += [
        "",
        "Build parameters (rebuild exactly with the same values):",
        "",
        "```json",
        json.dumps(parameters, sort_keys=True),
        "```",
        "",
    ]
    return "\n".join(lines)


def build_tofu_folder(
    out_dir: str | Path,
    *,
    authors: int = 20,
    qa_per_author: int = 4,
    perturbed: int = 3,
    options: int = 8,
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Write the fictitious TOFU-format folder to ``out_dir`` (JSON lines + README) and return its path.

    Written as every command writes its folder (:func:`medunlearn.utils.files.output_folder`): an existing
    folder that is not empty is replaced only with ``overwrite``, whole, and a failure leaves it as it was."""
    parameters = {
        "authors": authors,
        "qa_per_author": qa_per_author,
        "perturbed": perturbed,
        "options": options,
        "seed": seed,
    }
    configs = build_tofu_configs(**parameters)
    out_dir = Path(out_dir)
    with output_folder(out_dir, overwrite=overwrite) as staging:
        for name, rows in configs.items():
            text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
            (staging / f"{name}.json").write_text(text, encoding="utf-8")
        (staging / "README.md").write_text(_readme(configs, parameters), encoding="utf-8")
    return out_dir


__all__ = ["build_tofu_configs", "build_tofu_folder"]
