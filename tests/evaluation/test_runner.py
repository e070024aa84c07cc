"""The runner's outputs equal a direct per-example computation, and an interrupted run resumes to the same
outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from medunlearn.evaluation.runner import (
    MANIFEST,
    RunnerConfig,
    StaleOutputsError,
    encode_examples,
    plan_batches,
    read_outputs,
    run_model,
)

QUIET = {"progress": False}


def _direct_answer_statistics(model, full_ids, start, end):
    """Unbatched, unpadded reference: log-softmax of one sequence's logits at the answer positions."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([full_ids])).logits[0].double()
    logprobs = logits.log_softmax(-1)[start - 1 : end - 1]
    targets = torch.tensor(full_ids[start:end])
    token = logprobs.gather(1, targets[:, None]).squeeze(1)
    mean = (logprobs.exp() * logprobs).sum(-1)
    std = ((logprobs.exp() * logprobs.square()).sum(-1) - mean.square()).sqrt()
    return (
        token.numpy(),
        (logits[start - 1 : end - 1].argmax(-1) == targets).numpy(),
        mean.numpy(),
        std.numpy(),
    )


def test_answer_tokens_are_the_answer_and_its_end_of_turn(tiny_tokenizer, make_examples):
    examples = make_examples()
    encoded = encode_examples(tiny_tokenizer, examples["question"], examples["answer"])
    for i, answer in enumerate(examples["answer"]):
        span = encoded.full_ids[i][encoded.answer_start[i] : encoded.answer_end[i]]
        assert span[-1] == tiny_tokenizer.eos_token_id
        assert tiny_tokenizer.decode(span[:-1]) == answer
        assert encoded.full_ids[i][: encoded.answer_start[i]] == encoded.prompt_ids[i]


def test_teacher_forced_outputs_equal_direct_per_example_computation(
    lively_model, tiny_tokenizer, make_examples, tmp_path
):
    examples = make_examples()
    run_model(
        lively_model,
        tiny_tokenizer,
        examples,
        tmp_path,
        RunnerConfig(batch_size=3, **QUIET),
        passes=("teacher_forced",),
    )
    outputs = read_outputs(tmp_path, examples["example_id"])
    encoded = encode_examples(tiny_tokenizer, examples["question"], examples["answer"])
    lengths = {len(ids) for ids in encoded.full_ids}
    assert len(lengths) > 3, "the examples must differ in length so that batches are padded"
    for i in range(len(examples)):
        token, is_argmax, mean, std = _direct_answer_statistics(
            lively_model, encoded.full_ids[i], encoded.answer_start[i], encoded.answer_end[i]
        )
        np.testing.assert_allclose(outputs["token_logprobs"][i], token, atol=1e-5)
        np.testing.assert_allclose(outputs["token_mean_logprob"][i], mean, atol=1e-5)
        np.testing.assert_allclose(outputs["token_std_logprob"][i], std, atol=1e-4)
        np.testing.assert_array_equal(outputs["token_is_argmax"][i], is_argmax)


def test_generation_equals_unbatched_greedy_generation(lively_model, tiny_tokenizer, make_examples, tmp_path):
    model = lively_model.double()  # float64: batched and unbatched argmax cannot differ by rounding
    examples = make_examples()
    config = RunnerConfig(batch_size=4, max_new_tokens=12, **QUIET)
    run_model(model, tiny_tokenizer, examples, tmp_path, config, passes=("generation",))
    outputs = read_outputs(tmp_path, examples["example_id"])
    encoded = encode_examples(tiny_tokenizer, examples["question"], examples["answer"])
    texts = []
    for i, prompt in enumerate(encoded.prompt_ids):
        with torch.no_grad():
            generated = model.generate(
                input_ids=torch.tensor([prompt]),
                max_new_tokens=12,
                do_sample=False,
                eos_token_id=tiny_tokenizer.eos_token_id,
                pad_token_id=tiny_tokenizer.pad_token_id,
            )[0, len(prompt) :].tolist()
        if tiny_tokenizer.eos_token_id in generated:
            generated = generated[: generated.index(tiny_tokenizer.eos_token_id)]
        assert outputs["generated_token_ids"][i].tolist() == generated
        texts.append(tiny_tokenizer.decode(generated, skip_special_tokens=True))
    assert outputs["generated_text"].tolist() == texts
    assert len(set(texts)) > 2, "a lively model must produce varied answers for this test to mean anything"


