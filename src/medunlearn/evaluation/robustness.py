"""Attack results in evaluation and study reports: where an evaluation's ``attacks.json`` is, what a report
keeps of it, and how its worst case reads (docs/attacks.md, "In the report, the study and the model card").

This layer reads ``attacks.json`` as plain JSON and never imports ``medunlearn.attacks``. A worst case comes
with its selection-aware interval and verdict (docs/attacks.md, "Intervals and the worst case"); one whose
interval includes 0 is shown as "not distinguishable from no recovery".
"""

from __future__ import annotations

import math
from pathlib import Path

from medunlearn.utils.user_files import read_json

ATTACKS_FILE = "attacks.json"
# What a report keeps of an attack summary: the worst case, its selection-aware interval and verdict.
WORST_CASE_KEYS = ("worst_case_recovery", "worst_case_attack", "worst_case_ci", "worst_case_verdict")
NOT_DISTINGUISHABLE = "not distinguishable from no recovery"  # attacks.json's verdict (docs/attacks.md)
ROBUSTNESS_PLOT = "afe_vs_worst_case_recovery.png"
STUDY_ROBUSTNESS_PLOT = "study_afe_vs_worst_case_recovery.png"


def attack_candidates(eval_dir: str | Path) -> list[tuple[Path, str | None, bool]]:
    """Where an evaluation folder's attack results may be: ``(path, method name it implies or None, whether
    a file with one method is this model's)``. ``EVALDIR/attacks.json`` and ``EVALDIR/attacks/attacks.json``
    are the model's own; the sibling ``../attacks/`` is too for a study cell (``cells/<cell>/eval`` beside
    ``cells/<cell>/attacks``) and otherwise joins by method name; for the ``unlearned`` evaluation inside an
    attack folder (``<attacks>/<method>/evaluations/unlearned``) that folder's ``attacks.json``."""
    folder = Path(eval_dir)
    candidates = [
        (folder / ATTACKS_FILE, None, True),
        (folder / "attacks" / ATTACKS_FILE, None, True),
        (folder.parent / "attacks" / ATTACKS_FILE, None, folder.name == "eval"),
    ]
    if folder.parent.name == "evaluations" and len(folder.parents) >= 3:
        candidates.append((folder.parents[2] / ATTACKS_FILE, folder.parents[1].name, False))
    return candidates


def read_attack_summary(
    eval_dir: str | Path, method: str, attack_dirs: tuple[str | Path, ...] = ()
) -> dict | None:
    """The robustness summary (``attacks.json``'s ``summaries`` entry: ``worst_case_recovery``,
    ``worst_case_attack``, ``afe``, ``mu``, ...) of the model evaluated in ``eval_dir``, or ``None``.

    Looks in ``attack_dirs`` first (``medunlearn report --attacks DIR``: joined by method name), then next to
    the evaluation folder (:func:`attack_candidates`). The summary named ``method`` (or named by the folder
    layout) is taken; a file of the model's own with one method is that model's."""
    given = [(Path(d) / ATTACKS_FILE if Path(d).is_dir() else Path(d), None, False) for d in attack_dirs]
    for path, hint, own in given + attack_candidates(eval_dir):
        if not path.is_file():
            continue
        payload = read_json(path, expect=dict)  # the shared reader: syntax, a key given twice, NaN named
        summaries = [s for s in payload.get("summaries") or [] if isinstance(s, dict)]
        for wanted in (hint, method):
            match = [s for s in summaries if wanted is not None and s.get("method") == wanted]
            if match:
                return {**match[0], "attacks_file": str(path)}
        if len(summaries) == 1 and own:
            return {**summaries[0], "attacks_file": str(path)}
    return None


def worst_case_text(row: dict) -> str:
    """The worst-case recovery cell: the value, its selection-aware interval and, when that includes 0,
    "not distinguishable from no recovery" (docs/attacks.md, "Intervals and the worst case")."""
    worst, interval = row.get("worst_case_recovery"), row.get("worst_case_ci")
    if worst is None:
        return "–"
    if not interval:
        return f"{worst:+.3f}"
    # attacks.json stores an unbounded end (one or two patients) as null: −∞ below, +∞ above
    low, high = (v if v is not None and math.isfinite(v) else None for v in interval)
    bounds = f"{'−∞' if low is None else f'{low:+.2f}'}…{'+∞' if high is None else f'{high:+.2f}'}"
    if row.get("worst_case_verdict") == NOT_DISTINGUISHABLE:
        return f"{NOT_DISTINGUISHABLE} ({worst:+.3f}; {bounds})"
    return f"{worst:+.3f} ({bounds})"


def seeds_worst_cases(rows: list[dict], label: str) -> dict:
    """Each seed's worst-case verdict from its attack folder's attacks.json (``worst_case_verdicts``), the
    verdict they share (``worst_case_verdict``; ``None`` when they differ) and, for one seed, its
    selection-aware interval (``worst_case_ci``)."""
    cases = []
    for row in rows:
        path = Path(row["attack_dir"]) / ATTACKS_FILE if row.get("attack_dir") else None
        if path is None or not path.is_file():
            continue
        summaries = read_json(path, expect=dict).get("summaries") or []
        match = [s for s in summaries if s.get("method") == label] or summaries[:1]
        cases += match[:1]
    verdicts = [case.get("worst_case_verdict") for case in cases]
    return {
        "worst_case_verdicts": verdicts,
        "worst_case_verdict": verdicts[0] if verdicts and len(set(verdicts)) == 1 else None,
        "worst_case_ci": cases[0].get("worst_case_ci") if len(cases) == 1 else None,
    }


def worst_case_caption(points: list[dict]) -> str:
    """The caption's note on the worst-case column (empty without an attack stage)."""
    if not any("worst_case_recovery" in p for p in points):
        return ""
    return (
        " Worst-case recovery: the largest recovered share over the attacks (mean over seeds); n.d.: "
        f"{NOT_DISTINGUISHABLE} in every seed (its selection-aware interval includes 0, docs/attacks.md)."
    )
