"""Property tests of every split invariant (docs/benchmarks/amnesia.md, "Splits") over random cohort sizes and
disease mixes."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from medunlearn.amnesia.splits import SplitConfig, build_splits, forget_size, retain_config_name
from medunlearn.ontology.amnesia import DISEASES

DISEASE_LEVEL = ("cancer", "infection_immune", "cardiovascular")


def make_tables(diseases: list[str], qa_per_type: int = 4, shuffle_seed: int | None = None):
    """Minimal notes and QA tables: only the columns the splits read."""
    ids = [f"P{i:05d}" for i in range(len(diseases))]
    notes = pa.table({"patient_id": ids, "disease": diseases})
    qa_rows = [
        (f"{pid}-{kind[0].upper()}{k}", pid, kind)
        for pid in ids
        for kind in ("factual", "reasoning")
        for k in range(1, qa_per_type + 1)
    ]
    if shuffle_seed is not None:
        order = np.random.default_rng(shuffle_seed).permutation(len(qa_rows))
        qa_rows = [qa_rows[i] for i in order]
    qa = pa.table(
        {
            "qa_id": [r[0] for r in qa_rows],
            "patient_id": [r[1] for r in qa_rows],
            "qa_type": [r[2] for r in qa_rows],
        }
    )
    return notes, qa


cohorts = st.lists(st.sampled_from(DISEASES[:5]), min_size=1, max_size=300)
seeds = st.integers(min_value=0, max_value=2**32 - 1)
hypothesis_settings = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@hypothesis_settings
@given(diseases=cohorts, seed=seeds)
def test_random_level_is_sized_nested_and_complemented(diseases, seed):
    notes, qa = make_tables(diseases)
    splits = build_splits(notes, qa, SplitConfig(seed=seed, disease_level=DISEASE_LEVEL))
    n = len(diseases)
    previous = np.zeros(n, dtype=bool)
    for percentage in (5, 10, 15, 20, 25):
        name = f"forget_{percentage}"
        if forget_size(percentage, n) == 0:
            assert name not in splits.forget_masks and name in splits.omitted
            continue
        mask = splits.forget_masks[name]
        assert mask.sum() == forget_size(percentage, n)
        assert not (previous & ~mask).any(), "forget sets must be nested"
        previous = mask
        assert retain_config_name(name) == f"retain_{100 - percentage}"


@hypothesis_settings
@given(diseases=cohorts, seed=seeds)
def test_disease_level_sets_have_both_properties_or_are_omitted(diseases, seed):
    notes, qa = make_tables(diseases)
    splits = build_splits(notes, qa, SplitConfig(seed=seed, disease_level=DISEASE_LEVEL))
    n = len(diseases)
    for disease in DISEASE_LEVEL:
        in_disease = splits.diseases == disease
        previous = np.zeros(n, dtype=bool)
        for percentage in (5, 10, 15, 20, 25):
            name = f"disease_{disease}_forget_{percentage}"
            size = forget_size(percentage, n)
            if size == 0 or size > in_disease.sum():
                assert name not in splits.forget_masks
                assert name in splits.omitted
                continue
            mask = splits.forget_masks[name]
            assert mask.sum() == size, "same patient count as the random split"
            assert not (mask & ~in_disease).any(), "only patients of the disease"
            assert not (previous & ~mask).any(), "nested within the disease"
            random_forget = splits.forget_masks[f"forget_{percentage}"]
            assert not (random_forget & in_disease & ~mask).any(), (
                "contains the disease's random forget patients"
            )
            previous = mask


@hypothesis_settings
@given(diseases=cohorts, seed=seeds, per_type=st.integers(1, 3))
def test_holdout_takes_per_type_qa_of_each_type_of_each_patient(diseases, seed, per_type):
    notes, qa = make_tables(diseases)
    splits = build_splits(notes, qa, SplitConfig(seed=seed, holdout_per_type=per_type))
    patient = np.asarray(qa["patient_id"].to_pylist())
    qa_type = np.asarray(qa["qa_type"].to_pylist())
    keys = np.char.add(patient, qa_type)
    _, holdout_counts = np.unique(keys[splits.is_holdout], return_counts=True)
    assert len(holdout_counts) == 2 * len(diseases) and (holdout_counts == per_type).all()


@hypothesis_settings
@given(diseases=cohorts, seed=seeds, shuffle=seeds)
def test_splits_depend_on_seed_and_records_not_on_row_order(diseases, seed, shuffle):
    notes, qa = make_tables(diseases)
    shuffled_notes, shuffled_qa = make_tables(diseases, shuffle_seed=shuffle)
    a = build_splits(notes, qa, SplitConfig(seed=seed))
    b = build_splits(
        shuffled_notes.take(np.random.default_rng(shuffle).permutation(len(diseases))),
        shuffled_qa,
        SplitConfig(seed=seed),
    )
    assert a.forget_masks.keys() == b.forget_masks.keys()
    for name in a.forget_masks:
        assert np.array_equal(a.patient_ids[a.forget_masks[name]], b.patient_ids[b.forget_masks[name]])
    holdout_a = set(np.asarray(qa["qa_id"].to_pylist())[a.is_holdout])
    holdout_b = set(np.asarray(shuffled_qa["qa_id"].to_pylist())[b.is_holdout])
    assert holdout_a == holdout_b


def test_paper_sizes_at_full_scale():
    """docs/benchmarks/amnesia.md, "Splits": 8,820 patients → 441 / 882 / 1,323 / 1,764 / 2,205;
    cardiovascular stops at 15%, infection at 20%."""
    diseases = (
        ["cancer"] * 2672 + ["infection_immune"] * 1967 + ["cardiovascular"] * 1429 + ["respiratory"] * 2752
    )
    notes, qa = make_tables(diseases, qa_per_type=1 + 1)
    splits = build_splits(notes, qa, SplitConfig(seed=0, disease_level=DISEASE_LEVEL))
    assert [int(splits.forget_masks[f"forget_{p}"].sum()) for p in (5, 10, 15, 20, 25)] == [
        441,
        882,
        1323,
        1764,
        2205,
    ]
    present = {
        d: [p for p in (5, 10, 15, 20, 25) if f"disease_{d}_forget_{p}" in splits.forget_masks]
        for d in DISEASE_LEVEL
    }
    assert present == {
        "cancer": [5, 10, 15, 20, 25],
        "infection_immune": [5, 10, 15, 20],
        "cardiovascular": [5, 10, 15],
    }


@pytest.mark.parametrize(
    "name, expected", [("forget_10", "retain_90"), ("disease_cancer_forget_5", "disease_cancer_retain_95")]
)
def test_retain_config_name(name, expected):
    assert retain_config_name(name) == expected
