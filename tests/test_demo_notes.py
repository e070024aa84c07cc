"""The demo's notes section (medunlearn.demo.notes): the sentence and table read an evaluation's
``notes_memorization`` section, checked on hand-made numbers; the settings cut the fictitious notes."""

from __future__ import annotations

from rich.console import Console

from medunlearn.demo.notes import notes_run_name, notes_sentence, notes_table
from medunlearn.demo.settings import FULL, QUICK


def _interval(estimate, low, high, n=4):
    return {"estimate": estimate, "low": low, "high": high, "n_clusters": n}


def _cell(n, after, before, change):
    return {
        "n": n,
        "verbmem": _interval(after, after - 0.1, after + 0.1, n),
        "verbmem_before": _interval(before, before - 0.1, before + 0.1, n),
        "verbmem_change": _interval(*change, n),
        "extraction_strength": _interval(0.2, 0.1, 0.3, n),
        "extraction_strength_before": _interval(0.5, 0.4, 0.6, n),
    }


def _section(forget_after=0.1):
    return {
        "config": {"prefix_words": 16, "continuation_words": 32, "max_new_tokens": 64, "min_k": 0.4},
        "populations": {
            "forget": _cell(4, forget_after, 0.6, (forget_after - 0.6, -0.7, -0.3)),
            "retain_same_disease": _cell(8, 0.5, 0.55, (-0.05, -0.12, 0.02)),
            "retain_out_of_disease": _cell(10, 0.45, 0.45, (0.0, -0.04, 0.04)),
        },
        "privleak": {
            "n_forget": 4,
            "n_holdout": 4,
            "auc": _interval(0.625, 0.25, 0.9, 8),
            "auc_before": _interval(0.875, 0.6, 1.0, 8),
            "auc_retain_model": None,
            "privleak": None,
            "reason": "privleak needs --retain-model (its AUC is the reference)",
        },
        "bootstrap": {"n_resamples": 2000, "level": 0.95, "seed": 0, "clusters": "patients (one note each)"},
    }


def test_sentence_reads_the_fall_of_the_forget_notes_beside_the_retained_patients():
    sentence = notes_sentence("GradDiff (notes) [disease_cancer_forget_10]", _section())
    assert "notes verbmem (ROUGE-L F1 of the greedy continuation) fell from 0.600 to 0.100" in sentence
    assert "(Δ -0.500 [-0.700, -0.300])" in sentence
    assert "retained same-disease Δ -0.050 [-0.120, +0.020]" in sentence
    assert "retained out-of-disease Δ +0.000 [-0.040, +0.040]" in sentence
    assert "notes Min-K% AUC 0.625 [0.250, 0.900] (4 forget vs 4 held-out notes" in sentence
    assert "before 0.875" in sentence and "95% patient-cluster bootstrap, 2000 resamples" in sentence
    assert "Caution" not in sentence  # 0.6 before: there was verbatim memory to forget


def test_sentence_says_when_the_forget_notes_did_not_fall_or_were_not_scored():
    assert "did not fall from 0.600 to 0.700" in notes_sentence("X", _section(forget_after=0.7))
    little = _section()
    little["populations"]["forget"]["verbmem_before"]["estimate"] = 0.02
    assert "Caution: before unlearning the model reproduced little of these notes" in notes_sentence(
        "X", little
    )
    empty = {"populations": {"forget": {"n": 0}}}
    assert notes_sentence("X", empty) == "X: no forget patient's note was scored before and after unlearning."


def test_table_has_one_row_per_note_population_with_before_and_change():
    console = Console(width=200, record=True)
    console.print(notes_table(notes_run_name("grad_diff", "disease_cancer_forget_10"), _section()))
    text = console.export_text()
    lines = [line for line in text.splitlines() if "GradDiff (notes) [disease_cancer_forget_10]" in line]
    assert len(lines) == 3
    assert (
        "forget" in lines[0]
        and "0.100" in lines[0]
        and "0.600" in lines[0]
        and "[-0.700, -0.300]" in lines[0]
    )
    assert "retained same-disease" in lines[1] and "-0.050" in lines[1]
    assert "retained out-of-disease" in lines[2] and "+0.000" in lines[2]
    assert len(text.splitlines()) <= 10  # short: the demo's whole output stays under its line budget


def test_the_demo_cuts_fit_the_fictitious_notes():
    for settings in (FULL, QUICK):
        config = settings.notes_memorization
        assert settings.notes_method is not None
        # The cohort's notes have 99 words at least (title and note): every note gets a full continuation.
        assert config.prefix_words + config.continuation_words <= 99
