"""Membership attacks: can an attacker tell the forgotten patients' QA from QA the model never saw?

Members are the forget patients' seen QA (trained on, then unlearned); non-members are **the same patients'**
holdout QA (never trained on, by anyone), as the evaluation's own MIA section takes them: both come from one
distribution (the same patients, the same question types), so a model that never saw the forget patients
tells them apart at chance, AUC 0.5 up to sampling noise (the null standard deviation
:func:`auc_null_sd`). Non-members from other patients would make the attack measure the difference between
patients instead. Every attack section reports the same AUCs on the before model (trained on the members) and,
when given, on the retain model (never trained on them) as its baselines (:func:`membership_section`;
docs/attacks.md, "Membership").

Scores, per example, from the runner's stored teacher-forced outputs through
:func:`medunlearn.evaluation.scoring.probability_statistics` (the ``mia_*`` columns of
``per_example.parquet``), so nothing is recomputed or re-implemented here:

- ``loss``: mean answer NLL (Yeom et al. 2018);
- ``zlib``: mean NLL / zlib length of the answer (Carlini et al. 2021);
- ``min_k``: mean NLL of the 40% least likely answer tokens (Min-K% Prob, Shi et al. 2024);
- ``min_k_plus_plus``: Min-K%++ (Zhang et al. 2024, arXiv 2404.02936), each token's log-prob standardised by
  the mean and standard deviation of log p under the model's own next-token distribution — the
  ``token_mean_logprob`` / ``token_std_logprob`` the runner stores for every answer token.

Those scores are loss-like (:mod:`medunlearn.metrics.mia`: higher = less likely a member). **Here the sign is
flipped**: a membership score is ``−score``, so *higher = more likely a member*, and an AUC is
``roc_auc_score(is_member, membership score)``: 1.0 when every member scores above every non-member, 0.5 when
the attack cannot tell them apart, below 0.5 when the members look *less* familiar than never-seen QA (the
sign of over-unlearning). That number equals :func:`medunlearn.metrics.mia.mia_auc` on the loss-like scores.

The reference attack (:func:`reference_attack_auc`) calibrates the target's loss by a reference model's loss
on the same text (Carlini et al. 2022, "Membership inference attacks from first principles", the offline
LiRA baseline; the "reference" attack of Mattern et al. 2023 and Watson et al. 2022): membership score
``−(L_target(x) − L_ref(x))``. With the retain model (trained without the forget patients) as reference, what
is left is what the target knows about a text beyond what a model that never saw it knows.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from medunlearn.errors import InputError
from medunlearn.evaluation.populations import FORGET_HOLDOUT, FORGET_SEEN
from medunlearn.evaluation.scoring import MIA_ATTACKS, probability_statistics

__all__ = [
    "MEMBERS",
    "MIA_ATTACKS",
    "NONMEMBERS",
    "auc_null_sd",
    "member_examples",
    "membership_aucs",
    "membership_report",
    "membership_scores",
    "membership_section",
    "nonmember_examples",
    "reference_attack_auc",
]

MEMBERS = "forget patients' seen QA (forget_seen: trained on, then unlearned)"
NONMEMBERS = "the same patients' holdout QA (forget_holdout: never trained on)"
BASELINES = {
    "before": "the model before unlearning (trained on the members): what the attack reads when they are "
    "known",
    "retain": "the retain model (never trained on the forget patients): what the attack reads when they are "
    "not; near 0.5",
}


def _as_table(scores, role: str) -> pd.DataFrame:
    if isinstance(scores, pd.DataFrame):
        return scores
    if isinstance(scores, Mapping):
        return pd.DataFrame({key: np.asarray(value) for key, value in scores.items()})
    raise InputError(
        f"{role} scores must be a DataFrame or a mapping of columns, got {type(scores).__name__}"
    )


def membership_scores(scores, role: str = "scores") -> pd.DataFrame:
    """The loss-like MIA scores of a set of examples, one column per attack of ``MIA_ATTACKS``.

    ``scores`` is one of (a DataFrame or a mapping of columns):

    - a per-example table with the ``mia_<attack>`` columns (``per_example.parquet``,
      ``per_example_metrics``), or with plain ``<attack>`` columns;
    - runner outputs joined with their examples: ``token_logprobs``, ``token_mean_logprob``,
      ``token_std_logprob``, ``token_is_argmax`` and ``answer`` (the answer text zlib compresses), scored by
      :func:`medunlearn.evaluation.scoring.probability_statistics`.

    An ``example_id`` column, when there is one, is kept (the reference attack pairs rows by it).
    """
    table = _as_table(scores, role)
    if all(f"mia_{attack}" in table for attack in MIA_ATTACKS):
        columns = {attack: table[f"mia_{attack}"] for attack in MIA_ATTACKS}
    elif all(attack in table for attack in MIA_ATTACKS):
        columns = {attack: table[attack] for attack in MIA_ATTACKS}
    elif "token_logprobs" in table and "answer" in table:
        statistics = probability_statistics(table.reset_index(drop=True), table["answer"].astype(str))
        columns = {attack: statistics[f"mia_{attack}"] for attack in MIA_ATTACKS}
    else:
        raise InputError(
            f"{role} scores need the columns mia_{', mia_'.join(MIA_ATTACKS)} (per-example metrics) or "
            "token_logprobs, token_mean_logprob, token_std_logprob, token_is_argmax and answer "
            "(runner outputs)"
        )
    result = pd.DataFrame(
        {attack: np.asarray(values, dtype=np.float64) for attack, values in columns.items()}
    )
    if "example_id" in table:
        result.insert(0, "example_id", table["example_id"].astype(str).to_numpy())
    if result.empty:
        raise InputError(f"{role} scores hold no example")
    values = result[list(MIA_ATTACKS)].to_numpy()
    if not np.isfinite(values).all():
        row, column = np.argwhere(~np.isfinite(values))[0]
        raise InputError(f"{role} scores, row {row + 1}, attack {MIA_ATTACKS[column]!r}: not a finite number")
    return result


def _auc(member_scores, nonmember_scores) -> float:
    """ROC AUC of members (label 1) by membership score = −(loss-like score)."""
    from sklearn.metrics import roc_auc_score

    member_scores = np.asarray(member_scores, dtype=np.float64)
    nonmember_scores = np.asarray(nonmember_scores, dtype=np.float64)
    labels = np.concatenate([np.ones(len(member_scores)), np.zeros(len(nonmember_scores))])
    return float(roc_auc_score(labels, -np.concatenate([member_scores, nonmember_scores])))


def membership_aucs(member, nonmember) -> dict[str, float]:
    """AUC of telling members (the forget patients' seen QA) from non-members (the same patients' holdout QA)
    for each attack: ``{"loss", "zlib", "min_k", "min_k_plus_plus"}`` -> AUC in [0, 1].

    ``member`` / ``nonmember``: anything :func:`membership_scores` takes. Higher membership score = more
    likely a member (the loss-like scores negated), so 1.0 = every member recognised, 0.5 = chance.

    >>> members = {"mia_loss": [0.1, 0.2], "mia_zlib": [0.1, 0.2], "mia_min_k": [0.5, 0.6],
    ...            "mia_min_k_plus_plus": [0.3, 0.4]}
    >>> nonmembers = {"mia_loss": [0.9, 0.15], "mia_zlib": [0.9, 0.8], "mia_min_k": [0.55, 0.7],
    ...               "mia_min_k_plus_plus": [0.1, 0.2]}
    >>> membership_aucs(members, nonmembers)
    {'loss': 0.75, 'zlib': 1.0, 'min_k': 0.75, 'min_k_plus_plus': 0.0}
    """
    member_table = membership_scores(member, "member")
    nonmember_table = membership_scores(nonmember, "non-member")
    return {attack: _auc(member_table[attack], nonmember_table[attack]) for attack in MIA_ATTACKS}


def _paired(target: pd.DataFrame, reference: pd.DataFrame, attack: str, role: str) -> np.ndarray:
    """``target − reference`` of one attack's score, rows paired by ``example_id`` when both have it."""
    if "example_id" in target and "example_id" in reference:
        ref = reference.set_index("example_id")[attack]
        missing = pd.Index(target["example_id"]).difference(ref.index)
        if len(missing):
            raise InputError(f"the reference model has no {role} score for example {missing[0]!r}")
        return target[attack].to_numpy() - ref.loc[target["example_id"]].to_numpy()
    if len(target) != len(reference):
        raise InputError(
            f"{len(target)} {role} score(s) of the target model but {len(reference)} of the reference model "
            "(give example_id columns to pair them)"
        )
    return target[attack].to_numpy() - reference[attack].to_numpy()


