import json

import pytest

from medunlearn.metrics.contextual_contradiction import (
    contextual_contradiction,
    parse_prediction,
    span_token_f1,
)


def record(
    conflict="contextual_contradiction",
    axes=("population",),
    confounder="population",
    reconciliation="the cohorts differ in age",
    evidence_a="drug a lowers mortality",
    evidence_b="drug a raises mortality",
):
    return {
        "conflict_type": conflict,
        "axes": list(axes),
        "dominant_confounder": confounder,
        "reconciliation": reconciliation,
        "evidence_a": evidence_a,
        "evidence_b": evidence_b,
    }


def test_hand_computed_class_scores():
    gold = [record(), record(), record("no_conflict", (), "none"), record("direct_contradiction", (), "none")]
    pred = [record(), record("no_conflict", (), "none"), record("no_conflict", (), "none"), record()]
    scores = contextual_contradiction(pred, gold)
    assert scores["accuracy"] == 0.5
    # contextual: TP 1, FP 1 (pair 4), FN 1 (pair 2) -> 2/4; no_conflict: TP 1, FP 1 -> 2/3; direct: 0
    assert scores["contextual_contradiction_f1"] == pytest.approx(0.5)
    assert scores["per_class_f1"] == pytest.approx(
        {"contextual_contradiction": 0.5, "no_conflict": 2 / 3, "direct_contradiction": 0.0}
    )
    assert scores["macro_f1"] == pytest.approx((0.5 + 2 / 3 + 0.0) / 3)


def test_hand_computed_axis_scores():
    gold = [
        record(axes=("population", "geography")),
        record(axes=("study_design",), confounder="study_design"),
    ]
    pred = [record(axes=("population", "time_period")), record(axes=(), confounder="none")]
    scores = contextual_contradiction(pred, gold)
    # cells: TP 1 (population), FP 1 (time_period), FN 2 (geography, study_design) -> 2/(2+1+2)
    assert scores["axis_micro_f1"] == pytest.approx(0.4)
    # per gold axis: population 1, geography 0, study_design 0 -> 1/3
    assert scores["axis_macro_f1"] == pytest.approx(1 / 3)
    assert scores["confounder_accuracy"] == 0.5


def test_unparseable_predictions_count_as_wrong_never_dropped():
    gold = [record(), record("no_conflict", (), "none", reconciliation="", evidence_a="", evidence_b="")]
    good = json.dumps({k: v for k, v in record().items() if not k.startswith("evidence")})
    scores = contextual_contradiction([good, "no conflict at all"], gold)
    assert scores["num_examples"] == 2 and scores["num_unparseable"] == 1
    assert scores["accuracy"] == 0.5
    assert scores["confounder_accuracy"] == 0.5  # "none" gold still not matched by an unparseable answer
    assert scores["evidence_exact_match"] == 0.0  # parsed answer gave no spans; unparseable one has none
    assert scores["per_class_f1"]["no_conflict"] == 0.0


def test_strict_parser():
    valid = {"conflict_type": "no_conflict", "axes": [], "dominant_confounder": "none", "reconciliation": "x"}
    assert parse_prediction(json.dumps(valid))["conflict_type"] == "no_conflict"
    assert parse_prediction("```json\n" + json.dumps(valid) + "\n```") is not None
    for bad in [
        json.dumps(valid) + " trailing",
        json.dumps(valid | {"conflict_type": "No conflict"}),
        json.dumps(valid | {"axes": "population"}),
        json.dumps(valid | {"axes": ["age"]}),
        json.dumps({k: v for k, v in valid.items() if k != "reconciliation"}),
        "[1, 2]",
        "",
    ]:
        assert parse_prediction(bad) is None, bad


def test_span_token_f1_by_hand():
    values = span_token_f1(["the drug lowers the risk", "", "a b"], ["drug lowers risk", "", "c"])
    # overlap 3 tokens of 5 + 3 -> 6/8; both empty -> 1; no overlap -> 0
    assert values.tolist() == pytest.approx([0.75, 1.0, 0.0])


def test_reconciliation_rouge_is_mean_rouge_l():
    gold = [record(reconciliation="the cohorts differ in age"), record(reconciliation="different assays")]
    pred = [record(reconciliation="the cohorts differ in age"), record(reconciliation="unrelated words")]
    assert contextual_contradiction(pred, gold)["reconciliation_rougeL"] == pytest.approx(0.5)


def test_bad_inputs_raise_with_names():
    with pytest.raises(ValueError, match=r"`references`\[0\].conflict_type 'maybe' is unknown; allowed:"):
        contextual_contradiction([record()], [record("maybe")])
    with pytest.raises(ValueError, match=r"`predictions`\[0\].axes has unknown 'age'"):
        contextual_contradiction([record(axes=("age",))], [record()])
    with pytest.raises(ValueError, match="`references` has 2 items but `predictions` has 1"):
        contextual_contradiction([record()], [record(), record()])


@pytest.mark.slow  # importing evaluate takes several seconds
def test_evaluate_module_matches_the_function():
    import medunlearn

    metric = medunlearn.load_metric("contextual_contradiction")
    gold = [record(), record("no_conflict", (), "none")]
    pred = [record(axes=("population", "geography")), record()]
    expected = contextual_contradiction(pred, gold)
    result = metric.compute(predictions=pred, references=gold)
    assert result.pop("per_class_f1") == pytest.approx(expected.pop("per_class_f1"))
    assert result == pytest.approx(expected)
    raw = [json.dumps(p) for p in pred[:1]] + ["garbage"]
    assert metric.compute(predictions=raw, references=gold)["num_unparseable"] == 1


