"""The evaluation runner: the one place where a model meets the data for scoring.

For every example it does exactly two things, each batched and each once:

1. a **teacher-forced pass** over ``chat(user=question, assistant=answer)`` that keeps, for every answer
   token, its log-probability, whether it was the model's argmax, and the mean and standard deviation of the
   log-probability under the model's own next-token distribution. Every probability-based statistic derives
   from these (Prob, loss, exact memorisation, extraction strength, token entropy, MIA scores incl. min-k%++).
2. a **greedy generation** from ``chat(user=question)`` (left padding, batches sorted by expected answer
   length then prompt length, stop at EOS, ``max_new_tokens``) giving the text for every text-based metric
   (ROUGE-L, leakage, degeneration).

Outputs are written per batch as parquet shards with a manifest, so an interrupted run resumes where it
stopped, and any metric can be recomputed later from the folder without the model.

Layout of an output folder (one per model role: ``model``, ``before``, ``retain``)::

    manifest.json                        fingerprint of (model, examples, settings) + completed batches
                                         (manifest-R-of-N.json per process when N processes share the work)
    teacher_forced-00000.parquet ...     example_id, token_logprobs, token_is_argmax, token_mean_logprob,
                                         token_std_logprob
    generation-00000.parquet ...         example_id, generated_text, generated_token_ids
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from medunlearn.chat import render_conversations, render_prompts
from medunlearn.errors import InputError, MedunlearnError, MissingInputError
from medunlearn.evaluation.engines import GreedySettings, HFEngine, make_engine, served_weights_identity
from medunlearn.generation import Decoding, eos_token_ids, model_device, pad_batch, resolve_decoding

if TYPE_CHECKING:  # pandas is imported where a table is made: the commands' parsers read RunnerConfig
    import pandas as pd

TEACHER_FORCED = "teacher_forced"
GENERATION = "generation"
PASSES = (TEACHER_FORCED, GENERATION)
MANIFEST = "manifest.json"
# ``batch_size="auto"`` without CUDA: no out-of-memory search (a CPU run is slow long before memory runs out).
AUTO_BATCH_SIZE_WITHOUT_CUDA = 16
# Bumped whenever the batch plan changes: shards of an older plan must not be resumed into a newer one.
BATCH_PLAN_VERSION = 2


class StaleOutputsError(MedunlearnError, ValueError):
    """An output folder holds results of another model, data or setting (and would be silently mixed)."""


@dataclass
class RunnerConfig:
    """Settings of one runner pass.

    Args:
        batch_size: sequences per forward pass and per ``generate`` call, or ``"auto"``: the largest that
            fits, per pass. On CUDA the pass's first batch (the longest, when sorted) is tried from
            ``max_batch_size`` down, halving on an out-of-memory error (accelerate's
            ``find_executable_batch_size``); without CUDA it starts at :data:`AUTO_BATCH_SIZE_WITHOUT_CUDA`
            (16), still halved on an out-of-memory error; the vLLM engine's generation pass takes 16 as it is
            (its batches are shards only: the server batches on its own). The chosen size is logged, kept in
            the manifest (``batch_sizes``) and reused on resume. The batch size is part of the fingerprint
            (shards are per batch): ``"auto"`` enters it as ``"auto"`` with ``max_batch_size``. Outputs are
            per example and equal for every batch size in exact arithmetic; in float, padding a prompt to
            another batch width can move logits by rounding and, on a near tie, flip a greedy token.
        max_batch_size: where the search of ``batch_size="auto"`` starts on CUDA.
        decoding: the transformers engine's KV cache: ``"dynamic"`` (transformers' default), ``"static"``
            (preallocated, ``cache_implementation="static"``), ``"compiled"`` (static, and the decoding step
            under ``torch.compile`` with mode ``"reduce-overhead"``; CUDA only, refused elsewhere) or
            ``"auto"`` (``"compiled"`` when the model is on CUDA, else ``"dynamic"``). Greedy tokens equal the
            dynamic cache's (``tests/evaluation/test_gpu_decoding.py``). The resolved value enters the
            generation fingerprint when not ``"dynamic"``.
        max_new_tokens: generation stops at EOS or after this many tokens.
        sort_by_length: batch sequences of similar length together (less padding; see
            ``bench/bench_generation_sorting.py``). Results do not depend on it beyond float rounding.
        stop_after_batches: stop after this many *new* batches, both passes counted (simulates an
            interrupted run; rerunning resumes). ``None`` runs to the end.
        progress: show tqdm progress bars.
        share_prompts: score each prompt once in the teacher-forced pass: a question's prompt runs through
            the model once and every answer variant scored after it (the answer, the paraphrase, the
            perturbed answers; TOFU's variant rows with the same question) continues from its KV cache.
            Equal to scoring each full sequence within float rounding (``tests/evaluation/
            test_prompt_sharing.py``); ``False`` scores every sequence whole (the reference path). Part of
            the teacher-forced outputs' fingerprint when on. See ``docs/evaluation.md``, "Prompt sharing",
            and ``bench/bench_prompt_sharing.py``.
        engine: the generation pass's engine: ``"hf"`` (transformers' ``generate``) or ``"vllm"`` (a vLLM
            server, started for the model unless ``vllm_url`` is given; the teacher-forced pass stays on
            transformers). Part of the generation outputs' fingerprint. See ``docs/evaluation.md``,
            "Generation engines", and :mod:`medunlearn.evaluation.engines`.
        vllm_url: a running vLLM server (``http://HOST:PORT/v1``) serving the model under evaluation: one of
            its models must be loaded from the checkpoint's folder, else the run stops before writing
            anything; an in-memory model never goes to it (it generates on transformers).
        vllm_model: the model name to request at ``vllm_url`` (default: the one whose root is the
            checkpoint; a named one must have that root too).
        vllm_python: the Python of a started vLLM server (default ``$MEDUNLEARN_VLLM_PYTHON``, else
            ``.venv-vllm/bin/python``).
        vllm_args: more arguments of a started vLLM server (e.g. ``["--gpu-memory-utilization", "0.5"]``).
    """

    batch_size: int | Literal["auto"] = 16
    max_new_tokens: int = 64
    sort_by_length: bool = True
    stop_after_batches: int | None = None
    progress: bool = True
    share_prompts: bool = True
    engine: Literal["hf", "vllm"] = "hf"
    vllm_url: str | None = None
    vllm_model: str | None = None
    vllm_python: str | None = None
    vllm_args: tuple[str, ...] = ()
    max_batch_size: int = 256
    decoding: Decoding = "dynamic"


ANSWER = "answer"
# Optional example columns holding more answers to score (TOFU layout): one paraphrase, a list of wrong
# answers.
VARIANT_COLUMNS = {"paraphrased_answer": "paraphrased", "perturbed_answers": "perturbed"}


@dataclass
class EncodedExamples:
    """Token ids of every example, made once and shared by both passes.

    Scored sequences are the examples' answers (the first ``len(prompt_ids)``, in example order) followed by
    the answer variants; ``sequence_example`` / ``sequence_variant`` say which example and variant each is.
    """

    prompt_ids: list[list[int]]  # per example: chat(user=question) + generation prompt
    full_ids: list[list[int]]  # per scored sequence: chat(user=question, assistant=answer)
    answer_start: np.ndarray  # index in full_ids of the first answer token (== len of the example's prompt)
    answer_end: np.ndarray  # one past the last answer token (the end-of-turn token included)
    sequence_example: np.ndarray
    sequence_variant: np.ndarray


def answer_variants(examples: pd.DataFrame) -> pd.DataFrame:
    """Extra answers to score, one row each: ``example`` (row position), ``variant``, ``answer``.

    ``paraphrased_answer`` gives variant ``paraphrased``; each item j of ``perturbed_answers`` gives
    ``perturbed_j``. Missing columns or empty values give no rows.
    """
    import pandas as pd

    frames = []
    positions = pd.Series(np.arange(len(examples)), index=examples.index)
    if "paraphrased_answer" in examples:
        texts = examples["paraphrased_answer"]
        keep = texts.notna() & (texts.astype(str) != "")
        frames.append(
            pd.DataFrame({"example": positions[keep], "variant": "paraphrased", "answer": texts[keep]})
        )
    if "perturbed_answers" in examples:
        exploded = examples["perturbed_answers"].explode().dropna()
        exploded = exploded[exploded.astype(str) != ""]
        rank = exploded.groupby(level=0).cumcount()
        frames.append(
            pd.DataFrame(
                {
                    "example": positions[exploded.index].to_numpy(),
                    "variant": "perturbed_" + rank.astype(str).to_numpy(),
                    "answer": exploded.astype(str).to_numpy(),
                }
            )
        )
    if not frames:
        return pd.DataFrame({"example": np.zeros(0, dtype=np.int64), "variant": [], "answer": []})
    return pd.concat(frames, ignore_index=True).astype({"example": np.int64})


def encode_examples(
    tokenizer, questions: Sequence[str], answers: Sequence[str], variants: pd.DataFrame | None = None
) -> EncodedExamples:
    """Render the chat template for all examples and tokenise them in one batched call per view.

    Prompts are tokenised once per example; full sequences once per scored answer (``variants`` from
    ``answer_variants`` add sequences). The answer tokens are those after the generation prompt, up to and
    including the first end-of-sequence token: what the model must emit when it answers. Anything the
    template adds after it (a newline) is not scored.
    """
    questions, answers = list(questions), list(answers)
    sequence_example = np.arange(len(questions))
    sequence_variant = np.full(len(questions), ANSWER, dtype=object)
    if variants is not None and len(variants):
        sequence_example = np.concatenate([sequence_example, variants["example"].to_numpy()])
        sequence_variant = np.concatenate([sequence_variant, variants["variant"].to_numpy(dtype=object)])
        answers = answers + variants["answer"].astype(str).tolist()
    prompt_ids = tokenizer(render_prompts(tokenizer, questions), add_special_tokens=False)["input_ids"]
    sequence_questions = [questions[i] for i in sequence_example]
    full_ids = tokenizer(
        render_conversations(tokenizer, sequence_questions, answers), add_special_tokens=False
    )["input_ids"]
    starts, ends = locate_answers(
        [prompt_ids[i] for i in sequence_example], full_ids, eos_token_ids(tokenizer)
    )
    return EncodedExamples(prompt_ids, full_ids, starts, ends, sequence_example, sequence_variant)


def locate_answers(prompt_ids: list[list[int]], full_ids: list[list[int]], eos_ids: set[int]):
    """Answer span of every example, for all examples at once on the flattened token ids.

    start = len(prompt); end = one past the first EOS at or after start (the sequence end if there is none).
    Raises if a prompt is not a prefix of its full sequence (the template then renders the question
    differently with an answer, and the answer tokens cannot be located).
    """
    if not full_ids:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    full_lengths = np.fromiter((len(ids) for ids in full_ids), dtype=np.int64, count=len(full_ids))
    starts = np.fromiter((len(ids) for ids in prompt_ids), dtype=np.int64, count=len(prompt_ids))
    offsets = np.concatenate([[0], np.cumsum(full_lengths)[:-1]])
    flat = np.fromiter((t for ids in full_ids for t in ids), dtype=np.int64, count=int(full_lengths.sum()))
    flat_prompts = np.fromiter(
        (t for ids in prompt_ids for t in ids), dtype=np.int64, count=int(starts.sum())
    )
    too_long = np.flatnonzero(starts > full_lengths)
    # Position of every prompt token inside the flat full sequences.
    prompt_positions = (
        np.repeat(offsets, starts)
        + np.arange(len(flat_prompts))
        - np.repeat(np.cumsum(starts) - starts, starts)
    )
    mismatch = np.zeros(len(full_ids), dtype=bool)
    if len(too_long) == 0:
        differs = flat[prompt_positions] != flat_prompts
        mismatch = (
            np.bincount(np.repeat(np.arange(len(full_ids)), starts), weights=differs, minlength=len(full_ids))
            > 0
        )
    bad = too_long if len(too_long) else np.flatnonzero(mismatch)
    if len(bad):
        raise InputError(
            f"example {int(bad[0])}: the chat template renders the question differently with and without the "
            "answer; the answer tokens cannot be located"
        )
    # First EOS at or after each start: the next EOS position seen from every token, read at the start
    # (a sentinel past the end answers for a start at the very end). An EOS found beyond the sequence's own
    # end belongs to the next sequence: then the answer runs to the end.
    is_eos = np.isin(flat, list(eos_ids))
    next_eos = np.where(is_eos, np.arange(len(flat)), len(flat))
    next_eos = np.append(np.minimum.accumulate(next_eos[::-1])[::-1], len(flat))
    sequence_end = offsets + full_lengths
    first_eos = next_eos[offsets + starts]
    ends = np.where(first_eos < sequence_end, first_eos + 1, sequence_end) - offsets
    return starts, ends


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


def answer_token_statistics(
    model, sequences: list[list[int]], answer_start, answer_end, pad_token_id: int
) -> dict:
    """Teacher-forced statistics of the answer tokens of a batch (right padding, so no position moves).

    Returns a dict of lists (one numpy array per sequence, one value per answer token):
    ``token_logprobs`` log p(y_t | y_<t), ``token_is_argmax`` y_t == argmax p(· | y_<t),
    ``token_mean_logprob`` E_{v~p}[log p(v)] (the negative entropy) and ``token_std_logprob``
    sqrt(Var_{v~p}[log p(v)]) — the two moments min-k%++ normalises by.
    """
    import torch

    input_ids, attention_mask = pad_batch(sequences, pad_token_id, "right")
    width = input_ids.shape[1]
    positions = torch.arange(width - 1)
    # Logits at position t predict token t + 1: the answer token j is scored by the logits at j - 1.
    start = torch.as_tensor(np.asarray(answer_start)) - 1
    end = torch.as_tensor(np.asarray(answer_end)) - 1
    scored = (positions[None, :] >= start[:, None]) & (positions[None, :] < end[:, None])
    device = model_device(model)
    with torch.inference_mode():
        logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)).logits
        logits = logits[:, :-1][scored.to(device)]
        targets = input_ids[:, 1:][scored].to(device)
        return _token_statistics(logits, targets, scored.sum(1).tolist())


def _token_statistics(logits, targets, counts: list[int]) -> dict:
    """The four per-token columns from the logits that predict each answer token (rows in sequence order,
    ``counts[i]`` of them for sequence ``i``)."""
    logits = logits.float()
    logprobs = logits.log_softmax(-1)
    token_logprobs = logprobs.gather(1, targets[:, None]).squeeze(1)
    is_argmax = logits.argmax(-1) == targets
    probs = logprobs.exp()
    mean = (probs * logprobs).sum(-1)
    # E[(log p - mean)^2], not E[(log p)^2] - mean^2: the difference of two near-equal float32 sums loses the
    # variance of a peaked distribution to rounding (and its square root amplifies the error).
    variance = (probs * (logprobs - mean[:, None]).square()).sum(-1)
    std = variance.sqrt()
    columns = {
        "token_logprobs": token_logprobs,
        "token_is_argmax": is_argmax,
        "token_mean_logprob": mean,
        "token_std_logprob": std,
    }
    return {
        name: list(np.split(values.cpu().numpy(), np.cumsum(counts)[:-1])) for name, values in columns.items()
    }


def shared_prompt_statistics(
    model, sequences: list[list[int]], answer_start, answer_end, pad_token_id: int
) -> dict:
    """:func:`answer_token_statistics` with each distinct prompt run through the model once.

    The batch's distinct prompts (``sequence[:answer_start]``) go through one forward pass, left padded with
    position ids counted from each prompt's first real token, keeping the KV cache and only the last
    position's logits (which predict the first answer token). The cache is gathered over the sequences
    (``Cache.batch_select_indices``: row i gets its prompt's keys and values), and one more pass runs
    every sequence's answer tokens but the last, right padded, at positions ``len(prompt) + j``, attending to
    its prompt (the prompt's padding masked). Each answer token is thus scored from the same context as in
    the whole-sequence pass; the values agree within float rounding. Tokens after ``answer_end`` (what the
    template writes after the end-of-turn token) are never run: nothing reads their logits.
    """
    import torch

    answer_start = np.asarray(answer_start, dtype=np.int64)
    answer_end = np.asarray(answer_end, dtype=np.int64)
    prompts: dict[tuple[int, ...], int] = {}
    prompt_of = np.fromiter(
        (prompts.setdefault(tuple(s[:start]), len(prompts)) for s, start in zip(sequences, answer_start)),
        dtype=np.int64,
        count=len(sequences),
    )
    prompt_ids, prompt_mask = pad_batch(list(prompts), pad_token_id, "left")
    counts = answer_end - answer_start
    device = model_device(model)
    with torch.inference_mode():
        prompt_positions = (prompt_mask.cumsum(1) - 1).clamp_min(0)
        output = model(
            input_ids=prompt_ids.to(device),
            attention_mask=prompt_mask.to(device),
            position_ids=prompt_positions.to(device),
            use_cache=True,
            logits_to_keep=1,
        )
        rows = torch.as_tensor(prompt_of, device=device)
        first = output.logits[:, -1][rows]  # predicts answer token 0 of every sequence
        continuations = [s[start : end - 1] for s, start, end in zip(sequences, answer_start, answer_end)]
        width = max((len(c) for c in continuations), default=0)
        if width:
            cache = output["cache"]  # transformers 5.24: `cache` (was `past_key_values`)
            cache.batch_select_indices(rows)
            input_ids, answer_mask = pad_batch(continuations, pad_token_id, "right")
            positions = torch.as_tensor(answer_start)[:, None] + torch.arange(width)[None, :]
            attention_mask = torch.cat([prompt_mask[torch.as_tensor(prompt_of)], answer_mask], dim=1)
            rest = model(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                position_ids=positions.to(device),
                cache=cache,
                use_cache=False,
            ).logits
            logits = torch.cat([first[:, None], rest], dim=1)
        else:
            logits = first[:, None]
        scored = torch.arange(logits.shape[1])[None, :] < torch.as_tensor(counts)[:, None]
        # The mask picks each row's first counts[i] positions, row by row: the answers' tokens concatenated.
        targets = torch.tensor(
            [t for s, a, b in zip(sequences, answer_start, answer_end) for t in s[a:b]], dtype=torch.long
        )
        return _token_statistics(logits[scored.to(device)], targets.to(device), counts.tolist())


def weights_checksum(model) -> str:
    """A cheap checksum of the weights: a strided sample of every parameter (about 4k values each), summed.

    Two different checkpoints saved to the same folder, or a model trained in place, get different checksums,
    so their outputs are never mixed; reading a sample instead of every weight keeps it fast for large models.
    """
    import torch

    values = []
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            flat = parameter.detach().reshape(-1)
            stride = max(1, flat.numel() // 4096)
            values.append(f"{name}:{tuple(parameter.shape)}:{flat[::stride].double().sum().item():.12e}")
    return hashlib.sha256("|".join(values).encode()).hexdigest()[:16]


# Settings that say where or how a vLLM server runs, not what it computes: never part of a fingerprint (the
# weights it serves are, as ``served_weights``).
ENGINE_LOCATION = ("engine", "vllm_url", "vllm_model", "vllm_python", "vllm_args")


def outputs_fingerprint(
    model_id: str,
    examples: pd.DataFrame,
    config: RunnerConfig,
    weights: str = "",
    passes: Sequence[str] = PASSES,
    served_weights: str | None = None,
) -> str:
    """Hash of what the outputs depend on. Batch plan settings are included because shards are per batch.

    ``config.engine`` enters the hash when ``passes`` include the generation pass and it is not ``"hf"`` (so
    transformers-engine fingerprints stay those of earlier versions, and teacher-forced outputs, always from
    transformers, are shared by both engines). ``config.share_prompts`` enters it likewise only when it is on
    and ``passes`` include the teacher-forced pass (its batches differ; the whole-sequence path's
    fingerprints, and generation-only folders', stay those of earlier versions). ``config.decoding``
    (resolved, not ``"auto"``) enters it for the hf engine's generation when not ``"dynamic"``, and
    ``max_batch_size`` only with ``batch_size="auto"``, for the same reason. With the vLLM engine's
    generation, ``served_weights`` records which weights the server generates from (the engine's
    ``served_weights()``; by default :func:`~medunlearn.evaluation.engines.served_weights_identity` of
    ``model_id``, the folder a server is started from or that a server at a URL must list as its root).
    """
    digest = hashlib.sha256()
    ignored = (
        "stop_after_batches",
        "progress",
        "share_prompts",
        "max_batch_size",
        "decoding",
        *ENGINE_LOCATION,
    )
    settings = {k: v for k, v in asdict(config).items() if k not in ignored}
    settings["batch_plan"] = BATCH_PLAN_VERSION
    if config.batch_size == "auto":
        settings["max_batch_size"] = config.max_batch_size
    if GENERATION in passes and config.engine == "hf" and config.decoding != "dynamic":
        settings["decoding"] = config.decoding
    if TEACHER_FORCED in passes and config.share_prompts:
        settings["share_prompts"] = True
    if GENERATION in passes and config.engine != "hf":
        settings["engine"] = config.engine
        settings["served_weights"] = served_weights or served_weights_identity(model_id)
    digest.update(
        json.dumps({"model": model_id, "weights": weights, "settings": settings}, sort_keys=True).encode()
    )
    for column in ("example_id", "question", "answer", *[c for c in VARIANT_COLUMNS if c in examples]):
        digest.update("\x1f".join(examples[column].astype(str)).encode())
    return digest.hexdigest()


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


def _write_json_atomic(path: Path, payload: dict) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(payload, indent=2))
    os.replace(temporary, path)


def manifest_name(process_index: int = 0, num_processes: int = 1) -> str:
    """One manifest per process, so processes sharing a folder never write the same file."""
    return MANIFEST if num_processes == 1 else f"manifest-{process_index}-of-{num_processes}.json"


def _manifests(out_dir: Path) -> dict[Path, dict]:
    return {path: json.loads(path.read_text()) for path in sorted(out_dir.glob("manifest*.json"))}


def _stale(manifests: dict[Path, dict], fingerprint: str) -> list[Path]:
    return [path for path, manifest in manifests.items() if manifest.get("fingerprint") != fingerprint]


def _read_manifest(
    out_dir: Path, fingerprint: str, model_id: str, overwrite: bool | str, own: str
) -> tuple[dict, dict]:
    """This process's manifest, and the batches completed by any process (all manifests must match).

    ``overwrite``: True discards what is there; ``"stale"`` discards it only if some manifest has another
    fingerprint (a folder shared by several evaluations keeps outputs that match); False raises on a mismatch.
    """
    fresh = {
        "fingerprint": fingerprint,
        "model": model_id,
        "completed": {name: [] for name in PASSES},
        "batches": {},
    }
    if overwrite is True or (overwrite == "stale" and _stale(_manifests(out_dir), fingerprint)):
        # Only this process's manifest goes (with a single process, every manifest and shard goes): other
        # processes of the same run may be writing theirs right now.
        for path in [out_dir / own] if own != MANIFEST else list(out_dir.glob("manifest*.json")):
            path.unlink(missing_ok=True)
        if own == MANIFEST:
            for shard in out_dir.glob("*.parquet"):
                shard.unlink()
    manifests = _manifests(out_dir)
    stale = _stale(manifests, fingerprint)
    if stale:
        raise StaleOutputsError(
            f"{out_dir} holds outputs of another model, data or setting "
            f"(model {manifests[stale[0]].get('model')!r}, "
            f"{stale[0].name}); use a new output folder or overwrite=True (--overwrite)"
        )
    done = {name: set().union(*(m["completed"].get(name, []) for m in manifests.values())) for name in PASSES}
    return manifests.get(out_dir / own, fresh), done


def _engine_fingerprint(config, engine, model_id, examples, weights, passes) -> tuple[RunnerConfig, str]:
    """The settings as the engine that generates runs them, and the outputs' fingerprint. At a URL, asking
    the engine which weights it serves checks that the server serves the checkpoint: a mismatch stops the
    run here, before anything is written."""
    if engine.name != config.engine:
        config = replace(config, engine=engine.name)  # the engine that generates is the one fingerprinted
    if getattr(engine, "decoding", config.decoding) != config.decoding:
        config = replace(config, decoding=engine.decoding)
    served = getattr(engine, "served_weights", None) if GENERATION in passes else None
    served_weights = served() if callable(served) else None
    return config, outputs_fingerprint(model_id, examples, config, weights, passes, served_weights)


def run_model(
    model,
    tokenizer,
    examples: pd.DataFrame,
    out_dir: str | Path,
    config: RunnerConfig | None = None,
    *,
    model_id: str | None = None,
    passes: Sequence[str] = PASSES,
    overwrite: bool | str = False,
    process_index: int = 0,
    num_processes: int = 1,
    weights: str | None = None,
    engine=None,
) -> bool:
    """Run the teacher-forced and generation passes over ``examples`` and write them to ``out_dir``.

    Resumes from the folder's manifests if they exist (same fingerprint). With ``num_processes`` > 1 (data
    parallel, e.g. under ``accelerate launch``), process ``process_index`` runs the batches ``k`` with
    ``k % num_processes == process_index`` not yet done by anyone, and keeps its own manifest; the batch plan
    does not depend on the number of processes, so a run can resume with another one.
    ``overwrite``: True discards the folder's outputs first; ``"stale"`` only when they belong to another
    fingerprint (model, weights, data or settings), so matching outputs are reused.
    ``weights``: the digest of the weights the model was loaded from, unchanged
    (:func:`medunlearn.utils.digest.folder_weights_digest` of its folder); ``None`` hashes the loaded tensors
    (:func:`weights_checksum`: a model built or changed in memory).
    ``engine``: the generation pass's engine (:mod:`medunlearn.evaluation.engines`), owned by the caller, who
    closes it; ``None`` makes the one ``config.engine`` names for this model object and closes it here.
    Returns True when every batch of this process's share is done (False when ``config.stop_after_batches``
    stopped it early).
    """
    import pandas as pd
    from tqdm.auto import tqdm

    config = config or RunnerConfig()
    out_dir = Path(out_dir)
    model_id = model_id or str(
        getattr(getattr(model, "config", None), "name_or_path", "") or "in-memory model"
    )
    if config.batch_size == "auto" and num_processes > 1:
        raise InputError(
            "batch_size='auto' needs a single process: each process would choose its own batch plan; "
            "pass a number (--batch-size N)"
        )
    config = replace(config, decoding=resolve_decoding(config.decoding, model_device(model)))
    owned_engine = engine is None
    engine = engine or (make_engine(config, model) if GENERATION in passes else HFEngine(model))
    try:
        config, fingerprint = _engine_fingerprint(
            config, engine, model_id, examples, weights or weights_checksum(model), passes
        )
    except BaseException:
        if owned_engine:
            engine.close()
        raise
    out_dir.mkdir(parents=True, exist_ok=True)
    own = manifest_name(process_index, num_processes)
    manifest, done_anywhere = _read_manifest(out_dir, fingerprint, model_id, overwrite, own)

    encoded = encode_examples(tokenizer, examples["question"], examples["answer"], answer_variants(examples))
    example_ids = examples["example_id"].to_numpy()
    sequence_ids = example_ids[encoded.sequence_example]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos_ids = eos_token_ids(tokenizer, model)
    was_training = model.training
    model.eval()
    finished = True
    budget = config.stop_after_batches
    reused = []  # "pass n/n batches" of the passes whose share was all in the folder already
    generated = None
    manifest.setdefault("batch_sizes", {})

    def run_pass(pass_name: str, batch_size: int, first_only: bool = False) -> None:
        """Run this process's batches of one pass not yet done (only the first with ``first_only``: the
        probe of ``batch_size="auto"``), writing a shard and the manifest after each."""
        nonlocal budget, finished, generated
        if pass_name == TEACHER_FORCED:
            batches = teacher_forced_batches(encoded, batch_size, config.sort_by_length, config.share_prompts)
        else:
            batches = generation_batches(encoded, batch_size, config.sort_by_length)
        manifest["batches"][pass_name] = len(batches)
        manifest["batch_sizes"][pass_name] = batch_size
        done = done_anywhere[pass_name]
        share = range(process_index, len(batches), num_processes)
        todo = [k for k in share if k not in done]
        if share and not todo and not first_only:
            reused.append(f"{pass_name} {len(share)}/{len(share)} batches")
        if first_only:
            todo = todo[:1]
        if budget is not None and len(todo) > budget:
            todo = todo[:budget]
            finished = finished and first_only  # a probe cut by the budget leaves the decision to the pass
        if pass_name == GENERATION:
            # The engine works ahead (a server gets every batch's prompts at once) and hands the batches
            # back in this order.
            generated = engine.generate(
                [[encoded.prompt_ids[i] for i in batches[k]] for k in todo],
                GreedySettings(pad_id, sorted(eos_ids), config.max_new_tokens),
            )
        try:
            # No bar for a pass with nothing to run: a resumed evaluation printed one empty bar per pass.
            for k in tqdm(
                todo,
                desc=f"{out_dir.name}: {pass_name}",
                disable=not config.progress or not todo or first_only,
                unit="batch",
            ):
                index = batches[k]
                if pass_name == TEACHER_FORCED:
                    score = shared_prompt_statistics if config.share_prompts else answer_token_statistics
                    columns = {
                        "example_id": sequence_ids[index],
                        "variant": encoded.sequence_variant[index],
                        **score(
                            model,
                            [encoded.full_ids[i] for i in index],
                            encoded.answer_start[index],
                            encoded.answer_end[index],
                            pad_id,
                        ),
                    }
                else:
                    tokens = next(generated)
                    columns = {
                        "example_id": example_ids[index],
                        "generated_text": tokenizer.batch_decode(tokens, skip_special_tokens=True),
                        "generated_token_ids": tokens,
                    }
                shard = pd.DataFrame(columns)
                shard.to_parquet(out_dir / f"{pass_name}-{k:05d}.parquet", index=False)
                manifest["completed"][pass_name].append(k)
                _write_json_atomic(out_dir / own, manifest)
        finally:
            if generated is not None:
                generated.close()  # what the engine still has in flight is dropped (early stop, an error)
                generated = None
        done.update(todo)
        if budget is not None:
            budget -= len(todo)

    try:
        for pass_name in passes:
            batch_size = config.batch_size
            if batch_size == "auto" and pass_name == GENERATION and engine.name != "hf":
                batch_size = AUTO_BATCH_SIZE_WITHOUT_CUDA  # shards only: the server batches on its own
            elif batch_size == "auto":
                batch_size = manifest["batch_sizes"].get(pass_name) or auto_batch_size(
                    lambda size, name=pass_name: run_pass(name, size, first_only=True),
                    config.max_batch_size
                    if model_device(model).type == "cuda"
                    else AUTO_BATCH_SIZE_WITHOUT_CUDA,
                    f"{out_dir.name}: {pass_name}",
                )
            try:
                run_pass(pass_name, batch_size)
            except RuntimeError as error:
                if config.batch_size == "auto" and should_reduce_batch_size(error):
                    raise InputError(
                        f"{out_dir.name}: {pass_name}: batch size {batch_size} (chosen by batch_size='auto' "
                        "on the pass's first batch) ran out of device memory on a later batch; pass a "
                        "smaller --max-batch-size or a fixed --batch-size"
                    ) from error
                raise
    finally:
        model.train(was_training)
        if owned_engine:
            engine.close()
    if reused and config.progress:
        print(f"{out_dir.name}: reused cached outputs in {out_dir}: {', '.join(reused)}", file=sys.stderr)
    return finished


def outputs_complete(out_dir: str | Path, passes: Sequence[str] = PASSES) -> bool:
    """Whether every batch of every pass in ``passes`` is done, by whichever process ran it."""
    manifests = list(_manifests(Path(out_dir)).values()) if Path(out_dir).is_dir() else []
    for pass_name in passes:
        planned = {m["batches"].get(pass_name) for m in manifests} - {None}
        completed = set().union(*(m["completed"].get(pass_name, []) for m in manifests))
        if len(planned) != 1 or completed != set(range(planned.pop())):
            return False
    return True


def outputs_current(out_dir: str | Path, fingerprint: str, passes: Sequence[str] = PASSES) -> bool:
    """Whether ``out_dir`` already holds every batch of ``passes`` for ``fingerprint``: nothing is left to
    run, so a model named by its folder need not even be loaded (its digest gives the fingerprint)."""
    out_dir = Path(out_dir)
    manifests = _manifests(out_dir) if out_dir.is_dir() else {}
    return bool(manifests) and not _stale(manifests, fingerprint) and outputs_complete(out_dir, passes)


def _read_pass(out_dir: Path, pass_name: str) -> pd.DataFrame | None:
    """Every completed shard of one pass, concatenated (None when there is none)."""
    import pandas as pd

    manifests = _manifests(out_dir) if out_dir.is_dir() else {}
    if not manifests:
        raise MissingInputError(f"{out_dir} has no {MANIFEST}: not a runner output folder")
    if len({m.get("fingerprint") for m in manifests.values()}) > 1:
        raise StaleOutputsError(f"{out_dir} mixes manifests of different runs")
    completed = set().union(*(m["completed"].get(pass_name, []) for m in manifests.values()))
    shards = [out_dir / f"{pass_name}-{k:05d}.parquet" for k in sorted(completed)]
    return pd.concat([pd.read_parquet(s) for s in shards], ignore_index=True) if shards else None


def read_outputs(out_dir: str | Path, example_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """All per-example outputs of a folder, one row per example: the teacher-forced statistics of the answer
    and the generation, joined on ``example_id`` (answer variants: see ``read_answer_variants``).

    With ``example_ids`` the rows come back in that order, and a missing example raises an error naming it.
    """
    import pandas as pd

    out_dir = Path(out_dir)
    tables = []
    for pass_name in PASSES:
        table = _read_pass(out_dir, pass_name)
        if table is None:
            continue
        if "variant" in table:
            table = table[table["variant"] == ANSWER].drop(columns="variant")
        tables.append(table.set_index("example_id"))
    if not tables:
        raise MissingInputError(f"{out_dir} holds no completed batches")
    outputs = tables[0].join(tables[1:], how="outer") if len(tables) > 1 else tables[0]
    if example_ids is not None:
        missing = pd.Index(example_ids).difference(outputs.index)
        if len(missing):
            raise MissingInputError(f"{out_dir} has no outputs for example {missing[0]!r} (run incomplete?)")
        outputs = outputs.loc[list(example_ids)]
    return outputs.reset_index()


def read_answer_variants(out_dir: str | Path) -> pd.DataFrame:
    """Teacher-forced statistics of the answer variants (paraphrased / perturbed_j), one row per variant."""
    import pandas as pd

    table = _read_pass(Path(out_dir), TEACHER_FORCED)
    if table is None or "variant" not in table:
        return pd.DataFrame(columns=["example_id", "variant"])
    return table[table["variant"] != ANSWER].reset_index(drop=True)
