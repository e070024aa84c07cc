"""Probing attacks: template and LLM paraphrases, paraphrased examples through the runner, the hidden-state
probe."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medunlearn.attacks.probing import (
    PARAPHRASE_PREFIX,
    Paraphrases,
    content_words,
    hidden_state_features,
    hidden_state_probe,
    llm_paraphrases,
    paraphrased_examples,
    probe_accuracy,
    template_paraphrases,
)
from medunlearn.errors import InputError, MedunlearnError
from medunlearn.llm import BackendIdentity, BulkChat, RetryPolicy
from medunlearn.llm.retry import BackendCallError, Completion, resolve_batch, transport_failure

_WORD = re.compile(r"[\w]+(?:[-'./][\w]+)*")


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


@pytest.fixture(scope="module")
def cohort_questions() -> list[str]:
    from medunlearn.amnesia.sources.synthetic import generate_cohort

    return generate_cohort(patients=6, seed=0)[1].to_pandas()["question"].tolist()


OTHER_QUESTIONS = [
    "What was the patient's troponin level on admission?",
    "Which artery was occluded?",
    "How was the patient treated?",
    "What did the CT of the patient show?",
    "Why was a stent placed?",
    "Biopsy?",
]


def test_template_paraphrases_are_deterministic_new_and_keep_the_patients_content_words(cohort_questions):
    questions = cohort_questions + OTHER_QUESTIONS
    for seed in (0, 1, 7):
        paraphrases = template_paraphrases(questions, seed=seed)
        assert paraphrases == template_paraphrases(questions, seed=seed)
        assert len(paraphrases) == len(questions)
        for question, paraphrase in zip(questions, paraphrases):
            assert paraphrase.strip().lower() != question.strip().lower()
            # The descriptor that identifies the patient (age, sex, occupation, symptom, duration) and the
            # fact asked about survive every rewrite.
            assert content_words(question) <= words(paraphrase), (question, paraphrase)
    # A question gets the same paraphrase wherever it stands in the list.
    assert template_paraphrases(questions[::-1], seed=3)[::-1] == template_paraphrases(questions, seed=3)
    # The seed chooses among the rewrites.
    assert template_paraphrases(questions, seed=0) != template_paraphrases(questions, seed=1)


def test_cohort_descriptor_is_kept_verbatim(cohort_questions):
    descriptor = re.compile(
        r"the (\d+-year-old (?:male|female) [a-z ]+?) who presented with ([a-z ,'-]+?) for"
    )
    for question, paraphrase in zip(cohort_questions, template_paraphrases(cohort_questions)):
        person, symptom = descriptor.search(question).groups()
        assert person in paraphrase and symptom in paraphrase


def test_each_documented_template_is_used(cohort_questions):
    paraphrases = [p for seed in range(4) for p in template_paraphrases(cohort_questions, seed)]
    assert any(p.startswith("Regarding the ") for p in paraphrases)  # the patient descriptor moved first
    assert any(p.startswith("Could you tell me ") for p in paraphrases)  # indirect form
    assert any(re.match(r"What was the diagnosis, considering ", p) for p in paraphrases)  # clause reordered
    assert any(" came in with " in p for p in paraphrases)  # synonym swap
    assert template_paraphrases(["Considering the troponin of the patient, what was the diagnosis?"], 0) in (
        ["What was the diagnosis, considering the troponin of the patient?"],
        ["Regarding the patient, considering the troponin, what was the diagnosis?"],
    )


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["What was", "How was", "Which test showed", "What did", "Why was", "Considering"]),
    st.lists(
        st.sampled_from(["troponin", "stent", "biopsy", "lymphoma", "ECG", "fever", "cough"]), min_size=1
    ),
    st.sampled_from(["", " of the 37-year-old woman", " of the patient", ", what was the result"]),
)
def test_any_question_gets_a_new_paraphrase_with_its_content_words(opening, body, tail):
    question = f"{opening} the {' '.join(body)}{tail}?"
    (paraphrase,) = template_paraphrases([question], seed=0)
    assert paraphrase.lower() != question.lower()
    assert content_words(question) <= words(paraphrase)


def test_template_paraphrases_reject_bad_input():
    with pytest.raises(InputError, match="empty question"):
        template_paraphrases(["What?", "  "])
    with pytest.raises(InputError, match="not one string"):
        template_paraphrases("What was the troponin level?")


class FakeParaphraser:
    """A :mod:`medunlearn.llm` backend: rewrites questions, except those it is scripted to fail on."""

    identity = BackendIdentity("fake", "paraphraser")

    def __init__(self):
        self.calls = 0

    def check_ready(self) -> None:
        pass

    @staticmethod
    def question_of(request) -> str:
        return request.messages[-1]["content"].split("Question: ", 1)[1].split("\n", 1)[0]

    def run(self, requests, todo, policy, on_results) -> None:
        def generate(batch, sampling):
            out = []
            for request in batch:
                self.calls += 1
                question = self.question_of(request)
                if "unchanged" in question:
                    text = json.dumps({"paraphrase": question.upper()})  # same words: unchanged
                elif "broken" in question:
                    text = '{"paraphrase": '  # never valid JSON: fails after every attempt
                elif "empty" in question:
                    text = json.dumps({"wrong_key": "x"})
                else:
                    text = json.dumps({"paraphrase": f"Tell me, {question[0].lower()}{question[1:]}"})
                out.append(Completion(text=text, finish_reason="stop"))
            return out

        for index in todo:
            question = self.question_of(requests[index])
            if "lost" in question:  # the server never answers this one
                failure = BackendCallError("fake server: connection reset")
                result = transport_failure([], failure, requests[index].seed, requests[index].temperature)
            else:
                result = resolve_batch([requests[index]], generate, policy)[0]
            on_results([(index, result)])


def test_llm_paraphrases_fall_back_to_templates_and_count_it():
    questions = [
        "What was the troponin level of the 54-year-old welder?",
        "Which artery was occluded (unchanged)?",
        "What did the broken ECG show?",
        "Why was the lost stent placed?",
        "What was the empty biopsy result?",
        "How was the fever treated?",
    ]
    backend = FakeParaphraser()
    with BulkChat(backend, cache=None, policy=RetryPolicy(max_attempts=2), show_progress=False) as chat:
        paraphrases = llm_paraphrases(questions, chat, seed=0)
    assert isinstance(paraphrases, Paraphrases) and isinstance(paraphrases, list)
    templates = template_paraphrases(questions, seed=0)
    assert paraphrases.sources == ["llm", "template", "template", "template", "template", "llm"]
    assert paraphrases.fallbacks == 4
    assert sorted(paraphrases.fallback_reasons) == [1, 2, 3, 4]
    assert "unchanged" in paraphrases.fallback_reasons[1]
    assert "connection reset" in paraphrases.fallback_reasons[3]
    assert "no valid answer after 2 attempt(s)" in paraphrases.fallback_reasons[2]
    for index in (1, 2, 3, 4):
        assert paraphrases[index] == templates[index]
    assert paraphrases[0] == "Tell me, what was the troponin level of the 54-year-old welder?"
    assert all(p.lower() != q.lower() for p, q in zip(paraphrases, questions))
    # One request per question, its schema asked for; the invalid answers were retried once.
    assert backend.calls == 5 + 2


def test_llm_paraphrases_requests_carry_the_schema_and_seed():
    from medunlearn.attacks.probing import PARAPHRASE_SCHEMA, paraphrase_requests

    (request,) = paraphrase_requests(["What was the troponin level?"], seed=5)
    assert request.json_schema == PARAPHRASE_SCHEMA and request.seed == 5 and request.temperature == 0.0
    assert "What was the troponin level?" in request.messages[-1]["content"]


QA = [
    ("What was the troponin level of the 54-year-old man?", "The troponin I level was 2.4 ng/mL."),
    ("Which artery was occluded?", "The right coronary artery."),
    ("What grew in the sputum culture of the 37-year-old woman?", "Streptococcus pneumoniae."),
    ("What did the biopsy of the breast mass show?", "Invasive ductal carcinoma."),
    ("How was the 54-year-old man treated?", "A stent was placed."),
]


def examples_table(population: str, n: int = len(QA)) -> pd.DataFrame:
    """Rows shaped like ``build_populations``' examples table."""
    return pd.DataFrame(
        {
            "example_id": [f"{population}/q{i}" for i in range(n)],
            "population": population,
            "qa_id": [f"q{i}" for i in range(n)],
            "patient_id": [f"p{i // 2}" for i in range(n)],
            "disease": "cardiovascular",
            "qa_type": ["factual" if i % 2 == 0 else "reasoning" for i in range(n)],
            "question": [q for q, _ in QA[:n]],
            "answer": [a for _, a in QA[:n]],
            "disease_keywords": [["stent"] for _ in range(n)],
        }
    )


