"""Notes memorization on AMNESIA (medunlearn.evaluation.notes_memorization / notes_scoring): the cut of a
note, hand-computed scores, the note populations, and a planted effect on a tiny Llama trained on the forget
patients' notes only (verbmem higher on them, the membership AUC above 0.5, privleak negative)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
import torch

from medunlearn.amnesia import build_amnesia
from medunlearn.amnesia.note_sets import holdout_note_rows, note_rows
from medunlearn.evaluation.notes_memorization import (
    build_note_examples,
    load_note_examples,
    note_population_patients,
    split_document,
)
from medunlearn.evaluation.notes_report import notes_card_section, notes_headline, notes_payload
from medunlearn.evaluation.notes_scoring import privleak_section, verbmem_scores_table
from medunlearn.evaluation.notes_settings import NotesMemorizationConfig
from medunlearn.evaluation.pipeline import evaluate_unlearning, score_evaluation
from medunlearn.evaluation.populations import PopulationConfig, load_populations
from medunlearn.evaluation.runner import RunnerConfig
from medunlearn.models import TinyLlamaConfig, build_tiny_llama, train_bpe_tokenizer

CONFIG = NotesMemorizationConfig(prefix_words=8, continuation_words=8, max_new_tokens=24)


def test_a_note_is_cut_after_p_words_and_scored_on_c_words():
    text = "Chest pain in a welder\nA 54-year-old man was referred after two days of chest pain."
    prefix, continuation = split_document(text, 6, 4)
    assert prefix == "Chest pain in a welder\nA"
    assert continuation == " 54-year-old man was referred"
    assert prefix + continuation + " after two days of chest pain." == text
    assert split_document(text, 14, 4)[1] == " chest pain."  # fewer than C words left: the rest
    assert split_document(text, 16, 4) is None  # no word after the prefix


def test_verbmem_and_extraction_strength_by_hand():
    """One note: the generation is cut to C = 6 words, ROUGE-L F1 against the continuation; ES from the
    teacher-forced argmax matches."""
    config = NotesMemorizationConfig(prefix_words=3, continuation_words=6)
    examples = pd.DataFrame(
        {
            "example_id": ["verbmem/forget/P1"],
            "population": ["forget"],
            "patient_id": ["P1"],
            "disease": ["cardiovascular"],
            "answer": [" the right coronary artery was occluded"],
        }
    )
    outputs = pd.DataFrame(
        {
            "generated_text": [" the right coronary artery was blocked early this morning"],
            "token_is_argmax": [[False, True, True, True]],
        }
    )
    table = verbmem_scores_table(examples, outputs, config)
    assert table["generated_text"][0] == "the right coronary artery was blocked"  # g_C: 6 words
    # LCS "the right coronary artery was" = 5 of 6 words each side: P = R = 5/6, F1 = 5/6.
    assert table["verbmem"][0] == pytest.approx(5 / 6)
    # The smallest k with argmax[k:] == y[k:] is 1: ES = 1 - 1/4.
    assert table["extraction_strength"][0] == pytest.approx(0.75)


def test_privleak_sign_and_reasons_on_planted_scores():
    def table(forget, holdout):
        return pd.DataFrame(
            {
                "population": ["forget"] * len(forget) + ["holdout"] * len(holdout),
                "min_k_score": [*forget, *holdout],
            }
        )

    remembered = table([0.1, 0.2, 0.3], [2.0, 2.5, 3.0])  # forget notes far more familiar: AUC 1
    # Holdout above forget in 3 of the 9 pairs (1.5 > 1.0; 2.5 > 1.0, 2.0): AUC 1/3.
    unseen = table([1.0, 2.0, 3.0], [1.5, 2.5, 0.5])
    section = privleak_section({"model": remembered, "before": remembered, "retain": unseen}, None)
    assert section["auc"]["estimate"] == 1.0 and section["auc_retain_model"]["estimate"] == pytest.approx(
        1 / 3
    )
    # ((1 - 1) - (1 - 1/3)) / (1 - 1/3) * 100: the forget notes are still recognisable (under-unlearning).
    assert section["privleak"] == pytest.approx(-100.0)
    without_retain = privleak_section({"model": remembered}, None)
    assert without_retain["privleak"] is None and "--retain-model" in without_retain["reason"]
    no_holdout = privleak_section({"model": table([0.1], [])}, None)
    assert no_holdout["auc"] is None and "holdout_notes" in no_holdout["reason"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_amnesia(tmp_path_factory.mktemp("amnesia") / "data", patients=40, seed=0)


def test_note_populations_are_the_qa_populations_patients(folder):
    qa = load_populations(folder, "disease_cancer_forget_10", PopulationConfig(max_retain_patients=3, seed=1))
    patients = note_population_patients(qa)
    forget_qa = set(qa.loc[qa["population"].isin(["forget_seen", "forget_holdout"]), "patient_id"])
    assert set(patients["forget"]) == forget_qa
    for population in ("retain_same_disease", "retain_out_of_disease"):  # the same seeded sample as MU
        assert set(patients[population]) == set(qa.loc[qa["population"] == population, "patient_id"])
        assert len(patients[population]) == 3
    notes, too_short = load_note_examples(folder, qa, CONFIG)
    assert too_short == {"forget": 0, "retain_same_disease": 0, "retain_out_of_disease": 0}
    diseases = {row["patient_id"]: row["disease"] for row in note_rows(folder)}
    verbmem = notes[notes["task"] == "verbmem"]
    for population, ids in patients.items():
        assert sorted(verbmem.loc[verbmem["population"] == population, "patient_id"]) == ids
    assert {diseases[pid] for pid in patients["forget"]} == {"cancer"}
    assert {diseases[pid] for pid in patients["retain_same_disease"]} == {"cancer"}
    assert "cancer" not in {diseases[pid] for pid in patients["retain_out_of_disease"]}
    privleak = notes[notes["task"] == "privleak"]
    assert sorted(privleak.loc[privleak["population"] == "forget", "patient_id"]) == patients["forget"]
    # Non-members of the forget patients' disease only: the held-out cancer notes.
    held_out = holdout_note_rows(folder)
    holdout = [row["patient_id"] for row in held_out if row["disease"] == "cancer"]
    assert holdout and len(holdout) < len(held_out)
    assert sorted(privleak.loc[privleak["population"] == "holdout", "patient_id"]) == holdout
    documents = {row["patient_id"]: row["text"] for row in note_rows(folder)}
    for row in verbmem.itertuples():  # the prompt and its continuation are the start of the trained text
        assert documents[row.patient_id].startswith(row.question + row.answer)


def test_a_patient_without_a_note_is_named():
    with pytest.raises(Exception, match="patient 'P9' \\(forget\\) has no note"):
        build_note_examples([], [], {"forget": ["P9"]}, CONFIG)


def _train_on(model, tokenizer, texts, steps=100, lr=4e-3):
    """Plain next-token training on whole documents, tokenised as raw text (special tokens added)."""
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    for _ in range(steps):
        loss = model(**batch, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return model


@pytest.fixture(scope="module")
def planted(folder, tmp_path_factory):
    """A tiny Llama trained on the forget_10 patients' notes only, evaluated with the untrained model as
    ``before`` and as the retain model. One torch thread: on a shared CPU, two threads wait on each other
    (the training ran 30x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    notes = note_rows(folder)
    held_out = holdout_note_rows(folder)
    tokenizer = train_bpe_tokenizer([row["text"] for row in notes + held_out] * 2, vocab_size=1200)
    base = build_tiny_llama(tokenizer, TinyLlamaConfig(hidden_size=64, intermediate_size=128, seed=0))
    qa = load_populations(folder, "forget_10", PopulationConfig(max_retain_patients=4))
    forget = set(note_population_patients(qa)["forget"])
    trained = _train_on(
        copy.deepcopy(base), tokenizer, [r["text"] for r in notes if r["patient_id"] in forget]
    )
    out = tmp_path_factory.mktemp("evaluation") / "eval"
    summary = evaluate_unlearning(
        trained,
        folder,
        "forget_10",
        out,
        examples=qa.groupby("patient_id").head(1).reset_index(drop=True),  # one QA per patient: quicker
        tokenizer=tokenizer,
        before=(base, tokenizer),
        retain_model=(base, tokenizer),
        runner_config=RunnerConfig(batch_size=16, max_new_tokens=2, progress=False),
        notes_memorization=CONFIG,
    )
    yield {"summary": summary, "out": out, "model": trained, "tokenizer": tokenizer}
    torch.set_num_threads(threads)


@pytest.mark.slow  # ~15 s: 100 training steps on 4 notes and three models' evaluation
def test_a_model_trained_on_the_forget_notes_remembers_them_and_not_the_others(planted, folder):
    section = planted["summary"]["notes_memorization"]
    populations = section["populations"]
    forget = populations["forget"]
    assert forget["n"] == 4 and forget["verbmem"]["estimate"] > 0.8
    assert forget["verbmem_change"]["low"] > 0  # before: the untrained model; the interval excludes 0
    for population in ("retain_same_disease", "retain_out_of_disease"):
        cell = populations[population]
        assert cell["n"] == 4
        assert cell["verbmem"]["estimate"] < forget["verbmem"]["estimate"] - 0.4
        assert cell["extraction_strength"]["estimate"] < forget["extraction_strength"]["estimate"]
    privleak = section["privleak"]
    examples = pd.read_parquet(planted["out"] / "notes_examples.parquet")
    forget_diseases = set(examples.loc[examples["population"] == "forget", "disease"])
    matched = [row for row in holdout_note_rows(folder) if row["disease"] in forget_diseases]
    assert privleak["n_forget"] == 4 and privleak["n_holdout"] == len(matched) > 0
    assert privleak["auc"]["estimate"] > 0.9  # the trained-on notes look more familiar than unseen ones
    assert privleak["privleak"] < 0  # and more than under a model that never saw them
    # The summary is rebuilt from the stored outputs alone.
    assert score_evaluation(planted["out"])["notes_memorization"] == json.loads(json.dumps(section)), (
        "rescoring changed the notes section"
    )


@pytest.mark.slow
def test_one_notes_verbmem_recomputed_by_hand(planted):
    """One forget note: greedy continuation and teacher-forced argmax recomputed here with the model, then
    ROUGE-L F1 with rouge_score directly."""
    from rouge_score import rouge_scorer

    model, tokenizer = planted["model"], planted["tokenizer"]
    per_note = pd.read_parquet(planted["out"] / "notes_per_example.parquet")
    examples = pd.read_parquet(planted["out"] / "notes_examples.parquet").set_index("example_id")
    row = per_note[per_note["population"] == "forget"].iloc[0]
    prefix, continuation = examples.loc[row["example_id"], ["question", "answer"]]
    prompt_ids = tokenizer(prefix)["input_ids"]  # raw text: the tokenizer's special tokens added
    full_ids = tokenizer(prefix + continuation)["input_ids"]
    assert full_ids[: len(prompt_ids)] == prompt_ids
    with torch.no_grad():
        generated = model.generate(
            torch.tensor([prompt_ids]),
            max_new_tokens=CONFIG.generation_tokens,
            do_sample=False,
            pad_token_id=0,
        )
        logits = model(torch.tensor([full_ids])).logits[0]
    text = tokenizer.decode(generated[0, len(prompt_ids) :], skip_special_tokens=True)
    g_c = " ".join(text.split()[: CONFIG.continuation_words])
    assert row["generated_text"] == g_c
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    assert row["verbmem"] == pytest.approx(scorer.score(continuation.strip(), g_c)["rougeL"].fmeasure)
    target = np.array(full_ids[len(prompt_ids) :])
    argmax = logits[len(prompt_ids) - 1 : -1].argmax(-1).numpy() == target
    k = next(k for k in range(len(target) + 1) if argmax[k:].all())
    assert row["extraction_strength"] == pytest.approx(1 - k / len(target))


@pytest.mark.slow
def test_report_and_card_show_the_notes_beside_afe_and_mu(planted, tmp_path):
    from rich.console import Console

    from medunlearn.evaluation.report import write_report

    console = Console(width=200, record=True)
    payload = write_report([planted["out"]], tmp_path / "report", console=console)
    rows = payload["notes_memorization"]["rows"]
    assert [r["population"] for r in rows] == ["forget", "retain_same_disease", "retain_out_of_disease"]
    section = planted["summary"]["notes_memorization"]
    assert rows[0]["verbmem"] == section["populations"]["forget"]["verbmem"]["estimate"]
    assert rows[0]["verbmem_ci"] == [
        section["populations"]["forget"]["verbmem"]["low"],
        section["populations"]["forget"]["verbmem"]["high"],
    ]
    printed = console.export_text()
    assert "notes verbatim memorization" in printed and "retained out-of-disease" in printed
    assert "notes Min-K% AUC" in printed
    card = notes_card_section(planted["summary"])
    assert "AFE" in card and "MU" in card and "| forget | 4 |" in card and "privleak" in card
    assert notes_headline(section).startswith("notes verbmem: forget ")
    assert notes_payload(["x"], [{"populations": {}}]) is None  # no notes section: no notes table


def test_the_command_refuses_notes_options_it_cannot_honour(tmp_path, capsys):
    from medunlearn.cli import main

    data, out = tmp_path / "data", tmp_path / "eval"
    data.mkdir()
    argv = ["evaluate", "--model", "tiny-llama", "--data", str(data), "--out", str(out)]
    assert main([*argv, "--benchmark", "tofu", "--notes-memorization"]) == 2
    assert "--notes-memorization: AMNESIA options, not of --benchmark tofu" in capsys.readouterr().err
    assert main([*argv, "--forget", "forget_10", "--write-card"]) == 2
    assert "--write-card: tiny-llama is not a writable model folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # argparse: a usage error at parse time
        main([*argv, "--forget", "forget_10", "--notes-prefix-words", "0"])
    assert (
        stopped.value.code == 2 and "--notes-prefix-words: must be a whole number" in capsys.readouterr().err
    )
    assert not out.exists()


@pytest.mark.slow
def test_the_command_scores_notes_and_writes_the_card(planted, folder, tmp_path, capsys):
    from medunlearn.cli import main

    model_dir = tmp_path / "model"
    planted["model"].save_pretrained(model_dir)
    planted["tokenizer"].save_pretrained(model_dir)
    (model_dir / "README.md").write_text("# My model\n")
    out = tmp_path / "eval"
    argv = ["evaluate", "--model", str(model_dir), "--data", str(folder), "--forget", "forget_10"]
    argv += ["--out", str(out), "--max-new-tokens", "2", "--max-retain-patients", "2", "--no-progress"]
    argv += ["--notes-memorization", "--notes-prefix-words", "8", "--notes-continuation-words", "8"]
    assert main([*argv, "--notes-max-new-tokens", "24", "--write-card"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    forget = summary["notes_memorization"]["populations"]["forget"]
    assert f"notes verbmem: forget {forget['verbmem']['estimate']:.3f}" in printed
    assert summary["notes_memorization"]["config"] == {
        "prefix_words": 8,
        "continuation_words": 8,
        "max_new_tokens": 24,
        "min_k": 0.4,
    }
    card = (model_dir / "README.md").read_text()
    assert card.startswith("# My model") and "## Evaluation on `forget_10`" in card
    assert f"| forget | 4 | {forget['verbmem']['estimate']:.3f} [" in card
