"""Membership attacks: AUCs against sklearn and an independent rank computation, planted data, the
reference attack, and scores from runner outputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from medunlearn.attacks.membership import (
    MIA_ATTACKS,
    auc_null_sd,
    member_examples,
    membership_aucs,
    membership_report,
    membership_scores,
    membership_section,
    nonmember_examples,
    reference_attack_auc,
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

    examples = pd.DataFrame({"population": ["forget_seen", "forget_holdout"], "example_id": ["a", "b"]})
    assert member_examples(examples)["example_id"].tolist() == ["a"]
    assert nonmember_examples(examples)["example_id"].tolist() == ["b"]
    with pytest.raises(InputError, match="forget_holdout"):
        nonmember_examples(examples.iloc[:1])


def forget_tables(rng, patients: int = 12, member_shift: float = 0.0) -> pd.DataFrame:
    """Per-example MIA scores of forget patients: three seen QA (members) and one holdout QA (non-members)
    per patient; a patient-level offset shared by all their QA, members shifted by ``member_shift``."""
    rows = []
    for patient in range(patients):
        offset = rng.normal()
        for qa in range(4):
            population = "forget_seen" if qa < 3 else "forget_holdout"
            shift = member_shift if population == "forget_seen" else 0.0
            scores = {f"mia_{a}": offset + shift + rng.normal(scale=0.5) for a in MIA_ATTACKS}
            rows.append(
                {"example_id": f"{population}/P{patient}-{qa}", "population": population,
                 "patient_id": f"P{patient}", **scores}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_membership_section_names_its_populations_and_reports_the_baselines():
    """Members and non-members are the same patients' seen and holdout QA; the before and retain models'
    AUCs on the same split are reported beside the unlearned model's (here: the before model's members are
    planted with lower losses, the retain model's are not)."""
    rng = np.random.default_rng(0)
    tables = {
        "unlearned": forget_tables(rng),
        "before": forget_tables(rng, member_shift=-3.0),
        "retain": forget_tables(rng),
    }
    section = membership_section(tables)
    assert section["members"].startswith("forget patients' seen QA")
    assert section["nonmembers"].startswith("the same patients' holdout QA")
    assert section["same_patients"] and section["patients"] == 12
    assert (section["n_members"], section["n_nonmembers"]) == (36, 12)
    assert section["null_sd"] == pytest.approx(np.sqrt(49 / (12 * 36 * 12)))
    assert set(section["baselines"]) == {"before", "retain"}
    assert all(auc > 0.9 for auc in section["before"]["auc"].values())
    seen, holdout = (
        tables["retain"][tables["retain"]["population"] == p] for p in ("forget_seen", "forget_holdout")
    )
    assert section["retain"]["auc"] == membership_aucs(seen, holdout)
    assert section["unlearned"]["reference_auc"] is not None
    without_retain = membership_section({k: tables[k] for k in ("unlearned", "before")})
    assert "retain" not in without_retain and without_retain["unlearned"]["reference_auc"] is None


def test_auc_null_sd_matches_a_simulation():
    """Exchangeable scores: the AUC's spread over 4000 draws is the formula's."""
    rng = np.random.default_rng(2)
    aucs = [rank_auc(rng.normal(size=30), rng.normal(size=10)) for _ in range(4000)]
    assert np.std(aucs) == pytest.approx(auc_null_sd(30, 10), rel=0.05)


def test_module_doctests_run():
    import doctest

    from medunlearn.attacks import membership as module

    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, module.__name__):
        runner.run(test)
    summary = runner.summarize(verbose=False)
    assert summary.attempted > 0 and summary.failed == 0


def clustered_null_auc_sd(members_per_patient, nonmembers_per_patient, seed=0, draws=2000):
    """The AUC's sd over draws of scores with no membership signal, each score a patient effect plus noise
    (intra-patient correlation 0.5), members and non-members taken per patient as given."""
    from scipy.stats import rankdata

    rng = np.random.default_rng(seed)
    patient_of = np.r_[
        np.repeat(np.arange(len(members_per_patient)), members_per_patient),
        np.repeat(np.arange(len(nonmembers_per_patient)), nonmembers_per_patient),
    ]
    n_members, n_nonmembers = sum(members_per_patient), sum(nonmembers_per_patient)
    effects = rng.normal(0, np.sqrt(0.5), (draws, len(members_per_patient)))
    scores = effects[:, patient_of] + rng.normal(0, np.sqrt(0.5), (draws, len(patient_of)))
    member_rank_sum = rankdata(scores, axis=1)[:, :n_members].sum(axis=1)  # Mann–Whitney U, per draw
    aucs = (member_rank_sum - n_members * (n_members + 1) / 2) / (n_members * n_nonmembers)
    return float(np.std(aucs))


def test_auc_null_sd_is_neither_a_lower_nor_an_upper_bound_with_clustered_patients():
    """4 patients of 6 members and 2 non-members each, scores correlated 0.5 within a patient: the patient
    effect cancels in part and the AUC varies less than the formula (about 0.095 vs 0.120); with the same 24
    and 8 spread unevenly (9, 9, 3, 3 members; 1, 1, 3, 3 non-members) it varies more (about 0.136). The
    docs and the docstring say so (they called the formula a lower bound)."""
    formula = auc_null_sd(24, 8)
    assert formula == pytest.approx(0.1197, abs=1e-4)
    # the simulation itself: one QA per patient (independent scores) gives the formula
    assert clustered_null_auc_sd([1] * 24 + [0] * 8, [0] * 24 + [1] * 8) == pytest.approx(formula, rel=0.06)
    assert clustered_null_auc_sd([6, 6, 6, 6], [2, 2, 2, 2]) < 0.9 * formula
    assert clustered_null_auc_sd([9, 9, 3, 3], [1, 1, 3, 3]) > 1.1 * formula
    assert "lower bound" not in auc_null_sd.__doc__ and "neither" in auc_null_sd.__doc__