@pytest.fixture()
def examples():
    frames = [
        examples_table("forget_seen"),
        examples_table("forget_holdout", 2),
        examples_table("retain_same_disease", 2),
    ]
    return pd.concat(frames, ignore_index=True)


def test_paraphrased_examples_replace_the_forget_seen_questions(examples):
    seen = examples[examples["population"] == "forget_seen"].reset_index(drop=True)
    paraphrases = template_paraphrases(seen["question"])
    table = paraphrased_examples(examples, paraphrases)
    assert list(table.columns) == [*examples.columns, "original_example_id", "original_question"]
    assert (table["population"] == "forget_seen").all() and len(table) == len(seen)
    assert table["question"].tolist() == paraphrases
    assert table["example_id"].tolist() == [PARAPHRASE_PREFIX + e for e in seen["example_id"]]
    assert table["original_example_id"].tolist() == seen["example_id"].tolist()
    assert table["original_question"].tolist() == seen["question"].tolist()
    for column in ("answer", "qa_id", "patient_id", "qa_type", "disease"):
        assert table[column].tolist() == seen[column].tolist()
    # A mapping by example id gives the same table.
    by_id = dict(zip(seen["example_id"], paraphrases))
    pd.testing.assert_frame_equal(paraphrased_examples(examples, by_id), table)