def _records_strategy():
    from hypothesis import strategies as st

    from medunlearn.ontology.biodivergence import AXIS_IDS, CONFLICT_TYPE_IDS

    words = st.lists(
        st.sampled_from(["drug", "risk", "adults", "children", "lower", "higher"]), min_size=1, max_size=6
    )
    record_strategy = st.builds(
        lambda conflict, axes, text, span: {
            "conflict_type": conflict,
            "axes": sorted(axes),
            "dominant_confounder": sorted(axes)[0] if axes else "none",
            "reconciliation": " ".join(text),
            "evidence_a": " ".join(span),
            "evidence_b": " ".join(reversed(span)),
        },
        st.sampled_from(CONFLICT_TYPE_IDS),
        st.sets(st.sampled_from(AXIS_IDS), max_size=3),
        words,
        words,
    )
    return st.lists(record_strategy, min_size=1, max_size=12)


@pytest.mark.slow  # 15 hypothesis examples, each scoring three times (ROUGE + sklearn vectoriser)
def test_perfect_and_permuted_predictions():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=15, deadline=None)
    @given(_records_strategy(), st.randoms(use_true_random=False))
    def check(records, random):
        perfect = contextual_contradiction(records, records)
        assert perfect["accuracy"] == perfect["macro_f1"] == perfect["confounder_accuracy"] == 1.0
        assert perfect["reconciliation_rougeL"] == pytest.approx(1.0)
        assert perfect["evidence_f1"] == perfect["evidence_exact_match"] == 1.0
        has_axes = any(r["axes"] for r in records)
        assert perfect["axis_micro_f1"] == (1.0 if has_axes else 0.0)
        # scores do not depend on the order of the pairs
        shifted = records[1:] + records[:1]
        predictions = [dict(r, conflict_type="no_conflict") for r in shifted]
        order = list(range(len(records)))
        random.shuffle(order)
        once = contextual_contradiction(predictions, shifted)
        again = contextual_contradiction([predictions[i] for i in order], [shifted[i] for i in order])
        assert once.pop("per_class_f1") == pytest.approx(again.pop("per_class_f1"))
        assert once == pytest.approx(again)

    check()


def _without(key, **changes):
    return {k: v for k, v in record(**changes).items() if k != key}


BAD_INPUTS = [
    ("missing axes", [_without("axes")], [record()], r"`predictions`\[0\] has no `axes` \(required"),
    ("missing class", [record()], [_without("conflict_type")], r"`references`\[0\] has no `conflict_type`"),
    ("axes None", [dict(record(), axes=None)], [record()], r"`predictions`\[0\]\.axes is None"),
    ("axes None (gold)", [record()], [dict(record(), axes=None)], r"`references`\[0\]\.axes is None"),
    ("axes a string", [dict(record(), axes="population")], [record()], r"\.axes must be a list"),
    ("empty", [], [], r"`predictions` is empty: there is nothing to score"),
    ("reference a string", [record()], ["{}"], r"`references`\[0\] must be a dict"),
    ("span not a string", [dict(record(), evidence_a=3)], [record()], r"\.evidence_a must be a string"),
]


@pytest.mark.parametrize("predictions, references, message", [case[1:] for case in BAD_INPUTS])
def test_bad_input_gets_a_named_error(predictions, references, message):
    from medunlearn.errors import InputError
    from medunlearn.metrics.contextual_contradiction import ContradictionInputError

    with pytest.raises(ContradictionInputError, match=message) as caught:
        contextual_contradiction(predictions, references)
    assert isinstance(caught.value, InputError) and isinstance(caught.value, ValueError)


MIXED = [
    ([record(), "{}"], r"mixes raw strings \(e\.g\. \[1\]\) and dicts \(e\.g\. \[0\]\)"),
    (["{}", record()], r"mixes raw strings \(e\.g\. \[0\]\) and dicts \(e\.g\. \[1\]\)"),
]


def test_the_function_takes_records_mixed_with_strings():
    """A predictions file may hold both (evaluate_biodivergence); only the evaluate module needs one kind."""
    scores = contextual_contradiction([record(), "not JSON"], [record(), record()])
    assert scores["accuracy"] == 0.5 and scores["num_unparseable"] == 1


def test_optional_keys_may_be_left_out():
    """dominant_confounder, reconciliation and the spans are optional (the card says so): "none" / ""."""
    gold = [record()]
    short = [{"conflict_type": "contextual_contradiction", "axes": ["population"]}]
    scores = contextual_contradiction(short, gold)
    assert scores["accuracy"] == 1.0 and scores["confounder_accuracy"] == 0.0
    assert scores["reconciliation_rougeL"] == 0.0
    assert contextual_contradiction(gold, short)["confounder_accuracy"] == 0.0


@pytest.mark.slow  # importing evaluate takes several seconds
def test_evaluate_module_names_bad_input():
    """The module checks before evaluate infers features, so none of its internals (KeyError from encoding,
    IndexError on an empty list, AttributeError on a mix) reaches the caller."""
    import medunlearn
    from medunlearn.metrics.contextual_contradiction import ContradictionInputError

    metric = medunlearn.load_metric("contextual_contradiction")
    for _, predictions, references, message in BAD_INPUTS:
        with pytest.raises(ContradictionInputError, match=message):
            metric.compute(predictions=predictions, references=references)
    for predictions, message in MIXED:
        with pytest.raises(ContradictionInputError, match=message):
            metric.compute(predictions=predictions, references=[record(), record()])
    short = [_without("reconciliation"), _without("evidence_b")]
    result = metric.compute(predictions=short, references=[_without("dominant_confounder"), record()])
    assert result["num_examples"] == 2 and result["accuracy"] == 1.0
    assert metric.compute(predictions=[record()], references=[_without("reconciliation")])["accuracy"] == 1.0