def test_interrupted_run_resumes_to_the_uninterrupted_outputs(
    lively_model, tiny_tokenizer, make_examples, tmp_path
):
    examples = make_examples()
    config = RunnerConfig(batch_size=2, max_new_tokens=6, **QUIET)
    assert run_model(lively_model, tiny_tokenizer, examples, tmp_path / "whole", config)

    interrupted = tmp_path / "interrupted"
    stopping = RunnerConfig(batch_size=2, max_new_tokens=6, stop_after_batches=3, **QUIET)
    assert not run_model(lively_model, tiny_tokenizer, examples, interrupted, stopping)
    manifest = json.loads((interrupted / MANIFEST).read_text())
    assert sum(len(done) for done in manifest["completed"].values()) == 3
    # The restart runs only what is missing, and is told the same settings (the stop limit is not part of
    # them).
    assert run_model(lively_model, tiny_tokenizer, examples, interrupted, config)
    manifest = json.loads((interrupted / MANIFEST).read_text())
    assert all(
        sorted(done) == list(range(manifest["batches"][name])) for name, done in manifest["completed"].items()
    )

    whole = read_outputs(tmp_path / "whole", examples["example_id"])
    resumed = read_outputs(interrupted, examples["example_id"])
    assert whole["generated_text"].tolist() == resumed["generated_text"].tolist()
    for column in ("token_logprobs", "token_is_argmax", "token_mean_logprob", "token_std_logprob"):
        for a, b in zip(whole[column], resumed[column]):
            np.testing.assert_array_equal(a, b)


def test_outputs_of_other_data_are_not_mixed_in(tiny_model, tiny_tokenizer, make_examples, tmp_path):
    config = RunnerConfig(batch_size=4, max_new_tokens=2, **QUIET)
    run_model(tiny_model, tiny_tokenizer, make_examples(), tmp_path, config)
    other = make_examples(answers=["changed"] * 7)
    with pytest.raises(StaleOutputsError, match="another model, data or setting"):
        run_model(tiny_model, tiny_tokenizer, other, tmp_path, config)
    assert run_model(tiny_model, tiny_tokenizer, other, tmp_path, config, overwrite=True)
    assert read_outputs(tmp_path, other["example_id"])["example_id"].tolist() == other["example_id"].tolist()


def test_read_outputs_names_a_missing_example(tiny_model, tiny_tokenizer, make_examples, tmp_path):
    examples = make_examples()
    run_model(
        tiny_model, tiny_tokenizer, examples, tmp_path, RunnerConfig(batch_size=4, max_new_tokens=2, **QUIET)
    )
    with pytest.raises(FileNotFoundError, match="forget_seen/q99"):
        read_outputs(tmp_path, [*examples["example_id"], "forget_seen/q99"])


@pytest.mark.parametrize("sort_by_length", [True, False])
def test_batch_plan_covers_every_example_once(sort_by_length):
    lengths = [5, 1, 9, 3, 3, 7, 2]
    batches = plan_batches(lengths, 3, sort_by_length)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    assert [len(b) for b in batches] == [3, 3, 1]
    if sort_by_length:
        flat = [lengths[i] for i in np.concatenate(batches)]
        assert flat == sorted(lengths, reverse=True)


def test_answer_spans_by_hand():
    from medunlearn.evaluation.runner import locate_answers

    eos = {9}
    prompts = [[1, 2], [1], [5, 5, 5]]
    full = [[1, 2, 7, 9, 3], [1, 4, 4], [5, 5, 5, 9, 9]]
    starts, ends = locate_answers(prompts, full, eos)
    # Row 0: answer 7 + EOS, the trailing 3 (a template newline) not scored; row 1: no EOS, to the end;
    # row 2: an empty answer is just its EOS.
    assert starts.tolist() == [2, 1, 3]
    assert ends.tolist() == [4, 3, 4]
    with pytest.raises(ValueError, match="example 1: the chat template renders the question differently"):
        locate_answers([[1, 2], [1, 3]], [[1, 2, 9], [1, 4, 9]], eos)


def test_a_changed_model_does_not_reuse_outputs(tiny_model, tiny_tokenizer, make_examples, tmp_path):
    examples = make_examples()
    config = RunnerConfig(batch_size=4, max_new_tokens=2, **QUIET)
    run_model(tiny_model, tiny_tokenizer, examples, tmp_path, config, model_id="ckpt")
    with torch.no_grad():
        tiny_model.model.norm.weight.mul_(1.01)  # "retrained in place", same name
    with pytest.raises(StaleOutputsError):
        run_model(tiny_model, tiny_tokenizer, examples, tmp_path, config, model_id="ckpt")


def test_processes_share_the_batches_and_their_outputs_equal_one_process(
    lively_model, tiny_tokenizer, make_examples, tmp_path
):
    from medunlearn.evaluation.runner import outputs_complete

    examples = make_examples()
    config = RunnerConfig(batch_size=2, max_new_tokens=5, **QUIET)
    run_model(lively_model, tiny_tokenizer, examples, tmp_path / "one", config)

    shared = tmp_path / "two"
    run_model(lively_model, tiny_tokenizer, examples, shared, config, process_index=1, num_processes=2)
    assert not outputs_complete(shared)
    run_model(lively_model, tiny_tokenizer, examples, shared, config, process_index=0, num_processes=2)
    assert outputs_complete(shared)
    manifests = {p.name: json.loads(p.read_text()) for p in shared.glob("manifest*.json")}
    assert sorted(manifests) == ["manifest-0-of-2.json", "manifest-1-of-2.json"]
    assert sorted(manifests["manifest-1-of-2.json"]["completed"]["generation"]) == [1, 3]

    one, two = (
        read_outputs(tmp_path / "one", examples["example_id"]),
        read_outputs(shared, examples["example_id"]),
    )
    assert one["generated_text"].tolist() == two["generated_text"].tolist()
    for a, b in zip(one["token_logprobs"], two["token_logprobs"]):
        np.testing.assert_array_equal(a, b)