def test_paraphrased_examples_name_what_is_wrong(examples):
    with pytest.raises(InputError, match="2 paraphrase"):
        paraphrased_examples(examples, ["a?", "b?"])
    seen_ids = examples.loc[examples["population"] == "forget_seen", "example_id"].tolist()
    with pytest.raises(InputError, match=re.escape(repr(seen_ids[1]))):
        paraphrased_examples(examples, {seen_ids[0]: "a?"})
    with pytest.raises(MedunlearnError, match="is empty"):
        paraphrased_examples(examples, ["a?"] + [" "] * (len(seen_ids) - 1))
    with pytest.raises(InputError, match="no forget_seen"):
        paraphrased_examples(examples[examples["population"] != "forget_seen"], [])


def test_paraphrased_examples_are_scored_by_the_runner_like_normal_qa(
    tiny_model, tiny_tokenizer, examples, tmp_path
):
    from medunlearn.evaluation.runner import RunnerConfig, read_outputs, run_model
    from medunlearn.evaluation.scoring import per_example_metrics, summarise

    seen = examples[examples["population"] == "forget_seen"].reset_index(drop=True)
    table = paraphrased_examples(examples, template_paraphrases(seen["question"]))
    config = RunnerConfig(batch_size=8, max_new_tokens=3, progress=False)
    run_model(tiny_model, tiny_tokenizer, table, tmp_path / "model", config)
    outputs = read_outputs(tmp_path / "model", table["example_id"])
    metrics = per_example_metrics(table, outputs)
    assert metrics["example_id"].str.startswith(PARAPHRASE_PREFIX).all()
    assert np.isfinite(metrics["loss"]).all() and np.isfinite(metrics["mia_min_k_plus_plus"]).all()
    summary = summarise(metrics)
    assert summary["populations"]["forget_seen"]["all"]["n"] == len(seen)
    assert "answer_forgetting" in summary["populations"]["forget_seen"]["all"]


CARDIO = "chest pain troponin electrocardiogram coronary artery stent occlusion".split()
INFECTION = "fever cough sputum culture pneumoniae amoxicillin consolidation".split()


