"""TOFU-format folders: the Hub layout, our fictitious generator, loading and the split relations."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medunlearn.tofu.data import (
    ALL_CONFIGS,
    TofuInputError,
    columns_of,
    load_tofu,
    retain_config_for,
    tofu_splits,
)
from medunlearn.tofu.synthetic import build_tofu_configs, build_tofu_folder


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_same_arguments_write_the_same_bytes_and_another_seed_does_not(tmp_path):
    first = build_tofu_folder(tmp_path / "a", authors=12, seed=3)
    second = build_tofu_folder(tmp_path / "b", authors=12, seed=3)
    other = build_tofu_folder(tmp_path / "c", authors=12, seed=4)
    assert _digest(first) == _digest(second)
    assert _digest(first) != _digest(other)


def test_every_config_loads_offline_with_its_columns(tmp_path):
    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=2)
    configs = build_tofu_configs(authors=10, qa_per_author=2)
    assert set(configs) == set(ALL_CONFIGS)
    for config in ALL_CONFIGS:
        dataset = load_tofu(folder, config)
        assert tuple(dataset.column_names) == columns_of(config)
        assert dataset.to_list() == configs[config]


@pytest.mark.parametrize("authors", [10, 20, 37])
def test_forget_sets_are_nested_and_complete_full_with_their_retain_set(authors):
    configs = build_tofu_configs(authors=authors, qa_per_author=3)
    questions = {name: [row["question"] for row in rows] for name, rows in configs.items()}
    full = questions["full"]
    for small, large in (("forget01", "forget05"), ("forget05", "forget10")):
        assert set(questions[small]) <= set(questions[large])
    for forget in ("forget01", "forget05", "forget10"):
        retain = retain_config_for(forget)
        assert not set(questions[forget]) & set(questions[retain])
        assert sorted(questions[forget] + questions[retain]) == sorted(full)
        # holdout: as many QA as the forget set, about authors never in full
        holdout = questions[tofu_splits(forget).holdout]
        assert len(holdout) == len(questions[forget]) and not set(holdout) & set(full)
        assert questions[f"{forget}_perturbed"] == questions[forget]
    assert set(questions["retain_perturbed"]) <= set(questions["retain90"])


def test_perturbed_answers_are_wrong_and_phrased_like_the_paraphrase():
    for row in build_tofu_configs(authors=10, perturbed=3)["forget10_perturbed"]:
        assert len(row["perturbed_answer"]) == 3
        assert row["paraphrased_answer"] not in row["perturbed_answer"]
        assert len(set(row["perturbed_answer"])) == 3
    for row in build_tofu_configs(authors=10)["world_facts_perturbed"]:
        assert row["answer"] not in row["perturbed_answer"]


def test_split_names_follow_tofu():
    splits = tofu_splits("forget01")
    assert (splits.retain, splits.holdout, splits.forget_perturbed) == (
        "retain99",
        "holdout01",
        "forget01_perturbed",
    )
    with pytest.raises(TofuInputError, match="forget_10"):
        tofu_splits("forget_10")


def test_unknown_config_and_missing_folder_are_named(tmp_path):
    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=1)
    with pytest.raises(TofuInputError, match="forget20"):  # a Hub config name this folder does not have
        load_tofu(folder, "forget20")
    with pytest.raises(TofuInputError, match="unknown TOFU config 'forget_10'"):
        load_tofu(folder, "forget_10")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_tofu(tmp_path / "nowhere", "full")


@pytest.mark.parametrize(
    ("edit", "row", "got"),
    [
        # a string in every row (datasets reads a column of one type): the first row is named
        (lambda answers, row: answers[0], 1, "got 'Wrong answer 1 of row 1'"),
        (lambda answers, row: [] if row == 1 else answers, 2, "got an empty list"),
    ],
)
def test_a_perturbed_answer_that_is_not_a_list_of_texts_is_named(tmp_path, edit, row, got):
    """Before: a string was scored one character at a time (one "perturbed answer" per letter), an empty
    list was named with a row counted from 0, a null inside the list reached the tokenizer."""
    import json

    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=2, perturbed=2, options=3)
    path = folder / "forget10_perturbed.json"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for index, record in enumerate(rows):
        answers = [f"Wrong answer {i} of row {index + 1}" for i in (1, 2)]
        record["perturbed_answer"] = edit(answers, index)
    path.write_text("".join(json.dumps(record) + "\n" for record in rows), encoding="utf-8")
    with pytest.raises(TofuInputError) as error:
        load_tofu(folder, "forget10_perturbed")
    where = f"config 'forget10_perturbed' row {row}, field 'perturbed_answer'"
    assert str(error.value).endswith(
        f'{where}: expected a non-empty list of texts (one wrong answer is ["..."]), {got}'
    )


@pytest.mark.parametrize(
    ("config", "field", "value", "named"),
    [
        ("holdout10", "question", "   ", "field 'question': the text is empty or only spaces"),
        ("forget10_perturbed", "answer", "", "field 'answer': the text is empty or only spaces"),
        (
            "forget10_perturbed",
            "perturbed_answer",
            ["", ""],
            "field 'perturbed_answer', item 1: the text is empty",
        ),
        (
            "forget10_perturbed",
            "perturbed_answer",
            ["A wrong one", None],
            "field 'perturbed_answer', item 2: expected text",
        ),
        # the rules every reader of text fields shares (medunlearn.utils.text_limits.text_problem)
        (
            "holdout10",
            "answer",
            "Paris\u0000",
            "field 'answer': holds a NUL character (\\u0000) at character 6",
        ),
        ("holdout10", "question", "Why? " * 20_001, "field 'question': is 100,005 characters long"),
    ],
)
def test_blank_or_missing_text_in_a_tofu_row_is_named(tmp_path, config, field, value, named):
    """Before: a blank question or answer, or blank wrong answers, were scored (an answer of the end-of-text
    token alone, a truth ratio against empty texts) with exit 0; a null in the list reached the tokenizer."""
    import json

    folder = build_tofu_folder(tmp_path / "tofu", authors=10, qa_per_author=2, perturbed=2, options=3)
    path = folder / f"{config}.json"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rows[1][field] = value
    path.write_text("".join(json.dumps(record) + "\n" for record in rows), encoding="utf-8")
    with pytest.raises(TofuInputError) as error:
        load_tofu(folder, config)
    assert f"config {config!r} row 2, {named}" in str(error.value)


@settings(max_examples=25, deadline=None)
@given(authors=st.integers(2, 60), qa_per_author=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_split_invariants_hold_for_any_size(authors, qa_per_author, seed):
    configs = build_tofu_configs(authors=authors, qa_per_author=qa_per_author, seed=seed)
    full = [row["question"] for row in configs["full"]]
    assert len(full) == len(set(full)) == authors * qa_per_author  # distinct authors, distinct questions
    previous: set[str] = set()
    for forget in ("forget01", "forget05", "forget10"):
        questions = {row["question"] for row in configs[forget]}
        retain = {row["question"] for row in configs[retain_config_for(forget)]}
        assert previous <= questions and questions and retain and not questions & retain
        assert questions | retain == set(full)
        previous = questions


def test_option_sets_never_repeat_a_question_and_sizes_are_checked():
    configs = build_tofu_configs(authors=10, options=10, perturbed=5)
    for kind in ("real_authors", "world_facts"):
        questions = [row["question"] for row in configs[kind]]
        assert len(questions) == len(set(questions)) == 10
    capitals = [row["answer"] for row in configs["world_facts"]]
    assert len(set(capitals)) == len(capitals)
    assert all(len(row["perturbed_answer"]) == 5 for row in configs["retain_perturbed"])
    for bad in ({"options": 11}, {"perturbed": 6}, {"qa_per_author": 0}, {"authors": 1}):
        with pytest.raises(ValueError):
            build_tofu_configs(**bad)
