"""Populations: forget seen / holdout, and the same-disease / out-of-disease partition of retained
patients."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from medunlearn.data_loading import ConfigNameError
from medunlearn.evaluation.populations import (
    FORGET_HOLDOUT,
    FORGET_SEEN,
    RETAIN_OUT_OF_DISEASE,
    RETAIN_SAME_DISEASE,
    PopulationConfig,
    PopulationError,
    build_populations,
    retain_config_for,
    sample_patients,
)


def _configs(make_qa, forget, retain):
    forget_ids, forget_diseases = zip(*forget)
    retain_ids, retain_diseases = zip(*retain)
    return (
        {
            "train": make_qa(forget_ids, forget_diseases, "seen"),
            "holdout": make_qa(forget_ids, forget_diseases, "holdout"),
        },
        {
            "train": make_qa(retain_ids, retain_diseases, "seen"),
            "holdout": make_qa(retain_ids, retain_diseases, "holdout"),
        },
    )


def test_populations_partition_retained_patients_by_forget_diseases(make_qa):
    forget, retain = _configs(
        make_qa,
        [("f1", "cancer"), ("f2", "cancer")],
        [("r1", "cancer"), ("r2", "cardiovascular"), ("r3", "cancer"), ("r4", "infection_immune")],
    )
    notes = pd.DataFrame(
        {"patient_id": ["f1", "f2", "r1"], "disease_keywords": [["melanoma"], ["glioma"], ["x"]]}
    )
    examples = build_populations(forget, retain, notes, PopulationConfig(max_retain_patients=None))
    patients = examples.groupby("population")["patient_id"].apply(lambda s: sorted(set(s))).to_dict()
    assert patients == {
        FORGET_SEEN: ["f1", "f2"],
        FORGET_HOLDOUT: ["f1", "f2"],
        RETAIN_SAME_DISEASE: ["r1", "r3"],
        RETAIN_OUT_OF_DISEASE: ["r2", "r4"],
    }
    # Seen QA come from the train split, holdout QA from the holdout split; retained populations use seen QA
    # only.
    assert examples.loc[examples["population"] == FORGET_HOLDOUT, "qa_id"].str.contains("-holdout-").all()
    assert not examples.loc[examples["population"] != FORGET_HOLDOUT, "qa_id"].str.contains("-holdout-").any()
    # Keywords are attached to forget rows only (LS is a forget-set score).
    keywords = dict(zip(examples["example_id"], examples["disease_keywords"].map(list)))
    assert keywords[f"{FORGET_SEEN}/f1-seen-factual"] == ["melanoma"]
    assert keywords[f"{RETAIN_SAME_DISEASE}/r1-seen-factual"] == []
    assert examples["example_id"].is_unique
    assert (examples.groupby("population")["qa_type"].nunique() == 2).all()


# make_qa returns a pure function, so sharing it across generated examples is safe.
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    forget_diseases=st.lists(st.sampled_from("abcd"), min_size=1, max_size=4),
    retain_diseases=st.lists(st.sampled_from("abcdef"), min_size=1, max_size=12),
    cap=st.one_of(st.none(), st.integers(1, 5)),
)
def test_partition_is_exact_and_capped(make_qa, forget_diseases, retain_diseases, cap):
    forget_pairs = [(f"f{i}", d) for i, d in enumerate(forget_diseases)]
    retain_pairs = [(f"r{i}", d) for i, d in enumerate(retain_diseases)]
    forget, retain = _configs(make_qa, forget_pairs, retain_pairs)
    examples = build_populations(forget, retain, None, PopulationConfig(max_retain_patients=cap, seed=3))
    retain_disease = dict(retain_pairs)
    for population, expected_same in ((RETAIN_SAME_DISEASE, True), (RETAIN_OUT_OF_DISEASE, False)):
        patients = set(examples.loc[examples["population"] == population, "patient_id"])
        assert all((retain_disease[p] in set(forget_diseases)) == expected_same for p in patients)
        eligible = {p for p, d in retain_pairs if (d in set(forget_diseases)) == expected_same}
        assert len(patients) == (len(eligible) if cap is None else min(cap, len(eligible)))


def test_patient_sample_is_seeded_and_order_free():
    ids = [f"p{i}" for i in range(50)]
    first = sample_patients(ids, 10, seed=7)
    assert len(set(first)) == 10 and set(first) <= set(ids)
    assert first.tolist() == sample_patients(ids[::-1], 10, seed=7).tolist()
    assert first.tolist() != sample_patients(ids, 10, seed=8).tolist()


def test_retain_config_names():
    assert retain_config_for("forget_25") == "retain_75"
    assert retain_config_for("disease_infection_immune_forget_20") == "disease_infection_immune_retain_80"
    with pytest.raises(ConfigNameError, match="forget_X"):
        retain_config_for("retain_90")


def test_a_patient_in_both_forget_and_retain_is_refused(make_qa):
    forget, retain = _configs(make_qa, [("p1", "cancer")], [("p1", "cancer"), ("p2", "cancer")])
    with pytest.raises(PopulationError, match="patient p1 is in both"):
        build_populations(forget, retain)


def test_missing_column_is_named(make_qa):
    forget, retain = _configs(make_qa, [("p1", "cancer")], [("p2", "cancer")])
    forget["train"] = forget["train"].drop(columns=["qa_type"])
    with pytest.raises(PopulationError, match="forget config split 'train' lacks column.*qa_type"):
        build_populations(forget, retain)


def test_answer_variant_columns_are_kept(make_qa):
    forget, retain = _configs(make_qa, [("f1", "cancer")], [("r1", "cancer")])
    for config in (forget, retain):
        for split, frame in config.items():
            config[split] = frame.assign(
                paraphrased_answer="p", perturbed_answers=[["w1", "w2"]] * len(frame)
            )
    examples = build_populations(forget, retain)
    assert (examples["paraphrased_answer"] == "p").all()
    assert examples["perturbed_answers"].map(list).tolist() == [["w1", "w2"]] * len(examples)
