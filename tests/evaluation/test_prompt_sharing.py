"""Scoring each prompt once (``RunnerConfig.share_prompts``) gives the same teacher-forced outputs as scoring
every full sequence (the reference path, ``share_prompts=False``), on the AMNESIA runner and the TOFU path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from medunlearn.evaluation.runner import (
    RunnerConfig,
    answer_token_statistics,
    answer_variants,
    encode_examples,
    outputs_fingerprint,
    padded_tokens,
    prompt_groups,
    read_answer_variants,
    read_outputs,
    run_model,
    shared_prompt_statistics,
    teacher_forced_batches,
)

COLUMNS = ("token_logprobs", "token_mean_logprob", "token_std_logprob")
# Variants of very different lengths (one token to a long sentence), so that answers are right padded and
# prompts of different lengths are left padded in one batch.
PARAPHRASES = ["Troponin was 2.4.", "RCA.", "Pneumococcus, treated with amoxicillin for a week.", "IDC.",
               "ST elevation in the inferior leads II, III and aVF.", "ER.", "Stent."]  # fmt: skip
PERTURBED = [
    ["It was 9.9 ng/mL.", "Normal."],
    ["The left anterior descending artery.", "None.", "The circumflex."],
    [],
    ["Lobular carcinoma in situ, grade two, with lymphovascular invasion."],
    ["Q waves.", "T wave inversion in V1 to V4.", "A", "Atrial fibrillation with a rapid ventricular rate."],
    ["Progesterone receptor."],
    ["A pacemaker.", "Nothing was placed."],
]


@pytest.fixture()
def variant_examples(make_examples):
    examples = make_examples()
    examples["paraphrased_answer"] = PARAPHRASES
    examples["perturbed_answers"] = PERTURBED
    return examples


def _assert_same(shared: pd.DataFrame, whole: pd.DataFrame) -> None:
    key = ["example_id", "variant"] if "variant" in shared else ["example_id"]
    shared, whole = (
        shared.sort_values(key).reset_index(drop=True),
        whole.sort_values(key).reset_index(drop=True),
    )
    assert shared[key].equals(whole[key])
    for i in range(len(shared)):
        for column in COLUMNS:
            np.testing.assert_allclose(shared[column][i], whole[column][i], atol=1e-5, rtol=0, err_msg=column)
        np.testing.assert_array_equal(shared["token_is_argmax"][i], whole["token_is_argmax"][i])


def test_shared_statistics_equal_whole_sequence_statistics_in_one_padded_batch(
    lively_model, tiny_tokenizer, variant_examples
):
    encoded = encode_examples(
        tiny_tokenizer,
        variant_examples["question"],
        variant_examples["answer"],
        answer_variants(variant_examples),
    )
    index = np.arange(len(encoded.full_ids))
    prompt_lengths = {int(encoded.answer_start[i]) for i in index}
    answer_lengths = {int(encoded.answer_end[i] - encoded.answer_start[i]) for i in index}
    assert len(prompt_lengths) > 3 and len(answer_lengths) > 5, "padding on both sides must be exercised"
    arguments = ([encoded.full_ids[i] for i in index], encoded.answer_start, encoded.answer_end, 0)
    shared = shared_prompt_statistics(lively_model, *arguments)
    whole = answer_token_statistics(lively_model, *arguments)
    for column in (*COLUMNS, "token_is_argmax"):
        for a, b in zip(shared[column], whole[column]):
            assert len(a) == len(b)
            np.testing.assert_allclose(a.astype(float), b.astype(float), atol=1e-5, rtol=0, err_msg=column)


def test_an_answer_of_one_token_is_scored_from_the_prompt_alone(lively_model):
    sequences = [[5, 6, 7, 2], [5, 6, 9, 9, 9, 2], [8, 2]]  # the last: prompt [8], answer [2]
    starts, ends = np.array([3, 3, 1]), np.array([4, 6, 2])
    shared = shared_prompt_statistics(lively_model, sequences, starts, ends, 0)
    whole = answer_token_statistics(lively_model, sequences, starts, ends, 0)
    for column in COLUMNS:
        for a, b in zip(shared[column], whole[column]):
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("batch_size", [3, 16])
def test_runner_outputs_with_and_without_prompt_sharing_are_equal(
    lively_model, tiny_tokenizer, variant_examples, tmp_path, batch_size
):
    outputs = {}
    for share in (True, False):
        config = RunnerConfig(batch_size=batch_size, progress=False, share_prompts=share)
        folder = tmp_path / str(share)
        run_model(lively_model, tiny_tokenizer, variant_examples, folder, config, passes=("teacher_forced",))
        outputs[share] = (read_outputs(folder, variant_examples["example_id"]), read_answer_variants(folder))
    _assert_same(outputs[True][0], outputs[False][0])
    _assert_same(outputs[True][1], outputs[False][1])
    assert len(outputs[True][1]) == sum(map(len, PERTURBED)) + len(PARAPHRASES)


def test_batches_keep_a_prompt_with_its_variants_and_cover_every_sequence_once(
    tiny_tokenizer, variant_examples
):
    encoded = encode_examples(
        tiny_tokenizer,
        variant_examples["question"],
        variant_examples["answer"],
        answer_variants(variant_examples),
    )
    groups = prompt_groups(encoded)
    assert len(groups) == len(variant_examples)
    for batch_size in (2, 4, 9):
        batches = teacher_forced_batches(encoded, batch_size, sort_by_length=True, share_prompts=True)
        assert sorted(np.concatenate(batches).tolist()) == list(range(len(encoded.full_ids)))
        assert max(map(len, batches)) <= batch_size
        for group in groups:  # split only into chunks of batch_size
            holding = [k for k, batch in enumerate(batches) if np.isin(group, batch).any()]
            assert len(holding) == -(-len(group) // batch_size)
        whole = teacher_forced_batches(encoded, batch_size, sort_by_length=True, share_prompts=False)
        assert padded_tokens(encoded, batches, True) < padded_tokens(encoded, whole, False)


def test_prompt_sharing_is_part_of_the_outputs_fingerprint(variant_examples):
    on, off = RunnerConfig(share_prompts=True), RunnerConfig(share_prompts=False)
    assert outputs_fingerprint("m", variant_examples, on) != outputs_fingerprint("m", variant_examples, off)
    # Generations do not depend on it: a generation-only folder keeps its fingerprint.
    generation = ("generation",)
    assert outputs_fingerprint("m", variant_examples, on, passes=generation) == outputs_fingerprint(
        "m", variant_examples, off, passes=generation
    )


def test_tofu_outputs_and_metrics_with_and_without_prompt_sharing_are_equal(tmp_path):
    """TOFU's examples are one row per (question, variant): the runner groups them by their prompt."""
    from medunlearn.models import build_tiny_llama, train_bpe_tokenizer
    from medunlearn.tofu.conventions import preset
    from medunlearn.tofu.evaluate import run_tofu_model, tofu_examples
    from medunlearn.tofu.synthetic import build_tofu_folder

    from .conftest import lively

    folder = build_tofu_folder(tmp_path / "data", authors=6, qa_per_author=3, perturbed=3, options=3, seed=2)
    examples = tofu_examples(folder, "forget10")
    tokenizer = train_bpe_tokenizer(examples["question"].tolist() + examples["answer"].tolist(), 300)
    torch.manual_seed(0)
    model = lively(build_tiny_llama(tokenizer), seed=3)
    conventions = preset("open-unlearning")
    tables = {}
    for share in (True, False):
        config = RunnerConfig(batch_size=8, progress=False, share_prompts=share)
        out = tmp_path / f"outputs-{share}"
        run_tofu_model(model, tokenizer, examples, out, "model", conventions, config, generate=False)
        tables[share] = read_outputs(out / "model-answers", examples["example_id"])
    _assert_same(tables[True], tables[False])
    encoded_prompts = tables[True]["example_id"].str.rsplit("/", n=2).str[0].nunique()
    assert encoded_prompts < len(examples) / 2, "each TOFU question has several answer variants"
