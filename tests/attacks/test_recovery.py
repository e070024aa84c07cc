"""Intervals of recovered shares and the selection-aware worst case: planted null and planted recovery,
against an independent per-resample computation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medunlearn.attacks.summary import (
    markdown_table,
    model_card_section,
    recovered_share,
    robustness_summary,
    write_robustness_plot,
)
from medunlearn.metrics.bootstrap import BootstrapConfig, resample_weights

NOT_DISTINGUISHABLE = "not distinguishable from no recovery"


def planted_rows(seed, patients=10, qa=4, attacks=8, recovered=0.0, forgotten=0.1, noise=0.15):
    """Attack rows on planted per-example similarities: the attacked similarity is the unlearned one plus
    noise (per QA and per patient), plus ``recovered`` × what was forgotten on the first attack only."""
    from medunlearn.attacks.recovery import ShareSample

    rng = np.random.default_rng(seed)
    index = np.repeat(np.arange(patients), qa)
    patient_ids = np.array([f"P{p:02d}" for p in index])
    before = 0.4 + rng.normal(0, 0.1, patients)[index] + rng.normal(0, noise, len(index))
    unlearned = before - forgotten + rng.normal(0, noise, len(index))
    rows = []
    for attack in range(attacks):
        attacked = unlearned + rng.normal(0, noise, len(index)) + rng.normal(0, 0.05, patients)[index]
        if attack == 0:
            attacked = attacked + recovered * (before - unlearned)
        means = before.mean(), unlearned.mean(), attacked.mean()
        rows.append(
            {
                "attack": "relearn",
                "variant": f"k={attack + 1}",
                "population": "forget_seen",
                "n": len(index),
                "before": means[0],
                "unlearned": means[1],
                "attacked": means[2],
                "recovered_share": recovered_share(*means),
                "_sample": ShareSample.plain(patient_ids, before, unlearned, attacked),
            }
        )
    return rows


def test_no_planted_recovery_is_claimed_at_most_at_the_nominal_rate():
    """The issue's null: 40 scored QA (10 patients × 4), 8 attack rows, no attack recovers anything. The
    point worst case is biased upwards (its median is well above 0, what the old headline reported), but
    over 200 seeds the headline claims recovery (the selection-aware 95% interval above 0) in at most 2.5%
    of them: the one-sided error rate of a two-sided 95% interval."""
    config = BootstrapConfig(n_resamples=500, seed=0)
    summaries = [robustness_summary("null", planted_rows(seed), 0.5, 0.5, config) for seed in range(200)]
    worst = np.array([s["worst_case_recovery"] for s in summaries])
    assert np.median(worst) > 0.2  # the maximum of 8 noisy ratios, not a recovery
    claims = sum(s["worst_case_verdict"] == "recovery" for s in summaries)
    assert claims <= 5  # 2.5% of 200 seeds
    assert sum(s["worst_case_verdict"] == NOT_DISTINGUISHABLE for s in summaries) >= 180
    for summary in summaries[:20]:
        low, high = summary["worst_case_ci"]
        assert low <= summary["worst_case_recovery"] <= high
        assert sum(summary["worst_case_wins"].values()) == pytest.approx(1.0)


def test_a_planted_recovery_is_claimed_and_its_attack_wins():
    config = BootstrapConfig(n_resamples=1000, seed=0)
    rows = planted_rows(0, patients=30, recovered=1.0, forgotten=0.2, noise=0.1)
    summary = robustness_summary("recovers", rows, 0.5, 0.5, config)
    assert summary["worst_case_verdict"] == "recovery"
    assert summary["worst_case_attack"] == "relearn k=1 (forget_seen)"
    assert summary["worst_case_ci"][0] > 0.3
    label, share = next(iter(summary["worst_case_wins"].items()))
    assert label == "relearn k=1 (forget_seen)" and share > 0.9
    low, high = rows[0]["recovered_share_ci"]
    assert low < rows[0]["recovered_share"] < high and low > 0.5
    assert rows[0]["patients"] == 30


def test_row_intervals_match_an_independent_patient_bootstrap():
    """Each row's interval is the percentile interval of its share recomputed on patients drawn with
    replacement: redone here resample by resample with pandas, from the same weights."""
    config = BootstrapConfig(n_resamples=300, seed=3)
    rows = planted_rows(1, patients=6, qa=3, attacks=3, recovered=0.5)
    summary = robustness_summary("m", rows, None, None, config)
    patients = sorted(set(rows[0]["_sample"].series["before"][0]))
    weights = resample_weights(len(patients), config, np.random.default_rng(config.seed))
    for row in rows:
        patient_ids, before = row["_sample"].series["before"]
        frame = pd.DataFrame(
            {
                "patient": patient_ids,
                "before": before,
                "unlearned": row["_sample"].series["unlearned"][1],
                "attacked": row["_sample"].series["attacked"][1],
            }
        )
        draws = []
        for drawn in weights:
            repeat = frame["patient"].map(dict(zip(patients, drawn))).to_numpy()
            means = [np.average(frame[c], weights=repeat) for c in ("before", "unlearned", "attacked")]
            draws.append(recovered_share(*means))
        draws = np.array([np.nan if d is None else d for d in draws])
        expected = np.nanpercentile(draws, [2.5, 97.5])
        np.testing.assert_allclose(row["recovered_share_ci"], expected, rtol=1e-9)
    assert summary["bootstrap"]["n_resamples"] == 300 and summary["bootstrap"]["clusters"] == "patients"


def test_normalised_row_sample_gives_the_row_share():
    from medunlearn.attacks.recovery import ShareSample
    from medunlearn.attacks.summary import normalised_recovered_share

    sample = ShareSample.normalised(["a", "b"], [0.8, 0.8], [0.2, 0.2], ["a", "b"], [0.6, 0.6], [0.3, 0.3])
    index = {"a": 0, "b": 1}
    assert sample.resampled(np.ones((1, 2)), index)[0] == pytest.approx(
        normalised_recovered_share(0.3, 0.6, 0.2, 0.8)
    )


def test_the_verdict_is_shown_in_the_table_the_card_and_the_plot(tmp_path):
    config = BootstrapConfig(n_resamples=300, seed=0)
    rows = planted_rows(4)
    summary = robustness_summary("GradDiff", rows, 0.6, 0.4, config)
    assert summary["worst_case_verdict"] == NOT_DISTINGUISHABLE
    table = markdown_table(rows, [summary])
    assert NOT_DISTINGUISHABLE in table and "worst-case CI (selection-aware)" in table
    assert "recovered CI" in table.splitlines()[0]
    card = model_card_section(summary, rows)
    assert NOT_DISTINGUISHABLE in card and "includes 0" in card
    plot = write_robustness_plot([summary], tmp_path / "attacks.png")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_worst_case_band_covers_the_rows_bands_and_widens_for_few_patients():
    """Hand-made draws: two rows, the band is the largest of θ̂_i ± c_i·sd_i; with 3 patients c_i is wider
    than with 300."""
    from medunlearn.attacks.recovery import worst_case_band

    rng = np.random.default_rng(0)
    draws = np.column_stack([rng.normal(0.2, 0.1, 4000), rng.normal(0.5, 0.3, 4000)])
    estimates = np.array([0.2, 0.5])
    low_many, high_many = worst_case_band(estimates, draws, [300, 300], 0.95)
    low_few, high_few = worst_case_band(estimates, draws, [3, 3], 0.95)
    assert low_few < low_many < 0.5 < high_many < high_few
    # many patients: c is the 95% quantile of the larger of two independent |z|: about 2.24
    assert high_many == pytest.approx(0.5 + 2.24 * 0.3, abs=0.05)


def test_the_evaluation_report_and_the_study_table_say_not_distinguishable(tmp_path):
    """The report's worst-case column and the study table read the verdict from attacks.json (plain JSON:
    the evaluation layer never imports the attacks)."""
    import json

    from rich.console import Console

    from medunlearn.evaluation.report import TABLE_COLUMNS, render_table, study_table_markdown
    from medunlearn.evaluation.robustness import seeds_worst_cases, worst_case_caption

    summary = robustness_summary("GradDiff", planted_rows(4), 0.6, 0.4, BootstrapConfig(n_resamples=300))
    row = {"method": "GradDiff", "population": "forget_seen", "qa_type": "all", "n": 40}
    row.update({key: 0.5 for _, key in TABLE_COLUMNS})
    row.update({key: summary[key] for key in ("worst_case_recovery", "worst_case_attack", "worst_case_ci")})
    row["worst_case_verdict"] = summary["worst_case_verdict"]
    console = Console(width=400, record=True)
    console.print(render_table([row]))
    assert NOT_DISTINGUISHABLE in console.export_text()

    attack_dir = tmp_path / "attacks"
    attack_dir.mkdir()
    (attack_dir / "attacks.json").write_text(json.dumps({"summaries": [summary]}))
    cases = seeds_worst_cases([{"attack_dir": str(attack_dir)}], "GradDiff")
    assert cases["worst_case_verdict"] == NOT_DISTINGUISHABLE
    assert cases["worst_case_ci"] == summary["worst_case_ci"]
    point = {"label": "GradDiff", "series": "random", "forget_size": 10, "worst_case_recovery": 0.4, **cases}
    assert "0.400 (n.d.)" in study_table_markdown([point])
    assert NOT_DISTINGUISHABLE in worst_case_caption([point])


def two_patient_sample(attacked):
    from medunlearn.attacks.recovery import ShareSample

    return ShareSample.plain(["a", "a", "b", "b"], [0.5] * 4, [0.3] * 4, attacked)


def test_two_patients_whose_shares_disagree_give_no_recovery():
    """The reviewer's case: patient a's attack brings back +0.8 of what was forgotten, patient b's −0.5;
    half of the resamples reproduce the estimate (+0.15), so the IQR is 0. Two patients give no bound."""
    from medunlearn.attacks.recovery import recovery_uncertainty

    out = recovery_uncertainty([two_patient_sample([0.46, 0.46, 0.2, 0.2])], ["r"], BootstrapConfig())
    assert out["estimates"][0] == pytest.approx(0.15)
    assert out["row_intervals"][0] == pytest.approx([-0.5, 0.8])
    assert out["worst_case_ci"][1] == np.inf
    assert out["worst_case_verdict"] == NOT_DISTINGUISHABLE


@pytest.mark.parametrize("patients", [2, 3])
def test_few_patient_null_claims_at_most_the_nominal_rate(patients):
    """No true recovery, one attack row, 2 or 3 patients of 2 QA each: recovery is claimed in at most 2.5%
    of 200 seeds (the one-sided rate of a 95% interval); the old band claimed it in 16.5% at 2 patients."""
    from medunlearn.attacks.recovery import ShareSample, recovery_uncertainty

    rng = np.random.default_rng(0)
    ids = np.repeat([f"P{p}" for p in range(patients)], 2)
    before, unlearned = np.full(len(ids), 0.5), np.full(len(ids), 0.3)
    claims = 0
    for seed in range(200):
        attacked = unlearned + np.repeat(rng.normal(0, 0.15, patients), 2) + rng.normal(0, 0.02, len(ids))
        sample = ShareSample.plain(ids, before, unlearned, attacked)
        out = recovery_uncertainty([sample], ["r"], BootstrapConfig(n_resamples=500, seed=seed))
        claims += out["worst_case_verdict"] == "recovery"
    assert claims <= 5


def test_the_band_falls_back_to_the_draws_sd_when_their_iqr_is_zero():
    """Over half of the draws equal the estimate (IQR 0) but the others vary: the band keeps a width (the
    draws' standard deviation), it does not collapse onto the estimate."""
    from medunlearn.attacks.recovery import worst_case_band

    rng = np.random.default_rng(0)
    draws = np.concatenate([np.full(600, 0.15), 0.15 + rng.normal(0, 0.5, 400)])[:, None]
    low, high = worst_case_band([0.15], draws, [20], 0.95)
    sd = float(np.std(draws))
    assert low < 0.15 - sd and high > 0.15 + sd


def one_patient_summary():
    from medunlearn.attacks.recovery import ShareSample

    rows = [
        {
            "attack": "relearn",
            "variant": "k=1",
            "population": "forget_seen",
            "recovered_share": recovered_share(0.5, 0.25, 0.4),
            "_sample": ShareSample.plain(["a", "a"], [0.5, 0.5], [0.2, 0.3], [0.4, 0.4]),
        }
    ]
    return robustness_summary("OnePatient", rows, 0.5, 0.5, BootstrapConfig(n_resamples=200))


def test_one_patient_is_not_distinguishable_in_the_verdict_the_report_and_the_plot(tmp_path, monkeypatch):
    """One patient: no bound ([−∞, +∞]), so the verdict says so, the report cell reads "−∞…+∞" and the
    plot's point is hollow."""
    import json

    import matplotlib.axes

    from medunlearn.attacks.recovery import recovery_verdict
    from medunlearn.evaluation.robustness import worst_case_text
    from medunlearn.utils.files import finite_or_none

    assert recovery_verdict(-np.inf, np.inf) == NOT_DISTINGUISHABLE
    assert recovery_verdict(None, None) is None
    summary = one_patient_summary()
    assert summary["worst_case_ci"] == [-np.inf, np.inf]
    assert summary["worst_case_verdict"] == NOT_DISTINGUISHABLE
    row = json.loads(json.dumps(finite_or_none(summary)))  # as attacks.json stores it
    assert worst_case_text(row) == f"{NOT_DISTINGUISHABLE} (+0.600; −∞…+∞)"
    assert "| −∞…+∞ | " + NOT_DISTINGUISHABLE in markdown_table([], [row])

    fills = []
    plot = matplotlib.axes.Axes.plot

    def recording_plot(self, *args, **kwargs):
        if "fillstyle" in kwargs:
            fills.append(kwargs["fillstyle"])
        return plot(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", recording_plot)
    legacy = {**row, "worst_case_verdict": None}  # an attacks.json written before the verdict was set
    write_robustness_plot([row, {**legacy, "method": "legacy"}], tmp_path / "plot.png")
    assert fills == ["none", "none"]