def probe_texts(patients: int = 24, per_patient: int = 3, seed: int = 0):
    """Texts whose words give away their patient's category; three texts per patient."""
    rng = np.random.default_rng(seed)
    texts, labels, groups = [], [], []
    for patient in range(patients):
        vocabulary = CARDIO if patient % 2 == 0 else INFECTION
        for _ in range(per_patient):
            filler = rng.choice(["the", "was", "a", "and", "with"], size=int(rng.integers(1, 5)))
            texts.append(" ".join([*rng.choice(vocabulary, size=6), *filler]))
            labels.append("cardiovascular" if patient % 2 == 0 else "infection")
            groups.append(f"P{patient:03d}")
    return texts, labels, groups


def assert_groups_not_split(result, groups):
    groups = np.asarray(groups)
    tested = np.concatenate([np.asarray(t) for t in result["fold_test_indices"]])
    assert sorted(tested.tolist()) == list(range(len(groups)))  # every row tested once
    for test in result["fold_test_indices"]:
        train = np.setdiff1d(np.arange(len(groups)), test)
        assert not set(groups[test]) & set(groups[train])


def test_probe_reads_a_planted_category_and_not_random_labels(tiny_model, tiny_tokenizer, one_torch_thread):
    texts, labels, groups = probe_texts()
    separable = hidden_state_probe(tiny_model, tiny_tokenizer, texts, labels, seed=0, folds=4, groups=groups)
    assert separable["chance"] == 0.5 and separable["folds"] == 4 and separable["n"] == len(texts)
    assert separable["accuracy"] >= 0.9 and separable["above_chance"] >= 0.4
    assert separable["above_chance"] == pytest.approx(separable["accuracy"] - separable["chance"])
    assert len(separable["fold_accuracy"]) == 4
    assert_groups_not_split(separable, groups)

    # Labels drawn at random per patient, unrelated to the texts: the probe is near chance.
    rng = np.random.default_rng(1)
    random_of_patient = {g: str(rng.integers(2)) for g in sorted(set(groups))}
    random_labels = [random_of_patient[g] for g in groups]
    unseparable = hidden_state_probe(
        tiny_model, tiny_tokenizer, texts, random_labels, seed=0, folds=4, groups=groups
    )
    assert unseparable["above_chance"] < 0.15
    assert separable["above_chance"] - unseparable["above_chance"] > 0.3
    assert_groups_not_split(unseparable, groups)
    # Deterministic per seed.
    again = hidden_state_probe(tiny_model, tiny_tokenizer, texts, labels, seed=0, folds=4, groups=groups)
    assert again["fold_accuracy"] == separable["fold_accuracy"]


def test_pooling_ignores_padding(tiny_model, tiny_tokenizer):
    texts = ["chest pain", "fever and productive cough with right lower lobe consolidation for two days"]
    together = hidden_state_features(tiny_model, tiny_tokenizer, texts, batch_size=2)
    alone = np.concatenate(
        [hidden_state_features(tiny_model, tiny_tokenizer, [t], batch_size=1) for t in texts]
    )
    np.testing.assert_allclose(together, alone, atol=1e-5)
    embeddings = hidden_state_features(tiny_model, tiny_tokenizer, texts, layer=0)
    assert embeddings.shape == together.shape and not np.allclose(embeddings, together)
    assert tiny_model.training  # the model's mode is restored


def test_probe_without_groups_is_stratified_and_names_bad_input():
    rng = np.random.default_rng(0)
    labels = np.array(["a"] * 30 + ["b"] * 10)
    features = rng.normal(size=(40, 3)) + (labels == "a")[:, None] * 4.0
    result = probe_accuracy(features, labels, seed=0, folds=5)
    assert result["chance"] == 0.75 and result["accuracy"] == 1.0
    for test in result["fold_test_indices"]:
        assert (labels[test] == "b").sum() == 2  # stratified: each fold holds its share of the rare class
    with pytest.raises(InputError, match="two classes"):
        probe_accuracy(features, ["a"] * 40)
    with pytest.raises(InputError, match="at least 2 groups"):
        probe_accuracy(features, labels, groups=["g1"] * 30 + ["g2"] * 10)
    with pytest.raises(InputError, match="group"):
        probe_accuracy(features, labels, groups=["g1"] * 3)