def test_a_run_resumes_with_another_number_of_processes(tiny_model, tiny_tokenizer, make_examples, tmp_path):
    from medunlearn.evaluation.runner import outputs_complete

    examples = make_examples()
    config = RunnerConfig(batch_size=2, max_new_tokens=2, **QUIET)
    run_model(tiny_model, tiny_tokenizer, examples, tmp_path, config, process_index=0, num_processes=2)
    first = json.loads((tmp_path / "manifest-0-of-2.json").read_text())["completed"]
    assert run_model(tiny_model, tiny_tokenizer, examples, tmp_path, config)  # one process finishes the rest
    rest = json.loads((tmp_path / MANIFEST).read_text())["completed"]
    assert all(not set(first[name]) & set(rest[name]) for name in first)
    assert outputs_complete(tmp_path)


def test_answer_variants_are_scored_once_each_and_match_direct_computation(
    lively_model, tiny_tokenizer, make_examples, tmp_path
):
    from medunlearn.evaluation.runner import read_answer_variants

    plain = make_examples()
    examples = plain.assign(
        paraphrased_answer=[f"It was {a.lower()}" for a in plain["answer"]],
        perturbed_answers=[
            ["A stent."],
            ["ST elevation.", "Fever."],
            [],
            ["Aspirin."],
            ["None."],
            ["Heparin."],
            ["x", "y", "z"],
        ],
    )
    config = RunnerConfig(batch_size=3, max_new_tokens=3, **QUIET)
    run_model(lively_model, tiny_tokenizer, examples, tmp_path / "variants", config)
    run_model(lively_model, tiny_tokenizer, plain, tmp_path / "plain", config)

    variants = read_answer_variants(tmp_path / "variants")
    assert len(variants) == 7 + 9  # one paraphrase per example + every perturbed answer (1+2+0+1+1+1+3)
    assert set(variants.loc[variants["example_id"] == "forget_seen/q6", "variant"]) == {
        "paraphrased",
        "perturbed_0",
        "perturbed_1",
        "perturbed_2",
    }
    # The main answers' outputs do not change when variants are scored alongside them.
    with_variants = read_outputs(tmp_path / "variants", plain["example_id"])
    without = read_outputs(tmp_path / "plain", plain["example_id"])
    for a, b in zip(with_variants["token_logprobs"], without["token_logprobs"]):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert with_variants["generated_text"].tolist() == without["generated_text"].tolist()
    # A variant's log-probs equal the direct computation on its own conversation.
    row = variants[
        (variants["example_id"] == "forget_seen/q1") & (variants["variant"] == "perturbed_1")
    ].iloc[0]
    encoded = encode_examples(tiny_tokenizer, [examples["question"][1]], ["Fever."])
    token, *_ = _direct_answer_statistics(
        lively_model, encoded.full_ids[0], encoded.answer_start[0], encoded.answer_end[0]
    )
    np.testing.assert_allclose(row["token_logprobs"], token, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.lists(st.integers(0, 5), max_size=6), st.lists(st.integers(0, 5), max_size=6)),
        min_size=1,
        max_size=8,
    )
)
def test_answer_spans_match_a_per_row_loop(rows):
    from medunlearn.evaluation.runner import locate_answers

    eos = {5}
    prompts = [prompt for prompt, _ in rows]
    fulls = [prompt + rest for prompt, rest in rows]
    starts, ends = locate_answers(prompts, fulls, eos)
    for (prompt, rest), start, end in zip(rows, starts, ends):
        first_eos = next((j for j, token in enumerate(rest) if token in eos), None)
        assert start == len(prompt)
        assert end == len(prompt) + (len(rest) if first_eos is None else first_eos + 1)


def test_a_fully_cached_rerun_prints_one_reuse_line_and_no_empty_bars(
    tiny_model, tiny_tokenizer, make_examples, tmp_path, capfd
):
    examples = make_examples()
    config = RunnerConfig(batch_size=4, max_new_tokens=2, progress=True)
    assert run_model(tiny_model, tiny_tokenizer, examples, tmp_path / "run", config)
    first = capfd.readouterr()
    assert "run: teacher_forced" in first.err and "reused" not in first.err  # the bars of real work

    for _ in range(2):
        assert run_model(tiny_model, tiny_tokenizer, examples, tmp_path / "run", config)
        again = capfd.readouterr()
        assert "batch" not in again.err.replace("batches", "")  # no "teacher_forced: 0batch" bar
        lines = again.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"run: reused cached outputs in {tmp_path / 'run'}: ")
        assert "teacher_forced " in lines[0] and "generation " in lines[0] and again.out == ""

    quiet = RunnerConfig(batch_size=4, max_new_tokens=2, **QUIET)
    assert run_model(tiny_model, tiny_tokenizer, examples, tmp_path / "run", quiet)
    assert capfd.readouterr().err == ""  # progress off: silent
