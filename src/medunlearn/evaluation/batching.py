"""Batch planning: which sequences go together in each batch of the two passes, and the batch size search.

The plan is part of the output folder's format (a shard per batch): :data:`BATCH_PLAN_VERSION` enters the
fingerprint and is bumped whenever the plan changes, so shards of an older plan are never resumed into a
newer one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from medunlearn.errors import InputError
from medunlearn.evaluation.encoding import EncodedExamples

# Bumped whenever the batch plan changes: shards of an older plan must not be resumed into a newer one.
BATCH_PLAN_VERSION = 2


def plan_batches(lengths: Sequence[int], batch_size: int, sort_by_length: bool) -> list[np.ndarray]:
    """Split example indices into batches; sorted longest first so an out-of-memory shows at once.

    >>> [batch.tolist() for batch in plan_batches([3, 9, 1, 5], 2, sort_by_length=True)]
    [[1, 3], [0, 2]]
    >>> [batch.tolist() for batch in plan_batches([3, 9, 1, 5], 3, sort_by_length=False)]
    [[0, 1, 2], [3]]
    """
    lengths = np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable") if sort_by_length else np.arange(len(lengths))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def generation_order_key(prompt_lengths, expected_answer_lengths) -> np.ndarray:
    """Sort key of the generation batches: expected answer length first, prompt length second.

    ``generate`` runs a batch until its longest answer ends, so what costs is the sum over batches of the
    longest answer; grouping answers that end together saves whole decoding steps, while prompt padding only
    costs in the (batched, cheap) prefill. The gold answer's token count is the expected length — exact for a
    model that remembers, and harmless for one that does not.

    >>> generation_order_key([10, 20, 5], [3, 3, 8]).tolist()  # 3·21 + 10, 3·21 + 20, 8·21 + 5
    [73, 83, 173]
    """
    prompt_lengths = np.asarray(prompt_lengths, dtype=np.int64)
    expected = np.asarray(expected_answer_lengths, dtype=np.int64)
    return expected * (int(prompt_lengths.max(initial=0)) + 1) + prompt_lengths


def generation_batches(encoded: EncodedExamples, batch_size: int, sort_by_length: bool) -> list[np.ndarray]:
    """The generation pass's batches: one prompt per example, ordered by :func:`generation_order_key` (the
    gold answer's token count, then the prompt's) when ``sort_by_length``."""
    n = len(encoded.prompt_ids)  # the first n sequences are the examples' own answers; variants follow
    key = generation_order_key(
        [len(p) for p in encoded.prompt_ids], encoded.answer_end[:n] - encoded.answer_start[:n]
    )
    return plan_batches(key, batch_size, sort_by_length)


def prompt_groups(encoded: EncodedExamples) -> list[np.ndarray]:
    """Scored sequences grouped by prompt: the indices of the sequences with the same prompt token ids, in
    order of first appearance (an example's answer and its variants; TOFU's variant rows of one question).

    >>> encoded = EncodedExamples([], [[1, 2, 7], [1, 3, 7], [1, 2, 8]], np.array([2, 2, 2]),
    ...                           np.array([3, 3, 3]), np.zeros(3), np.zeros(3))
    >>> [group.tolist() for group in prompt_groups(encoded)]
    [[0, 2], [1]]
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (ids, start) in enumerate(zip(encoded.full_ids, encoded.answer_start)):
        groups.setdefault(tuple(ids[:start]), []).append(i)
    return [np.asarray(group, dtype=np.int64) for group in groups.values()]


def teacher_forced_batches(
    encoded: EncodedExamples, batch_size: int, sort_by_length: bool, share_prompts: bool = False
) -> list[np.ndarray]:
    """The teacher-forced pass's batches of scored sequences.

    Without ``share_prompts``: :func:`plan_batches` over the full sequences' lengths. With it, whole prompt
    groups (:func:`prompt_groups`, split into chunks of ``batch_size`` when larger) fill each batch up to
    ``batch_size`` sequences, longest first by prompt length plus longest answer, so a prompt and its
    variants are scored in one batch and the prompt runs once (:func:`shared_prompt_statistics`).
    """
    if not share_prompts:
        return plan_batches([len(s) for s in encoded.full_ids], batch_size, sort_by_length)
    lengths = encoded.answer_end - encoded.answer_start
    chunks = [
        group[i : i + batch_size]
        for group in prompt_groups(encoded)
        for i in range(0, len(group), batch_size)
    ]
    cost = [int(encoded.answer_start[chunk[0]] + lengths[chunk].max(initial=0)) for chunk in chunks]
    batches: list[list[np.ndarray]] = []
    filled = batch_size  # opens a batch at the first chunk
    for k in plan_batches(cost, 1, sort_by_length):
        chunk = chunks[int(k[0])]
        if filled + len(chunk) > batch_size:
            batches.append([])
            filled = 0
        batches[-1].append(chunk)
        filled += len(chunk)
    return [np.concatenate(batch) for batch in batches]


def padded_tokens(encoded: EncodedExamples, batches: list[np.ndarray], share_prompts: bool = False) -> int:
    """Token positions the teacher-forced pass runs through the model for ``batches`` (padding included):
    the cost :func:`shared_prompt_statistics` saves (``bench/bench_prompt_sharing.py``)."""
    total = 0
    for index in batches:
        if not share_prompts:
            total += len(index) * max(len(encoded.full_ids[i]) for i in index)
            continue
        starts = encoded.answer_start[index]
        prompts = {tuple(encoded.full_ids[i][:start]) for i, start in zip(index, starts)}
        continuation = int((encoded.answer_end[index] - starts - 1).max(initial=0))
        total += len(prompts) * int(starts.max()) + len(index) * max(continuation, 0)
    return total


def should_reduce_batch_size(error: BaseException) -> bool:
    """Whether ``error`` is a device out-of-memory error (the test accelerate's batch-size search uses)."""
    from accelerate.utils.memory import should_reduce_batch_size as out_of_memory

    return out_of_memory(error)


def auto_batch_size(probe, starting_batch_size: int, label: str = "") -> int:
    """The largest batch size, from ``starting_batch_size`` down by halving, for which ``probe(batch_size)``
    runs without a device out-of-memory error (accelerate's ``find_executable_batch_size``); logged to stderr.

    >>> auto_batch_size(lambda size: None, 16)
    16
    """
    from accelerate.utils import find_executable_batch_size

    size = starting_batch_size

    def halve() -> int:
        nonlocal size
        print(f"{label}: batch size {size} ran out of memory; trying {size // 2}", file=sys.stderr)
        size //= 2
        return size

    def attempt(batch_size: int) -> int:
        probe(batch_size)
        return batch_size

    try:
        chosen = find_executable_batch_size(attempt, starting_batch_size, reduce_batch_size_fn=halve)()
    except RuntimeError as error:
        if "reached zero" not in str(error):
            raise
        raise InputError(f"{label}: even batch size 1 runs out of device memory") from error
    if label:
        print(f"{label}: batch_size='auto' chose {chosen}", file=sys.stderr)
    return chosen