def reference_attack_auc(
    member_model, nonmember_model, member_ref, nonmember_ref, attack: str = "loss"
) -> float:
    """AUC of the reference-calibrated attack: membership score ``−(score_target − score_ref)`` per example.

    ``member_model`` / ``nonmember_model``: the evaluated (unlearned) model's scores on members and
    non-members; ``member_ref`` / ``nonmember_ref``: the reference model's (the retain model's) on the same
    examples, paired by ``example_id`` when the tables have it, else by position. Anything
    :func:`membership_scores` takes; ``attack`` picks the score (``loss`` by default, as published).

    >>> reference_attack_auc({"loss": [1.0, 2.0]}, {"loss": [1.0, 2.0]}, {"loss": [2.0, 3.0]},
    ...                      {"loss": [1.0, 2.0]})
    1.0
    """
    if attack not in MIA_ATTACKS:
        raise InputError(f"unknown attack {attack!r}; one of {', '.join(MIA_ATTACKS)}")

    def table(scores, role):
        frame = _as_table(scores, role)
        if attack in frame and f"mia_{attack}" not in frame:
            frame = frame.rename(columns={attack: f"mia_{attack}"})
        if f"mia_{attack}" in frame:  # only this attack's column is needed
            keep = [c for c in ("example_id", f"mia_{attack}") if c in frame]
            frame = frame[keep].rename(columns={f"mia_{attack}": attack})
            values = frame[attack].to_numpy(dtype=np.float64)
            if frame.empty or not np.isfinite(values).all():
                raise InputError(f"{role} scores are empty or not all finite")
            return frame
        return membership_scores(frame, role)

    members = _paired(
        table(member_model, "member"), table(member_ref, "member (reference)"), attack, "member"
    )
    nonmembers = _paired(
        table(nonmember_model, "non-member"),
        table(nonmember_ref, "non-member (reference)"),
        attack,
        "non-member",
    )
    return _auc(members, nonmembers)


