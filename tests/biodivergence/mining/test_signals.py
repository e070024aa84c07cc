"""Divergence signals on hand-written claim pairs (medunlearn.biodivergence.mining.signals)."""

from __future__ import annotations

import doctest

import pytest

from medunlearn.biodivergence.mining import signals as signals_module
from medunlearn.biodivergence.mining.signals import CONTEXT_FAMILIES, SignalWeights, divergence_signals
from medunlearn.errors import InputError


def one(text_a: str, text_b: str, **kwargs) -> dict:
    return divergence_signals([text_a], [text_b], **kwargs).iloc[0].to_dict()


def test_doctests():
    assert doctest.testmod(signals_module).failed == 0


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        ("Statins increased survival after stroke.", "Statins decreased survival after stroke."),
        (
            "Smoking was associated with increased risk of asthma.",
            "Smoking was associated with a reduced risk of asthma.",
        ),
        ("Aspirin improved outcomes in sepsis.", "Aspirin worsened outcomes in sepsis."),
        (
            "Obesity was associated with sepsis mortality.",
            "Obesity was not associated with sepsis mortality.",
        ),
        ("Vitamin D was effective against fractures.", "Vitamin D was ineffective against fractures."),
    ],
)
def test_polarity_reversal_detected(text_a, text_b):
    assert one(text_a, text_b)["polarity_reversal"] == 1
    assert one(text_b, text_a)["polarity_reversal"] == 1  # symmetric


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        ("Statins increased survival after stroke.", "Statins improved survival after stroke in women."),
        ("Statins reduced mortality.", "Statins lowered mortality."),
        ("Statins were studied in stroke.", "Statins decreased mortality after stroke."),  # no direction
    ],
)
def test_no_polarity_reversal(text_a, text_b):
    assert one(text_a, text_b)["polarity_reversal"] == 0


def test_negation_mismatch():
    assert one("Metformin reduced HbA1c.", "Metformin did not reduce HbA1c.")["negation_mismatch"] == 1
    assert one("No resistance was found.", "Resistance was found in all isolates.")["negation_mismatch"] == 1
    assert one("The drug failed to lower pressure.", "The drug lowered pressure.")["negation_mismatch"] == 1
    # both negated, or neither: no mismatch
    assert one("X did not help.", "There was no benefit of X.")["negation_mismatch"] == 0
    assert one("X helped.", "X helped a lot.")["negation_mismatch"] == 0
    # a pseudo-negation is not a negator
    assert (
        one("X not only lowered pressure but also weight.", "X lowered pressure.")["negation_mismatch"] == 0
    )


def test_identical_texts_give_zeros():
    texts = [
        "Ciprofloxacin resistance in Escherichia coli increased in children in China between 2001 and 2010.",
        "BRCA1 carriers did not benefit from 20 mg/kg of olaparib in a randomized trial using PCR.",
        "Same.",
    ]
    frame = divergence_signals(texts, texts)
    for column in ("polarity_reversal", "negation_mismatch", "entity_mismatch", "context_cues"):
        assert frame[column].tolist() == [0, 0, 0]
    assert frame["divergence_score"].tolist() == [0.0, 0.0, 0.0]
    assert frame["context_families"].tolist() == ["", "", ""]


def test_entity_mismatch_is_jaccard_distance():
    # {imatinib} vs {imatinib, erlotinib}: 1 - 1/2
    assert one("Imatinib improved outcomes.", "Imatinib and erlotinib improved outcomes.")[
        "entity_mismatch"
    ] == pytest.approx(0.5)
    # genes and vocabulary diseases: {brca1, cancer} vs {tp53, cancer}: 1 - 1/3
    assert one("BRCA1 variants raise cancer risk.", "TP53 variants raise cancer risk.")[
        "entity_mismatch"
    ] == pytest.approx(2 / 3)
    # statistical abbreviations are not entities; no entity on either side gives 0
    assert one("The OR was 2.1 (95% CI 1.2-3.3).", "The HR was 0.8.")["entity_mismatch"] == 0.0


def test_context_cues_count_families():
    text_a = "Drug A reduced pain in children in China in a randomized trial of 10 mg/kg by PCR in 2005."
    text_b = "Drug A reduced pain in adults in Brazil in a cohort study of 20 mg/kg by culture in 2015."
    result = one(text_a, text_b)
    assert result["context_cues"] == len(CONTEXT_FAMILIES) == 6
    assert result["context_families"] == "population,geography,period,dose,assay,design"
    same_context = one("Drug A helped children in China.", "Drug B hurt children in China.")
    assert same_context["context_cues"] == 0
    assert one("Drug A helped children.", "Drug A helped.")["context_families"] == "population"


