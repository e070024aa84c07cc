"""The judge panel of the LLM construction: which judges are distinct, their verdict, and how much they agree.

**Distinct judges** [ours]. Two entries of the panel (``ConstructionConfig.judge_specs``) are one judge when
the judge temperature is 0 and their backends have the same cache identity
(:func:`medunlearn.llm.runner.cache_identity`: backend kind, model id and weights fingerprint; for a server,
what it serves under the name: ``docs/llm.md``, "The cache"). Such copies differ only by their seed, which
greedy decoding ignores, so they give one answer: they are asked once, and vote once. At a temperature above 0
every entry samples with its own seed (``seed + position``) and is a judge of its own. The default panel, the
generator three times at temperature 0, is therefore **one distinct judge**. A local folder is one judge
however its path is written (relative, trailing slash, symlink) and wherever a copy of it lies: its identity
is its weight files' fingerprint (:func:`judge_key`).

**Verdict.** A QA is valid (a label supported) when more than half of the distinct judges vote yes; a judge
whose request failed votes no. With one distinct judge that is its own vote: no majority is claimed.

**Agreement.** Fleiss' κ (statsmodels) over the distinct judges, on the items every one of them answered; not
computed for one distinct judge, whose agreement with itself is 1 (or undefined) by construction.

See ``docs/amnesia-construction.md``, "The judge panel".

>>> [judge.positions for judge in distinct_judges(["a", "a", "b"], {"a": "A", "b": "B"}, temperature=0.0)]
[(0, 1), (2,)]
>>> [judge.positions for judge in distinct_judges(["a", "a"], {"a": "A"}, temperature=0.7)]
[(0,), (1,)]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from medunlearn.amnesia.sources.llm_built.construction_state import Attempt

CRITERIA = ("clarity", "correctness", "derivability", "clinical_significance")
# The paper's panel figures [paper]: the share of disease labels and of QA the three judges found valid.
PAPER_LABELS_SUPPORTED = 0.918
PAPER_QA_VALID = 0.976
ONE_JUDGE = "one distinct judge"


@dataclass(frozen=True)
class PanelJudge:
    """One distinct judge: the spec that asks it and the panel positions (0-based) it stands for."""

    spec: str
    positions: tuple[int, ...]

    @property
    def seed_offset(self) -> int:
        """Its requests use seed ``config.seed + seed_offset``: its first position's, as before copies were
        merged (so their cached answers are reused)."""
        return self.positions[0]


def judge_key(identity: Hashable) -> Hashable:
    """What makes two judges one at temperature 0: the cache identity, except that a transformers model loaded
    from a local folder is keyed on its weights fingerprint alone (the folder's weight files' names, sizes and
    times), so one folder spelled two ways, or a copy of it, is one judge.

    >>> from medunlearn.llm.cache import BackendIdentity
    >>> judge_key(BackendIdentity("transformers", ".", "f00d")) == judge_key(
    ...     BackendIdentity("transformers", "./", "f00d")
    ... )
    True
    >>> judge_key(BackendIdentity("openai", "m", "root-a")) == BackendIdentity("openai", "m", "root-a")
    True
    """
    kind, model = getattr(identity, "kind", None), getattr(identity, "model", None)
    if kind == "transformers" and isinstance(model, str) and Path(model).is_dir():
        return (kind, identity.fingerprint)
    return identity


def distinct_judges(
    specs: Sequence[str], identities: Mapping[str, Hashable], temperature: float
) -> list[PanelJudge]:
    """The distinct judges of a panel (module docstring), in the order of their first position.
    ``identities[spec]`` is the cache identity of the backend that ``spec`` names."""
    groups: dict[Hashable, list[int]] = {}
    for position, spec in enumerate(specs):
        groups.setdefault(judge_key(identities[spec]) if temperature == 0 else position, []).append(position)
    return [PanelJudge(specs[positions[0]], tuple(positions)) for positions in groups.values()]


def repeated_greedy_specs(specs: Sequence[str], temperature: float) -> dict[str, int]:
    """Specs named more than once in a panel at temperature 0, with their counts: copies that are one judge,
    known before any backend is asked (specs that serve the same weights under other names are found when
    the construction asks the backends, and reported there)."""
    if temperature > 0:
        return {}
    return {spec: count for spec, count in Counter(specs).items() if count > 1}


def panel_warning(specs: Sequence[str], temperature: float) -> str | None:
    """The warning for a panel with greedy copies of one model (None when it has none).

    >>> panel_warning(["openai:m", "openai:m", "openai:m"], 0.0).split(": ")[0]
    'the judge panel is openai:m × 3 at temperature 0'
    >>> panel_warning(["m", "m", "m"], 0.0).endswith("no majority vote and no Fleiss' κ.")
    True
    >>> panel_warning(["openai:m", "openai:m"], 0.7) is None
    True
    """
    repeated = repeated_greedy_specs(specs, temperature)
    if not repeated:
        return None
    copies = ", ".join(f"{spec} × {count}" for spec, count in repeated.items())
    distinct = len(set(specs))
    verdict = (
        f"This panel is {ONE_JUDGE}: no majority vote and no Fleiss' κ."
        if distinct == 1
        else f"This panel has {distinct} distinct judges."
    )
    return (
        f"the judge panel is {copies} at temperature 0: greedy copies of one model give one answer, so they "
        f"count as one judge. {verdict}"
    )


def majority(votes: Sequence[bool | None], judges: int) -> bool:
    """More than half of the ``judges`` distinct judges voted yes; no answer (None) counts as no."""
    return sum(vote is True for vote in votes) * 2 > judges


def fleiss_kappa_of_votes(votes: Sequence[Sequence[bool]]) -> float | None:
    """Fleiss' κ of binary votes, one row per item and one column per judge (statsmodels' ``fleiss_kappa``);
    None with fewer than two judges or items, or when every vote is the same (κ is then undefined).

    >>> round(fleiss_kappa_of_votes([[True, True, False], [True, True, True], [False, False, False],
    ...                               [True, False, False]]), 4)
    0.3333
    """
    import numpy as np
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    if len(votes) < 2 or len(votes[0]) < 2:
        return None
    table, _ = aggregate_raters(np.asarray(votes, dtype=int), n_cat=2)
    if (table.sum(axis=0) == 0).any():  # one category only: chance agreement is 1, κ is 0/0
        return None
    return float(fleiss_kappa(table, method="fleiss"))


def share(numerator: int, denominator: int) -> float | None:
    """``numerator / denominator`` to 4 decimals; None for an empty denominator."""
    return round(numerator / denominator, 4) if denominator else None


def _valid(vote: dict | None) -> bool | None:
    return None if vote is None else all(vote[criterion] for criterion in CRITERIA)


def _complete_rows(rows: list[list]) -> list[list]:
    """The items every judge answered: a failed request is a missing rating, not a vote."""
    return [row for row in rows if None not in row]


def agreement(judged: Sequence[Attempt], label_votes: Sequence[list]) -> tuple[dict, dict]:
    """Fleiss' κ per figure (QA validity, label support, each criterion) and the items each is over."""
    qa_rows = _complete_rows([[_valid(v) for v in t.votes] for t in judged])
    label_rows = _complete_rows(list(label_votes))
    kappa = {"qa_valid": fleiss_kappa_of_votes(qa_rows), "label_supported": fleiss_kappa_of_votes(label_rows)}
    for criterion in CRITERIA:
        kappa[criterion] = fleiss_kappa_of_votes(
            _complete_rows([[None if v is None else v[criterion] for v in t.votes] for t in judged])
        )
    rounded = {name: None if value is None else round(value, 4) for name, value in kappa.items()}
    return rounded, {"qa": len(qa_rows), "labels": len(label_rows)}


