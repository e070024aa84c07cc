"""A small fictitious MUSE-format folder, for tests and laptop runs (ours, not MUSE's data).

Same configs, splits and fields as ``muse-bench/MUSE-News`` (:mod:`medunlearn.muse.data`): invented local
news articles, each about one invented person, town and organisation, with facts that the ``knowmem``
questions ask about. The relations between splits are the Hub's (checked there by their sizes in bytes):

* ``raw``: forget, retain1, retain2, holdout are disjoint sets of articles; holdout is never trained on.
* ``sust``: four disjoint forget folds, ``forget_1`` = ``raw/forget``; ``scal/forget_k`` = the union of
  ``sust/forget_1..k`` (growing); ``train`` = ``scal/forget_4``, ``raw/retain1``, ``raw/retain2``.
* ``verbmem/forget``: the first ``prompt_words`` words of each forget article as ``prompt``, the next
  ``continuation_words`` as ``gt``.
* ``knowmem``: questions about the facts of forget (``forget_qa``) and retain1 (``retain_qa``) articles; the
  ten in-context pairs (``*_icl``) ask about the same articles with other question kinds, so no ICL pair gives
  away a test answer.
* ``privleak``: forget articles vs retain1 vs holdout articles, as many of each.

Seeded and byte-reproducible: the same arguments write the same bytes (JSON lines and a README whose YAML
``configs:`` block declares every split, so ``datasets.load_dataset(folder, config)`` reads it too).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from medunlearn.errors import InputError
from medunlearn.muse.data import FOLDS, LAYOUT
from medunlearn.utils.files import atomic_write_text, output_folder

ICL_PAIRS = 10
_FIRST = ("Anneke", "Bram", "Corin", "Delphine", "Edvard", "Freya", "Gideon", "Hanne", "Ivo", "Jessamy")
_LAST = ("Marlowe", "Tessaly", "Okonkwo", "Varga", "Lindqvist", "Achterberg", "Ruiz-Peña", "Halloran")
_TOWNS = (
    "Harrowgate",
    "Lindenmoor",
    "Saltcombe",
    "Ebbingford",
    "Krellwick",
    "Dunmere",
    "Ostervale",
    "Pellbury",
    "Quarrington",
    "Wyvernholt",
    "Askelund",
    "Brackenridge",
)
_ORGS = ("river trust", "town council", "harbour board", "rail society", "library guild", "farmers' union")
_PROJECTS = (
    "a footbridge over the canal",
    "a night bus to the coast",
    "a seed bank for heritage apples",
    "a repair café in the old mill",
    "a flood wall along the quay",
    "a rooftop observatory",
    "a winter shelter for walkers",
    "a ferry between the two piers",
)
_OBJECTIONS = ("the noise", "the cost", "the parking", "the view", "the lighting", "the timetable")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")

# kind -> (question, answer); {p} person, {t} town, {o} organisation, {j} project, {c} cost, {x} objection,
# {d} day. The first four kinds are test questions, the rest in-context examples.
_QA_KINDS = {
    "leader": ("Who leads the {o} of {t}?", "{p}"),
    "project": ("What did the {o} of {t} propose?", "{j}"),
    "cost": ("How much will the project of the {o} of {t} cost?", "{c} thousand crowns"),
    "objection": ("What did residents of {t} object to in the plan of the {o}?", "{x}"),
    "day": ("On which day was the plan of the {o} of {t} announced?", "{d}"),
    "town": ("In which town does {p} lead the {o}?", "{t}"),
}
TEST_KINDS = ("leader", "project", "cost", "objection")
ICL_KINDS = ("day", "town")


def _article_facts(rng: np.random.Generator, person: str, town: str, organisation: str) -> dict[str, str]:
    def pick(pool):
        return pool[int(rng.integers(len(pool)))]

    return {
        "p": person,
        "t": town,
        "o": organisation,
        "j": pick(_PROJECTS),
        "c": str(int(rng.integers(20, 900))),
        "x": pick(_OBJECTIONS),
        "d": pick(_DAYS),
    }


def _article_text(facts: dict[str, str]) -> str:
    sentences = (
        "On {d}, {p}, who leads the {o} of {t}, announced plans for {j}.",
        "The project will cost about {c} thousand crowns, paid for by a local levy.",
        "Some residents of {t} objected to {x}, and a public meeting was called.",
        "{p} said the {o} would publish its answer before the end of the month.",
        "A first vote on the plan is expected at the spring session of the {o}.",
    )
    return " ".join(sentence.format(**facts) for sentence in sentences)


def _qa(facts: dict[str, str], kind: str) -> dict[str, str]:
    question, answer = _QA_KINDS[kind]
    return {"question": question.format(**facts), "answer": answer.format(**facts)}


def _subjects(rng: np.random.Generator, count: int) -> list[tuple[str, str, str]]:
    """``count`` distinct (person, town, organisation) triples; no two share a (town, organisation) pair, so
    every knowmem question has one answer."""
    people = [f"{first} {last}" for first in _FIRST for last in _LAST]
    places = [(town, org) for town in _TOWNS for org in _ORGS]
    if count > min(len(people), len(places)):
        raise InputError(f"at most {min(len(people), len(places))} fictitious articles, asked for {count}")
    chosen_people = [people[i] for i in rng.permutation(len(people))[:count]]
    chosen_places = [places[i] for i in rng.permutation(len(places))[:count]]
    return [(person, town, org) for person, (town, org) in zip(chosen_people, chosen_places)]


def _verbmem_row(text: str, prompt_words: int, continuation_words: int) -> dict[str, str]:
    words = text.split(" ")
    if prompt_words >= len(words):  # an empty gt would score every model as a perfect copy
        raise InputError(
            f"prompt_words (--prompt-words) must leave a continuation: {prompt_words} words, and an article "
            f"has {len(words)}"
        )
    return {
        "prompt": " ".join(words[:prompt_words]),
        "gt": " ".join(words[prompt_words : prompt_words + continuation_words]),
    }


def _icl_rows(facts: list[dict[str, str]]) -> list[dict[str, str]]:
    kinds = [(f, kind) for kind in ICL_KINDS for f in facts]
    if len(kinds) < ICL_PAIRS:
        raise InputError(f"{ICL_PAIRS} in-context pairs need at least {ICL_PAIRS // 2} articles per set")
    return [_qa(f, kind) for f, kind in kinds[:ICL_PAIRS]]


# The bounds of ``articles`` (the command's --articles is checked against them when parsed): ten in-context
# pairs need five articles per set; a folder's seven sets need distinct invented people and places.
MIN_ARTICLES = ICL_PAIRS // 2
MAX_ARTICLES = min(len(_FIRST) * len(_LAST), len(_TOWNS) * len(_ORGS)) // 7


def build_muse_configs(
    *, articles: int = 8, prompt_words: int = 12, continuation_words: int = 24, seed: int = 0
) -> dict[str, dict[str, list[dict]]]:
    """Every MUSE config's splits (config -> split -> rows with the layout's fields, in order).

    ``articles`` is the size of ``raw/forget`` and of every other article set (retain1, retain2, holdout,
    each sust fold), so a folder holds ``7 * articles`` articles.
    """
    if articles < MIN_ARTICLES:
        raise InputError(f"articles must be at least {MIN_ARTICLES} (ten in-context pairs), got {articles}")
    if articles > MAX_ARTICLES:
        raise InputError(
            f"articles must be at most {MAX_ARTICLES} (the invented names run out), got {articles}"
        )
    if prompt_words < 1 or continuation_words < 1:
        raise InputError("prompt_words and continuation_words must be at least 1")
    rng = np.random.default_rng(seed)
    facts = [_article_facts(rng, *subject) for subject in _subjects(rng, 7 * articles)]
    groups = [facts[i * articles : (i + 1) * articles] for i in range(7)]
    forget, retain1, retain2, holdout = groups[:4]
    folds = [forget, *groups[4:]]

    def texts(group):
        return [{"text": _article_text(f)} for f in group]

    scal = {FOLDS[k]: [row for fold in folds[: k + 1] for row in texts(fold)] for k in range(4)}
    configs = {
        "raw": {"forget": texts(forget), "retain1": texts(retain1), "retain2": texts(retain2)},
        "verbmem": {
            "forget": [_verbmem_row(_article_text(f), prompt_words, continuation_words) for f in forget]
        },
        "knowmem": {
            "forget_qa": [_qa(f, kind) for f in forget for kind in TEST_KINDS],
            "forget_qa_icl": _icl_rows(forget),
            "retain_qa": [_qa(f, kind) for f in retain1 for kind in TEST_KINDS],
            "retain_qa_icl": _icl_rows(retain1),
        },
        "privleak": {"forget": texts(forget), "retain": texts(retain1), "holdout": texts(holdout)},
        "scal": scal,
        "sust": {FOLDS[k]: texts(fold) for k, fold in enumerate(folds)},
        "train": {"forget": scal["forget_4"], "retain1": texts(retain1), "retain2": texts(retain2)},
    }
    configs["raw"]["holdout"] = texts(holdout)
    return {config: {split: configs[config][split] for split in LAYOUT[config]} for config in LAYOUT}


def _readme(configs: dict[str, dict[str, list[dict]]], parameters: dict) -> str:
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        lines += [f"  - split: {split}\n    path: {config}/{split}.jsonl" for split in splits]
    lines += [
        "---",
        "",
        "# Fictitious MUSE-format benchmark (medunlearn)",
        "",
        "Invented news articles in the layout of `muse-bench/MUSE-News`, generated by `medunlearn muse build`"
        " (`medunlearn.muse.build_muse_folder`). Not MUSE's data; for tests and laptop runs.",
        "",
        "| config | split | rows |",
        "|---|---|---|",
    ]
    lines += [f"| {c} | {s} | {len(rows)} |" for c, splits in configs.items() for s, rows in splits.items()]
    lines += ["", "Build parameters (rebuild exactly with the same values):", "", "```json"]
    lines += [json.dumps(parameters, sort_keys=True), "```", ""]
    return "\n".join(lines)


def build_muse_folder(
    out_dir: str | Path,
    *,
    articles: int = 8,
    prompt_words: int = 12,
    continuation_words: int = 24,
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Write the fictitious MUSE-format folder (``<config>/<split>.jsonl`` + README) through
    :func:`~medunlearn.utils.files.output_folder` (checked, staged, renamed into place whole)."""
    parameters = {
        "articles": articles,
        "prompt_words": prompt_words,
        "continuation_words": continuation_words,
        "seed": seed,
    }
    configs = build_muse_configs(**parameters)
    with output_folder(out_dir, overwrite=overwrite) as staging:
        for config, splits in configs.items():
            for split, rows in splits.items():
                text = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)
                atomic_write_text(staging / config / f"{split}.jsonl", text)
        atomic_write_text(staging / "README.md", _readme(configs, parameters))
    return Path(out_dir)


__all__ = ["ICL_PAIRS", "build_muse_configs", "build_muse_folder"]