def test_probe_rejects_a_layer_the_model_does_not_have(tiny_model, tiny_tokenizer):
    with pytest.raises(InputError, match="out of range"):
        hidden_state_features(tiny_model, tiny_tokenizer, ["chest pain"], layer=7)


def test_probe_inputs_are_the_forget_patients_questions(examples, tiny_tokenizer):
    from medunlearn.attacks.probing import probe_inputs
    from medunlearn.chat import render_prompts

    texts, labels, groups = probe_inputs(examples)
    forget = examples[examples["population"].isin(["forget_seen", "forget_holdout"])]
    assert texts == forget["question"].tolist()
    assert labels == forget["disease"].tolist() and groups == forget["patient_id"].tolist()
    rendered, _, _ = probe_inputs(examples, tokenizer=tiny_tokenizer)
    assert rendered == render_prompts(tiny_tokenizer, forget["question"].tolist())
    # ``populations=None``: the rows given, already selected.
    assert probe_inputs(forget, populations=None) == (texts, labels, groups)
    with pytest.raises(InputError, match="no rows"):
        probe_inputs(forget.iloc[:0], populations=None)
    with pytest.raises(InputError, match="no rows"):
        probe_inputs(examples, populations=["retain_out_of_disease"])


MARKER = "zyxwvmarker"  # a word no question holds: it is in every answer


def two_disease_examples() -> pd.DataFrame:
    """Forget patients of two diseases (four each: two seen QA and one holdout QA) and retained patients;
    every answer names its disease and holds :data:`MARKER`."""
    rows = []
    for population, patients in (("forget_seen", 8), ("forget_holdout", 8), ("retain_same_disease", 4)):
        for patient in range(patients):
            disease = "cardiovascular" if patient % 2 == 0 else "infection"
            for qa in range(2 if population == "forget_seen" else 1):
                rows.append(
                    {
                        "example_id": f"{population}/p{patient}/q{qa}",
                        "population": population,
                        "qa_id": f"p{patient}/q{qa}",
                        "patient_id": f"{'R' if population.startswith('retain') else 'F'}{patient}",
                        "disease": disease,
                        "question": f"What did test {qa} of patient {patient} in {population} show?",
                        "answer": f"{disease} {MARKER} confirmed",
                    }
                )
    return pd.DataFrame(rows)


def test_attack_probe_texts_are_the_questions_and_never_the_answers(tiny_tokenizer):
    from medunlearn.attacks.hidden_probe import probe_texts
    from medunlearn.chat import render_prompts

    examples = two_disease_examples()
    forget = examples[examples["population"].isin(["forget_seen", "forget_holdout"])]
    for tokenizer in (None, tiny_tokenizer):
        texts, labels, groups, scope = probe_texts(examples, tokenizer)
        assert scope == "forget patients" and len(texts) == len(forget)
        assert all(MARKER not in text for text in texts)
        assert all("cardiovascular" not in text and "infection" not in text for text in texts)
        for text, question in zip(texts, forget["question"]):
            assert question in text
        assert labels == forget["disease"].tolist() and groups == forget["patient_id"].tolist()
        assert len(set(groups)) == 8  # seen and holdout QA of one patient share its group
    rendered, _, _, _ = probe_texts(examples, tiny_tokenizer)
    assert rendered == render_prompts(tiny_tokenizer, forget["question"].tolist())

    # One forget disease (a disease-level forget set): the retained patients are added, still questions only.
    one_disease = examples[
        examples["population"].eq("retain_same_disease") | examples["disease"].eq("cardiovascular")
    ]
    texts, labels, _, scope = probe_texts(one_disease, tiny_tokenizer)
    assert scope == "forget and retained patients" and set(labels) == {"cardiovascular", "infection"}
    assert len(texts) == len(one_disease) and all(MARKER not in text for text in texts)