def test_score_formula_against_hand_computation():
    text_a = "Imatinib improved survival in children."
    text_b = "Imatinib and erlotinib did not improve survival in adults."
    # polarity 1, negation 1, entities {imatinib} vs {imatinib, erlotinib} -> 0.5, one family (population)
    default = one(text_a, text_b)
    assert (default["polarity_reversal"], default["negation_mismatch"], default["context_cues"]) == (1, 1, 1)
    assert default["entity_mismatch"] == pytest.approx(0.5)
    assert default["divergence_score"] == pytest.approx(0.40 * 1 + 0.20 * 1 + 0.15 * 0.5 + 0.25 * 1 / 6)
    weights = SignalWeights(
        polarity_reversal=1.0, negation_mismatch=2.0, entity_mismatch=3.0, context_cues=4.0
    )
    custom = one(text_a, text_b, weights=weights)
    assert custom["divergence_score"] == pytest.approx(1.0 + 2.0 + 3.0 * 0.5 + 4.0 * 1 / 6)


def test_default_weights_sum_to_one():
    weights = SignalWeights()
    total = (
        weights.polarity_reversal + weights.negation_mismatch + weights.entity_mismatch + weights.context_cues
    )
    assert total == pytest.approx(1.0)


def test_vectorised_over_many_pairs_and_repeated_texts():
    text_a = ["X increased Y.", "X did not increase Y.", "X increased Y."] * 50
    text_b = ["X decreased Y.", "X increased Y.", "X increased Y."] * 50
    frame = divergence_signals(text_a, text_b)
    assert len(frame) == 150
    assert frame["polarity_reversal"].tolist() == [1, 1, 0] * 50
    assert frame["negation_mismatch"].tolist() == [0, 1, 0] * 50


def test_empty_and_bad_input():
    empty = divergence_signals([], [])
    assert len(empty) == 0 and "divergence_score" in empty.columns
    with pytest.raises(InputError, match="text_a has 2 texts, text_b 1"):
        divergence_signals(["a", "b"], ["c"])
    with pytest.raises(InputError, match=r"text_b\[1\] is NoneType"):
        divergence_signals(["a", "b"], ["c", None])


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        # a negated decrease is no effect, not a decrease: the old rule read both as "down"
        ("Metformin reduced HbA1c.", "Metformin did not reduce HbA1c."),
        ("Statins reduced mortality.", "No significant difference in mortality was found (p = 0.41)."),
        ("Smoking was associated with asthma.", "Asthma rates were similar in smokers and non-smokers."),
    ],
)
def test_an_effect_against_no_effect_is_a_reversal(text_a, text_b):
    assert one(text_a, text_b)["polarity_reversal"] == 1
    assert one(text_b, text_a)["polarity_reversal"] == 1


def test_stances_read_a_denial_to_the_end_of_its_clause():
    from medunlearn.biodivergence.mining.signals import claim_stances

    texts = [
        "Infection was not associated with increased mortality or decreased survival.",
        "X did not differ between groups (P>0.05).",
        "X reduced pain, but it did not change mobility.",
        "The gene maps to chromosome 5.",
    ]
    assert claim_stances(texts).tolist() == ["null", "null", "mixed", "none"]
    # two denials agree: no reversal
    assert one(texts[0], texts[1])["polarity_reversal"] == 0


def test_shared_entities_count_the_entities_both_claims_name():
    frame = one("Imatinib improved survival in CML.", "Imatinib and erlotinib did not improve survival.")
    assert frame["shared_entities"] == 1 and frame["stance_a"] == "up" and frame["stance_b"] == "null"
    assert one("The mutation maps here.", "The gene maps there.")["shared_entities"] == 0


def test_pathogen_list_is_built_once_per_process():
    """The entity signal looks every unmatched word up in the pathogen list (about 24 look-ups a claim):
    rebuilding the frozenset on each look-up was 55% of the signals' time (bench/bench_limits.py,
    docs/scaling.md). One set per process, and the same set as the data file's."""
    from medunlearn.ontology import conventions

    assert conventions.organisms() is conventions.organisms()
    assert conventions.organisms() == frozenset(str(n) for n in conventions._infection_data()["organisms"])