def _judge_row(number: int, judge: PanelJudge, model: str, judged, label_votes, several: bool) -> dict:
    answered = [t.votes[number] for t in judged if t.votes[number] is not None]
    labels = [votes[number] for votes in label_votes if votes[number] is not None]
    verdicts = [t.valid for t in judged if t.votes[number] is not None]
    own = [_valid(v) for v in answered]
    return {
        "judge": number + 1,
        "model": model,
        "copies": len(judge.positions),
        "qa_rated": len(answered),
        "qa_missing": len(judged) - len(answered),
        "qa_valid": share(sum(own), len(own)),
        **{criterion: share(sum(v[criterion] for v in answered), len(answered)) for criterion in CRITERIA},
        "labels_supported": share(sum(labels), len(labels)),
        # One distinct judge is the verdict: it has no majority to agree with.
        "agreement_with_majority": (
            share(sum(a == m for a, m in zip(own, verdicts)), len(own)) if several else None
        ),
    }


def panel_report(
    judges: Sequence[PanelJudge],
    models: Sequence[str],
    judged: Sequence[Attempt],
    label_votes: Sequence[list],
) -> dict:
    """The report's ``panel``: its distinct judges, verdict figures beside the paper's, κ and per judge.

    ``models[k]`` names distinct judge ``k``; ``judged`` are the judged attempts (``votes``: one per
    distinct judge, ``valid``: the verdict); ``label_votes`` one row of label votes per patient the panel saw.
    """
    several = len(judges) > 1
    kappa, kappa_items = agreement(judged, label_votes) if several else (None, None)
    return {
        "judges": sum(len(judge.positions) for judge in judges),
        "distinct_judges": len(judges),
        "distinct_models": [
            {"model": model, "copies": len(judge.positions)} for judge, model in zip(judges, models)
        ],
        "verdict": f"majority of {len(judges)} distinct judges" if several else ONE_JUDGE,
        "labels_supported": {
            "ours": share(sum(majority(votes, len(judges)) for votes in label_votes), len(label_votes)),
            "paper": PAPER_LABELS_SUPPORTED,
            "n": len(label_votes),
        },
        "qa_valid": {
            "ours": share(sum(t.valid for t in judged), len(judged)),
            "paper": PAPER_QA_VALID,
            "n": len(judged),
        },
        # None for one distinct judge: its agreement with itself measures nothing.
        "fleiss_kappa": kappa,
        "kappa_items": kappa_items,
        "per_judge": [
            _judge_row(number, judge, model, judged, label_votes, several)
            for number, (judge, model) in enumerate(zip(judges, models))
        ],
    }


def describe_panel(panel: dict, quote: str = "`") -> str:
    """The panel in words, for the card and the command line: its distinct judges, and what decides.

    >>> print(describe_panel({"distinct_models": [{"model": "m", "copies": 3}]}, quote=""))
    one distinct judge, m (3 greedy copies of one model: one answer): its own vote decides; no majority and \
no Fleiss' κ
    >>> print(describe_panel({"distinct_models": [{"model": "a", "copies": 1}, {"model": "b", "copies": 2}]}))
    2 distinct judges, `a`, `b` (2 greedy copies: one judge); the majority of them decides
    """
    models = panel["distinct_models"]
    if len(models) == 1:
        (only,) = models
        copies = f" ({only['copies']} greedy copies of one model: one answer)" if only["copies"] > 1 else ""
        return (
            f"{ONE_JUDGE}, {quote}{only['model']}{quote}{copies}: its own vote decides; no majority and no "
            "Fleiss' κ"
        )
    names = ", ".join(
        f"{quote}{m['model']}{quote}"
        + (f" ({m['copies']} greedy copies: one judge)" if m["copies"] > 1 else "")
        for m in models
    )
    return f"{len(models)} distinct judges, {names}; the majority of them decides"