def recording_probe_section(monkeypatch, tiny_model, tiny_tokenizer):
    """``probe_section`` with every model load returning the tiny model; returns the calls of the probe."""
    from medunlearn import models
    from medunlearn.attacks import hidden_probe

    calls = []
    real_probe = hidden_probe.hidden_state_probe

    def recording_probe(model, tokenizer, texts, labels, **kwargs):
        calls.append((list(texts), kwargs))
        return real_probe(model, tokenizer, texts, labels, **kwargs)

    monkeypatch.setattr(models, "load_model", lambda path, **kwargs: (tiny_model, tiny_tokenizer))
    monkeypatch.setattr(hidden_probe, "hidden_state_probe", recording_probe)
    return calls


def test_attack_probe_section_probes_chat_prompts_without_added_special_tokens(
    tiny_model, tiny_tokenizer, monkeypatch, one_torch_thread
):
    from medunlearn.attacks.hidden_probe import PROBE_INPUTS, probe_section
    from medunlearn.chat import render_prompts

    calls = recording_probe_section(monkeypatch, tiny_model, tiny_tokenizer)
    examples = two_disease_examples()
    cache: dict = {}
    section = probe_section("unlearned", "before", examples, 0, cache)
    forget = examples[examples["population"].isin(["forget_seen", "forget_holdout"])]
    assert section["inputs"] == PROBE_INPUTS == "questions (chat prompts), no answers"
    assert section["scope"] == "forget patients" and section["n"] == len(forget)
    assert len(calls) == 2  # before, unlearned
    for texts, kwargs in calls:
        assert texts == render_prompts(tiny_tokenizer, forget["question"].tolist())
        assert all(MARKER not in text for text in texts)
        assert kwargs["add_special_tokens"] is False and kwargs["groups"] == forget["patient_id"].tolist()
    assert 0.0 <= section["unlearned"]["accuracy"] <= 1.0 and section["before"]["chance"] == 0.5
    # The before model's result is reused by the next method.
    probe_section("another", "before", examples, 0, cache)
    assert len(calls) == 3


def planted_question_examples() -> pd.DataFrame:
    """:func:`two_disease_examples` whose questions give their disease away (a test only one disease has):
    a text-only signal, readable with no memory of the patients."""
    examples = two_disease_examples()
    words = examples["disease"].map(
        {"cardiovascular": "troponin electrocardiogram", "infection": "sputum culture"}
    )
    examples["question"] = "What did the " + words + " of patient " + examples["patient_id"] + " show?"
    return examples


def test_text_only_baseline_reads_a_planted_text_signal_and_nothing_is_left_above_it(
    tiny_model, tiny_tokenizer, monkeypatch, one_torch_thread
):
    """Questions that name their disease's tests: the text-only baseline reads the disease (same folds as
    the probe), the model probe reads it as well, so the probe finds nothing above the baseline: no share
    above baseline (None), while the share above chance alone would read as 'all retained'."""
    from medunlearn.attacks.hidden_probe import TEXT_ONLY_BASELINE, probe_section

    recording_probe_section(monkeypatch, tiny_model, tiny_tokenizer)
    section = probe_section("unlearned", "before", planted_question_examples(), 0, {})
    assert section["text_only"]["accuracy"] == 1.0 and section["baseline"] == TEXT_ONLY_BASELINE
    assert section["baseline_accuracy"] == section["text_only"]["accuracy"]
    assert section["before"]["accuracy"] >= 0.9
    assert section["above_baseline"]["before"] == pytest.approx(section["before"]["accuracy"] - 1.0)
    assert (
        abs(section["above_baseline"]["before"]) <= 0.1 and abs(section["above_baseline"]["unlearned"]) <= 0.1
    )
    assert section["retained_above_baseline_share"] is None
    assert section["retained_above_chance_share"] == pytest.approx(1.0)  # what the old report said


def test_text_only_probe_uses_the_probes_folds_and_reads_nothing_from_unrelated_questions():
    from medunlearn.attacks.hidden_probe import text_only_probe

    texts, labels, groups = probe_texts()
    rng = np.random.default_rng(0)
    features = rng.normal(size=(len(texts), 4))
    hidden = probe_accuracy(features, labels, groups=groups, seed=3, folds=4)
    text = text_only_probe(texts, labels, groups=groups, seed=3, folds=4)
    assert text["fold_test_indices"] == hidden["fold_test_indices"]  # the same folds
    assert text["accuracy"] == 1.0  # the words give the category away
    neutral = [f"What did test {i % 5} show?" for i in range(len(texts))]
    assert text_only_probe(neutral, labels, groups=groups, seed=3, folds=4)["above_chance"] <= 0.15


