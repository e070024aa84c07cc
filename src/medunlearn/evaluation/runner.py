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
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.chat import render_conversations, render_prompts
from medunlearn.errors import InputError, MedunlearnError, MissingInputError
from medunlearn.generation import eos_token_ids, greedy_generate, model_device, pad_batch

TEACHER_FORCED = "teacher_forced"
GENERATION = "generation"
PASSES = (TEACHER_FORCED, GENERATION)
MANIFEST = "manifest.json"
# Bumped whenever the batch plan changes: shards of an older plan must not be resumed into a newer one.
BATCH_PLAN_VERSION = 2


class StaleOutputsError(MedunlearnError, ValueError):
    """An output folder holds results of another model, data or setting (and would be silently mixed)."""


@dataclass
class RunnerConfig:
    """Settings of one runner pass.

    Args:
        batch_size: sequences per forward pass and per ``generate`` call.
        max_new_tokens: generation stops at EOS or after this many tokens.
        sort_by_length: batch sequences of similar length together (less padding; see
            ``bench/bench_generation_sorting.py``). Results do not depend on it beyond float rounding.
        stop_after_batches: stop after this many *new* batches, both passes counted (simulates an
            interrupted run; rerunning resumes). ``None`` runs to the end.
        progress: show tqdm progress bars.
    """

    batch_size: int = 16
    max_new_tokens: int = 64
    sort_by_length: bool = True
    stop_after_batches: int | None = None
    progress: bool = True


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
        logits = logits[:, :-1][scored.to(device)].float()
        targets = input_ids[:, 1:][scored].to(device)
        logprobs = logits.log_softmax(-1)
        token_logprobs = logprobs.gather(1, targets[:, None]).squeeze(1)
        is_argmax = logits.argmax(-1) == targets
        probs = logprobs.exp()
        mean = (probs * logprobs).sum(-1)
        variance = (probs * logprobs.square()).sum(-1) - mean.square()
        std = variance.clamp_min(0).sqrt()
    counts = scored.sum(1).tolist()
    columns = {
        "token_logprobs": token_logprobs,
        "token_is_argmax": is_argmax,
        "token_mean_logprob": mean,
        "token_std_logprob": std,
    }
    return {
        name: list(np.split(values.cpu().numpy(), np.cumsum(counts)[:-1])) for name, values in columns.items()
    }


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


def outputs_fingerprint(
    model_id: str, examples: pd.DataFrame, config: RunnerConfig, weights: str = ""
) -> str:
    """Hash of what the outputs depend on. Batch plan settings are included because shards are per batch."""
    digest = hashlib.sha256()
    settings = {k: v for k, v in asdict(config).items() if k not in ("stop_after_batches", "progress")}
    settings["batch_plan"] = BATCH_PLAN_VERSION
    digest.update(
        json.dumps({"model": model_id, "weights": weights, "settings": settings}, sort_keys=True).encode()
    )
    for column in ("example_id", "question", "answer", *[c for c in VARIANT_COLUMNS if c in examples]):
        digest.update("\x1f".join(examples[column].astype(str)).encode())
    return digest.hexdigest()


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
) -> bool:
    """Run the teacher-forced and generation passes over ``examples`` and write them to ``out_dir``.

    Resumes from the folder's manifests if they exist (same fingerprint). With ``num_processes`` > 1 (data
    parallel, e.g. under ``accelerate launch``), process ``process_index`` runs the batches ``k`` with
    ``k % num_processes == process_index`` not yet done by anyone, and keeps its own manifest; the batch plan
    does not depend on the number of processes, so a run can resume with another one.
    ``overwrite``: True discards the folder's outputs first; ``"stale"`` only when they belong to another
    fingerprint (model, weights, data or settings), so matching outputs are reused.
    Returns True when every batch of this process's share is done (False when ``config.stop_after_batches``
    stopped it early).
    """
    from tqdm.auto import tqdm

    config = config or RunnerConfig()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_id = model_id or str(
        getattr(getattr(model, "config", None), "name_or_path", "") or "in-memory model"
    )
    fingerprint = outputs_fingerprint(model_id, examples, config, weights_checksum(model))
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
    try:
        for pass_name in passes:
            if pass_name == TEACHER_FORCED:
                batches = plan_batches(
                    [len(s) for s in encoded.full_ids], config.batch_size, config.sort_by_length
                )
            else:
                batches = generation_batches(encoded, config.batch_size, config.sort_by_length)
            manifest["batches"][pass_name] = len(batches)
            done = done_anywhere[pass_name]
            share = range(process_index, len(batches), num_processes)
            todo = [k for k in share if k not in done]
            if share and not todo:
                reused.append(f"{pass_name} {len(share)}/{len(share)} batches")
            if budget is not None:
                if len(todo) > budget:
                    todo, finished = todo[:budget], False
                budget -= len(todo)
            # No bar for a pass with nothing to run: a resumed evaluation printed one empty bar per pass.
            for k in tqdm(
                todo,
                desc=f"{out_dir.name}: {pass_name}",
                disable=not config.progress or not todo,
                unit="batch",
            ):
                index = batches[k]
                if pass_name == TEACHER_FORCED:
                    columns = {
                        "example_id": sequence_ids[index],
                        "variant": encoded.sequence_variant[index],
                        **answer_token_statistics(
                            model,
                            [encoded.full_ids[i] for i in index],
                            encoded.answer_start[index],
                            encoded.answer_end[index],
                            pad_id,
                        ),
                    }
                else:
                    tokens = greedy_generate(
                        model, [encoded.prompt_ids[i] for i in index], pad_id, eos_ids, config.max_new_tokens
                    )
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
        model.train(was_training)
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


def _read_pass(out_dir: Path, pass_name: str) -> pd.DataFrame | None:
    """Every completed shard of one pass, concatenated (None when there is none)."""
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
    table = _read_pass(Path(out_dir), TEACHER_FORCED)
    if table is None or "variant" not in table:
        return pd.DataFrame(columns=["example_id", "variant"])
    return table[table["variant"] != ANSWER].reset_index(drop=True)
