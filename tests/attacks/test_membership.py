"""Membership attacks: AUCs against sklearn and an independent rank computation, planted data, the
reference attack, and scores from runner outputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from medunlearn.attacks.membership import (
    MIA_ATTACKS,
    NONMEMBER_POPULATION,
    member_examples,
    membership_aucs,
    membership_report,
    membership_scores,
    reference_attack_auc,
    retained_holdout_examples,
)
from medunlearn.errors import InputError
from medunlearn.metrics import mia


def rank_auc(members, nonmembers) -> float:
    """P(member score > non-member score) + ½ P(tie), membership score = −(loss-like score), by counting
    every pair (the Mann–Whitney U statistic / (n·m))."""
    members = -np.asarray(members, dtype=np.float64)
    nonmembers = -np.asarray(nonmembers, dtype=np.float64)
    greater = (members[:, None] > nonmembers[None, :]).sum()
    ties = (members[:, None] == nonmembers[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(members) * len(nonmembers)))


def score_table(rng, n: int, shift: float = 0.0, ties: bool = False) -> pd.DataFrame:
    columns = {}
    for attack in MIA_ATTACKS:
        values = rng.normal(size=n) + shift
        columns[f"mia_{attack}"] = np.round(values, 1) if ties else values
    return pd.DataFrame({"example_id": [f"e{shift}-{i}" for i in range(n)], **columns})


@pytest.mark.parametrize("ties", [False, True])
def test_membership_aucs_equal_sklearn_and_the_rank_formula(ties):
    rng = np.random.default_rng(0)
    members, nonmembers = score_table(rng, 37, shift=-1.5, ties=ties), score_table(rng, 23, ties=ties)
    aucs = membership_aucs(members, nonmembers)
    assert list(aucs) == list(MIA_ATTACKS)
    for attack, auc in aucs.items():
        member, nonmember = members[f"mia_{attack}"], nonmembers[f"mia_{attack}"]
        labels = np.r_[np.ones(len(member)), np.zeros(len(nonmember))]
        assert auc == pytest.approx(roc_auc_score(labels, -np.r_[member, nonmember]), abs=1e-12)
        assert auc == pytest.approx(rank_auc(member, nonmember), abs=1e-12)
        # The same number as the evaluation's (loss-like) MIA AUC.
        assert auc == pytest.approx(mia.mia_auc(member, nonmember), abs=1e-12)
    assert all(0.5 < auc <= 1.0 for auc in aucs.values())  # members were planted with lower losses


def test_planted_separable_scores_give_one_and_identical_distributions_one_half():
    rng = np.random.default_rng(1)
    separable = membership_aucs(score_table(rng, 200, shift=-10.0), score_table(rng, 200))
    assert all(auc == pytest.approx(1.0, abs=1e-3) for auc in separable.values())
    inverted = membership_aucs(score_table(rng, 200, shift=10.0), score_table(rng, 200))
    assert all(auc == pytest.approx(0.0, abs=1e-3) for auc in inverted.values())  # over-unlearning
    identical = membership_aucs(score_table(rng, 3000), score_table(rng, 3000))
    assert all(auc == pytest.approx(0.5, abs=0.03) for auc in identical.values())


def test_scores_from_runner_outputs_use_the_evaluations_score_functions():
    from medunlearn.evaluation.scoring import probability_statistics

    rng = np.random.default_rng(2)
    lengths = [3, 5, 2, 4]
    outputs = pd.DataFrame(
        {
            "example_id": [f"e{i}" for i in range(4)],
            "token_logprobs": [-rng.exponential(size=n) for n in lengths],
            "token_is_argmax": [rng.random(n) < 0.5 for n in lengths],
            "token_mean_logprob": [-rng.exponential(size=n) - 0.5 for n in lengths],
            "token_std_logprob": [rng.random(n) + 0.1 for n in lengths],
            "answer": ["A stent.", "The right coronary artery.", "Fever.", "Amoxicillin for a week."],
        }
    )
    scores = membership_scores(outputs)
    expected = probability_statistics(outputs, outputs["answer"])
    assert scores["example_id"].tolist() == outputs["example_id"].tolist()
    for attack in MIA_ATTACKS:
        np.testing.assert_allclose(scores[attack], expected[f"mia_{attack}"])
    # min-k%++ is built from the stored next-token mean and std (not recomputed from the log-probs alone).
    logprobs = np.full((4, 5), 0.0)
    mask = np.zeros((4, 5), dtype=bool)
    mean, std = np.zeros((4, 5)), np.ones((4, 5))
    for i, n in enumerate(lengths):
        logprobs[i, :n], mask[i, :n] = outputs["token_logprobs"][i], True
        mean[i, :n], std[i, :n] = outputs["token_mean_logprob"][i], outputs["token_std_logprob"][i]
    np.testing.assert_allclose(
        scores["min_k_plus_plus"], mia.min_k_plus_plus_score(logprobs, mask, mean, std, k=0.4)
    )


def test_scores_name_what_is_missing():
    with pytest.raises(InputError, match="mia_loss"):
        membership_aucs({"loss": [0.1]}, {"loss": [0.2]})
    finite = {f"mia_{a}": [0.1, 0.2] for a in MIA_ATTACKS}
    broken = {**finite, "mia_zlib": [0.1, np.nan]}
    with pytest.raises(InputError, match="row 2, attack 'zlib'"):
        membership_aucs(finite, broken)
    with pytest.raises(InputError, match="no example"):
        membership_aucs(finite, {f"mia_{a}": [] for a in MIA_ATTACKS})


def planted_reference(rng, n: int, member: bool, memorised: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Losses with a per-example difficulty both models share; the target knows members better."""
    difficulty = rng.normal(scale=1.0, size=n)
    ids = [f"{'m' if member else 'n'}{i}" for i in range(n)]
    target = difficulty - (memorised if member else 0.0) + rng.normal(scale=0.05, size=n)
    reference = difficulty + rng.normal(scale=0.05, size=n)
    return pd.DataFrame({"example_id": ids, "mia_loss": target}), pd.DataFrame(
        {"example_id": ids, "loss": reference}
    )