def test_retain_model_is_the_baseline_when_given(tiny_model, tiny_tokenizer, monkeypatch, one_torch_thread):
    from medunlearn.attacks.hidden_probe import RETAIN_BASELINE, probe_section

    calls = recording_probe_section(monkeypatch, tiny_model, tiny_tokenizer)
    cache: dict = {}
    section = probe_section("unlearned", "before", two_disease_examples(), 0, cache, retain_path="retain")
    assert len(calls) == 3 and section["baseline"] == RETAIN_BASELINE
    assert section["baseline_accuracy"] == section["retain"]["accuracy"]
    probe_section("another", "before", two_disease_examples(), 0, cache, retain_path="retain")
    assert len(calls) == 4  # before and retain are probed once for every method


@pytest.mark.parametrize(
    ("before", "unlearned", "baseline", "n", "expected"),
    [
        (0.9, 0.6, 0.6, 40, 0.0),  # unlearned reads only what the baseline reads: nothing retained
        (0.9, 0.75, 0.6, 40, 0.5),
        (0.9, 0.9, 0.6, 40, 1.0),
        (0.62, 0.61, 0.6, 40, None),  # 0.02 < 1/40 above the baseline: nothing to retain
        (0.5, 0.5, 0.7, 40, None),  # the before model below the baseline
        # 0.12 above the baseline, under 2·sqrt(2·0.56·0.44/96) = 0.143: within sampling noise
        (0.62, 0.55, 0.5, 96, None),
        (0.9, 0.45, 0.3, 100, 0.25),  # 0.6 above, far over 2·sqrt(2·0.6·0.4/100) = 0.139: (0.45−0.3)/0.6
    ],
)
def test_retained_share_above_baseline_by_hand(before, unlearned, baseline, n, expected):
    from medunlearn.attacks.hidden_probe import retained_share_above_baseline

    share = retained_share_above_baseline(before, unlearned, baseline, n)
    assert share == (None if expected is None else pytest.approx(expected))


def test_retained_share_above_baseline_is_undefined_without_any_memory():
    """No model has any memory: the before, unlearned and baseline probes are each right on a question with
    the same probability (accuracies Binomial(n, p) / n). The share is defined in at most ~2.5% of 2000
    draws (before − baseline over 2 sd of its noise); the old 1 / n threshold defined it in about half."""
    from medunlearn.attacks.hidden_probe import retained_share_above_baseline

    rng = np.random.default_rng(0)
    n = 96
    accuracies = rng.binomial(n, 0.55, size=(2000, 3)) / n
    defined = [retained_share_above_baseline(b, u, base, n) is not None for b, u, base in accuracies]
    assert np.mean(defined) <= 0.04


def test_module_doctests_run():
    import doctest

    from medunlearn.attacks import probing as module

    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, module.__name__):
        runner.run(test)
    summary = runner.summarize(verbose=False)
    assert summary.attempted > 0 and summary.failed == 0


def test_probe_comparison_says_why_the_share_above_baseline_is_undefined():
    from medunlearn.attacks.hidden_probe import probe_comparison

    def probe(accuracy):
        return {"accuracy": accuracy, "above_chance": accuracy - 0.5}

    section = {"n": 96, "before": probe(0.62), "unlearned": probe(0.55), "text_only": probe(0.5)}
    comparison = probe_comparison(section)
    assert comparison["retained_above_baseline_share"] is None
    assert "+0.120" in comparison["retained_above_baseline_undefined"]
    assert "n=96 (0.143)" in comparison["retained_above_baseline_undefined"]
    section["before"] = probe(0.9)
    assert comparison["retained_above_chance_share"] == pytest.approx(0.05 / 0.12)
    assert probe_comparison(section)["retained_above_baseline_undefined"] is None