def membership_report(member, nonmember, member_ref=None, nonmember_ref=None) -> dict:
    """The membership section of an attack report: ``auc`` (:func:`membership_aucs`), ``reference_auc``
    (:func:`reference_attack_auc` on the loss; None without reference scores), ``n_members``,
    ``n_nonmembers`` and ``orientation``."""
    member_table = membership_scores(member, "member")
    nonmember_table = membership_scores(nonmember, "non-member")
    report = {
        "auc": {attack: _auc(member_table[attack], nonmember_table[attack]) for attack in MIA_ATTACKS},
        "reference_auc": None,
        "n_members": len(member_table),
        "n_nonmembers": len(nonmember_table),
        "orientation": "AUC of members (forget seen QA) vs non-members (the same patients' holdout QA); "
        "1.0 = members recognised, 0.5 = indistinguishable",
    }
    if member_ref is not None and nonmember_ref is not None:
        report["reference_auc"] = reference_attack_auc(
            member_table, nonmember_table, member_ref, nonmember_ref
        )
    return report


def member_examples(examples: pd.DataFrame) -> pd.DataFrame:
    """The member examples of an examples table: its ``forget_seen`` rows."""
    rows = examples[examples["population"] == FORGET_SEEN].reset_index(drop=True)
    if rows.empty:
        raise InputError("the examples hold no forget_seen rows (the members)")
    return rows


def nonmember_examples(examples: pd.DataFrame) -> pd.DataFrame:
    """The non-member examples of an examples table: its ``forget_holdout`` rows (the same patients'
    unseen QA)."""
    rows = examples[examples["population"] == FORGET_HOLDOUT].reset_index(drop=True)
    if rows.empty:
        raise InputError("the examples hold no forget_holdout rows (the non-members: the forget patients' QA "
                         "never trained on)")  # fmt: skip
    return rows


def auc_null_sd(n_members: int, n_nonmembers: int) -> float:
    """The standard deviation of an AUC when members and non-members are exchangeable (no membership
    signal): ``sqrt((n1 + n2 + 1) / (12·n1·n2))``, the Mann–Whitney U statistic's null variance over
    (n1·n2)² (Hanley & McNeil 1982), for independent scores. Scores of one patient's QA are correlated,
    which moves it either way: neither a lower nor an upper bound (docs/attacks.md, "Membership").

    >>> round(auc_null_sd(60, 20), 4)
    0.075
    """
    return float(np.sqrt((n_members + n_nonmembers + 1) / (12 * n_members * n_nonmembers)))


def membership_section(tables: Mapping[str, pd.DataFrame]) -> dict:
    """The ``membership`` section of an attack report from per-example tables with the ``mia_*`` columns of
    the forget populations, by role: ``unlearned`` (required), ``before`` and ``retain`` (optional).

    Each role gets :func:`membership_report` of its forget seen (members) against its forget holdout
    (non-members) QA; the unlearned model's also the reference attack calibrated by the retain model. Names
    the two populations, the patients they share, the baselines and the AUC's null standard deviation."""
    split = {role: (member_examples(t), nonmember_examples(t)) for role, t in tables.items()}
    members, nonmembers = split["unlearned"]
    section: dict = {
        "members": MEMBERS,
        "nonmembers": NONMEMBERS,
        "patients": int(members["patient_id"].nunique()),
        "same_patients": set(members["patient_id"]) == set(nonmembers["patient_id"]),
        "n_members": len(members),
        "n_nonmembers": len(nonmembers),
        "null_sd": auc_null_sd(len(members), len(nonmembers)),
    }
    retain = split.get("retain")
    section["unlearned"] = membership_report(
        members, nonmembers, *(retain if retain is not None else (None, None))
    )
    for role in ("before", "retain"):
        if role in split:
            section[role] = membership_report(*split[role])
    section["baselines"] = {role: text for role, text in BASELINES.items() if role in split}
    return section