def test_reference_attack_removes_the_difficulty_the_plain_loss_attack_cannot():
    rng = np.random.default_rng(3)
    member_model, member_ref = planted_reference(rng, 300, member=True, memorised=0.5)
    nonmember_model, nonmember_ref = planted_reference(rng, 300, member=False, memorised=0.5)
    plain = membership_aucs(
        {"mia_" + a: member_model["mia_loss"] for a in MIA_ATTACKS},
        {"mia_" + a: nonmember_model["mia_loss"] for a in MIA_ATTACKS},
    )["loss"]
    calibrated = reference_attack_auc(member_model, nonmember_model, member_ref, nonmember_ref)
    assert 0.55 < plain < 0.8  # difficulty hides most of the memorisation from the loss alone
    assert calibrated > 0.99  # the reference model's loss removes it
    expected = roc_auc_score(
        np.r_[np.ones(300), np.zeros(300)],
        -np.r_[
            member_model["mia_loss"] - member_ref["loss"], nonmember_model["mia_loss"] - nonmember_ref["loss"]
        ],
    )
    assert calibrated == pytest.approx(expected, abs=1e-12)
    # Reference rows are paired by example_id, whatever their order.
    shuffled = member_ref.sample(frac=1.0, random_state=0)
    assert reference_attack_auc(member_model, nonmember_model, shuffled, nonmember_ref) == calibrated
    # A model that forgot exactly what the reference never knew: the attack is at chance.
    forgotten, forgotten_ref = planted_reference(rng, 3000, member=True, memorised=0.0)
    never, never_ref = planted_reference(rng, 3000, member=False, memorised=0.0)
    assert reference_attack_auc(forgotten, never, forgotten_ref, never_ref) == pytest.approx(0.5, abs=0.03)


def test_reference_attack_names_unpaired_rows():
    target = pd.DataFrame({"example_id": ["a", "b"], "mia_loss": [0.1, 0.2]})
    with pytest.raises(InputError, match="'b'"):
        reference_attack_auc(target, target, target.iloc[:1], target)
    with pytest.raises(InputError, match="2 member score"):
        reference_attack_auc({"loss": [0.1, 0.2]}, {"loss": [0.1]}, {"loss": [0.1]}, {"loss": [0.1]})
    with pytest.raises(InputError, match="unknown attack"):
        reference_attack_auc(target, target, target, target, attack="lira")


def test_membership_report_and_populations():
    rng = np.random.default_rng(4)
    members, nonmembers = score_table(rng, 20, shift=-1.0), score_table(rng, 30)
    report = membership_report(members, nonmembers)
    assert report["auc"] == membership_aucs(members, nonmembers)
    assert report["reference_auc"] is None and (report["n_members"], report["n_nonmembers"]) == (20, 30)
    with_reference = membership_report(members, nonmembers, members, nonmembers)
    assert with_reference["reference_auc"] == 0.5  # target == reference: every calibrated score is 0

    holdout = pd.DataFrame(
        {
            "qa_id": [f"P{p}-H{k}" for p in range(5) for k in range(2)],
            "patient_id": [f"P{p}" for p in range(5) for _ in range(2)],
            "disease": "cancer",
            "qa_type": ["factual", "reasoning"] * 5,
            "question": [f"Question {i}?" for i in range(10)],
            "answer": [f"Answer {i}." for i in range(10)],
        }
    )
    nonmember_examples = retained_holdout_examples(holdout, max_patients=3, seed=0)
    assert (nonmember_examples["population"] == NONMEMBER_POPULATION).all()
    assert nonmember_examples["patient_id"].nunique() == 3 and len(nonmember_examples) == 6  # whole patients
    assert nonmember_examples["example_id"].str.startswith("retain_holdout/").all()
    assert nonmember_examples.equals(retained_holdout_examples(holdout, max_patients=3, seed=0))
    with pytest.raises(InputError, match="question"):
        retained_holdout_examples(holdout.drop(columns="question"))
    examples = pd.DataFrame({"population": ["forget_seen", "forget_holdout"], "example_id": ["a", "b"]})
    assert member_examples(examples)["example_id"].tolist() == ["a"]


def test_module_doctests_run():
    import doctest

    from medunlearn.attacks import membership as module

    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, module.__name__):
        runner.run(test)
    summary = runner.summarize(verbose=False)
    assert summary.attempted > 0 and summary.failed == 0
