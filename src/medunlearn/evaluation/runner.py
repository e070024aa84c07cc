"""The evaluation runner: the one place where a model meets the data for scoring.

For every example it does exactly two things, each batched and each once:

1. a **teacher-forced pass** over ``chat(user=question, assistant=answer)`` that keeps, for every answer
   token, its log-probability, whether it was the model's argmax, and the mean and standard deviation of the
   log-probability under the model's own next-token distribution (:mod:`.teacher_forcing`). Every
   probability-based statistic derives from these (Prob, loss, exact memorisation, extraction strength, token
   entropy, MIA scores incl. min-k%++).
2. a **greedy generation** from ``chat(user=question)`` (left padding, batches sorted by expected answer
   length then prompt length, stop at EOS, ``max_new_tokens``) giving the text for every text-based metric
   (ROUGE-L, leakage, degeneration), on the engine of :mod:`.engines`.

Outputs are written per batch as parquet shards with a manifest, so an interrupted run resumes where it
stopped, and any metric can be recomputed later from the folder without the model (the folder's format:
:mod:`.outputs_folder`). The jobs live in one module each: :mod:`.encoding` (chat template and token ids),
:mod:`.batching` (batch plans, the batch size search), :mod:`.teacher_forcing` (the model's math),
:mod:`.outputs_folder` (fingerprint, manifests, read-back), :mod:`.settings`; this module runs them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from medunlearn.errors import InputError
from medunlearn.evaluation.batching import (
    BATCH_PLAN_VERSION,
    auto_batch_size,
    generation_batches,
    generation_order_key,
    padded_tokens,
    plan_batches,
    prompt_groups,
    should_reduce_batch_size,
    teacher_forced_batches,
)
from medunlearn.evaluation.encoding import (
    ANSWER,
    VARIANT_COLUMNS,
    EncodedExamples,
    answer_variants,
    encode_examples,
    locate_answers,
)
from medunlearn.evaluation.engines import GreedySettings, engine_for
from medunlearn.evaluation.outputs_folder import (
    GENERATION,
    MANIFEST,
    PASSES,
    TEACHER_FORCED,
    StaleOutputsError,
    manifest_name,
    open_manifest,
    outputs_complete,
    outputs_current,
    outputs_fingerprint,
    read_answer_variants,
    read_outputs,
    shard_path,
    weights_checksum,
    write_manifest,
)
from medunlearn.evaluation.settings import AUTO_BATCH_SIZE_WITHOUT_CUDA, Overwrite, RunnerConfig
from medunlearn.evaluation.teacher_forcing import answer_token_statistics, shared_prompt_statistics
from medunlearn.generation import eos_token_ids, model_device

if TYPE_CHECKING:  # pandas is imported where a table is made: the commands' parsers read RunnerConfig
    import pandas as pd


@dataclass
class RunOptions:
    """Which outputs :func:`run_model` makes, and where this process stands among those sharing the work.

    Args:
        model_id: the model's name in the fingerprint and manifest (default: its ``name_or_path``, else
            ``"in-memory model"``).
        passes: the passes to run (:data:`PASSES`).
        overwrite: what to do with outputs already in the folder (:class:`~.settings.Overwrite`; ``True`` /
            ``False`` are ``ALL`` / ``KEEP``).
        process_index, num_processes: data parallel (e.g. under ``accelerate launch``): process
            ``process_index`` runs the batches ``k`` with ``k % num_processes == process_index`` not yet done
            by anyone, and keeps its own manifest.
        weights: the digest of the weights the model was loaded from, unchanged
            (:func:`medunlearn.utils.digest.folder_weights_digest` of its folder); ``None`` hashes the loaded
            tensors (:func:`weights_checksum`: a model built or changed in memory).
        engine: the generation pass's engine (:mod:`medunlearn.evaluation.engines`), owned by the caller, who
            closes it; ``None`` makes the one the config names for this model object and closes it.
    """

    model_id: str | None = None
    passes: Sequence[str] = PASSES
    overwrite: bool | str | Overwrite = Overwrite.KEEP
    process_index: int = 0
    num_processes: int = 1
    weights: str | None = None
    engine: object = None


def run_model(
    model,
    tokenizer,
    examples: pd.DataFrame,
    out_dir: str | Path,
    config: RunnerConfig | None = None,
    **options,
) -> bool:
    """Run the teacher-forced and generation passes over ``examples`` and write them to ``out_dir``.

    ``options`` are :class:`RunOptions`' fields. Resumes from the folder's manifests if they exist (same
    fingerprint); the batch plan does not depend on the number of processes, so a run can resume with another
    one. Returns True when every batch of this process's share is done (False when
    ``config.stop_after_batches`` stopped it early).
    """
    config = config or RunnerConfig()
    options = RunOptions(**options)
    if config.batch_size == "auto" and options.num_processes > 1:
        raise InputError(
            "batch_size='auto' needs a single process: each process would choose its own batch plan; "
            "pass a number (--batch-size N)"
        )
    model_id = options.model_id or str(
        getattr(getattr(model, "config", None), "name_or_path", "") or "in-memory model"
    )
    owned = options.engine is None
    engine = options.engine or engine_for(config, model, None, GENERATION in options.passes)
    try:
        # At a URL, asking the engine which weights it serves checks that the server serves the checkpoint:
        # a mismatch stops the run here, before anything is written.
        generator = engine.identity() if GENERATION in options.passes else {}
        fingerprint = outputs_fingerprint(
            model_id,
            examples,
            config,
            options.weights or weights_checksum(model),
            options.passes,
            generator=generator,
        )
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        own = manifest_name(options.process_index, options.num_processes)
        manifest, done = open_manifest(out_dir, fingerprint, model_id, Overwrite.of(options.overwrite), own)
        run = _ModelRun(model, tokenizer, examples, out_dir, config, options, engine, manifest, done, own)
        return run.all_passes()
    finally:
        if owned:
            engine.close()


@dataclass
class _ModelRun:
    """One :func:`run_model` call once its folder is open: the encoded examples, the manifest it extends,
    and the batch budget left (``config.stop_after_batches``)."""

    model: object
    tokenizer: object
    examples: pd.DataFrame
    out_dir: Path
    config: RunnerConfig
    options: RunOptions
    engine: object
    manifest: dict
    done: dict[str, set[int]]  # batches completed by any process, per pass
    own: str  # this process's manifest file
    finished: bool = True
    reused: list[str] = field(default_factory=list)  # "pass n/n batches" found in the folder already

    def __post_init__(self):
        self.encoded = encode_examples(
            self.tokenizer, self.examples["question"], self.examples["answer"], answer_variants(self.examples)
        )
        self.example_ids = self.examples["example_id"].to_numpy()
        self.sequence_ids = self.example_ids[self.encoded.sequence_example]
        tokenizer = self.tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos_ids = eos_token_ids(tokenizer, self.model)
        self.budget = self.config.stop_after_batches

    def all_passes(self) -> bool:
        was_training = self.model.training
        self.model.eval()
        try:
            for pass_name in self.options.passes:
                self._one_pass(pass_name)
        finally:
            self.model.train(was_training)
        if self.reused and self.config.progress:
            print(
                f"{self.out_dir.name}: reused cached outputs in {self.out_dir}: {', '.join(self.reused)}",
                file=sys.stderr,
            )
        return self.finished

    def _one_pass(self, pass_name: str) -> None:
        batch_size = self._batch_size(pass_name)
        try:
            plan, todo = self._todo(pass_name, batch_size)
            if self.budget is not None and len(todo) > self.budget:
                todo, self.finished = todo[: self.budget], False
            self._run_batches(pass_name, plan, todo, progress=self.config.progress)
        except RuntimeError as error:
            if self.config.batch_size == "auto" and should_reduce_batch_size(error):
                raise InputError(
                    f"{self.out_dir.name}: {pass_name}: batch size {batch_size} (chosen by batch_size='auto' "
                    "on the pass's first batch) ran out of device memory on a later batch; pass a smaller "
                    "--max-batch-size or a fixed --batch-size"
                ) from error
            raise

    def _batch_size(self, pass_name: str) -> int:
        """The pass's batch size: the config's, or with ``"auto"`` the one recorded in the manifest, else the
        largest for which the pass's first batch runs (:func:`auto_batch_size`; that batch is kept)."""
        if self.config.batch_size != "auto":
            return self.config.batch_size
        if pass_name == GENERATION and self.engine.name != "hf":
            return AUTO_BATCH_SIZE_WITHOUT_CUDA  # shards only: the server batches on its own
        recorded = self.manifest["batch_sizes"].get(pass_name)
        if recorded:
            return recorded
        on_cuda = model_device(self.model).type == "cuda"
        return auto_batch_size(
            lambda size: self._probe(pass_name, size),
            self.config.max_batch_size if on_cuda else AUTO_BATCH_SIZE_WITHOUT_CUDA,
            f"{self.out_dir.name}: {pass_name}",
        )

    def _probe(self, pass_name: str, batch_size: int) -> None:
        """Run the pass's first batch left to do at ``batch_size`` (the search of ``batch_size="auto"``);
        a probe cut by the batch budget leaves the decision to the pass."""
        plan, todo = self._todo(pass_name, batch_size, count_reuse=False)
        todo = todo[: 1 if self.budget is None else min(1, self.budget)]
        self._run_batches(pass_name, plan, todo, progress=False)

    def _batches(self, pass_name: str, batch_size: int) -> list[np.ndarray]:
        if pass_name == TEACHER_FORCED:
            return teacher_forced_batches(
                self.encoded, batch_size, self.config.sort_by_length, self.config.share_prompts
            )
        return generation_batches(self.encoded, batch_size, self.config.sort_by_length)

    def _todo(
        self, pass_name: str, batch_size: int, count_reuse: bool = True
    ) -> tuple[list[np.ndarray], list[int]]:
        """The pass's batch plan (recorded in the manifest), and this process's batches of it not yet done
        by anyone."""
        plan = self._batches(pass_name, batch_size)
        self.manifest["batches"][pass_name] = len(plan)
        self.manifest["batch_sizes"][pass_name] = batch_size
        share = range(self.options.process_index, len(plan), self.options.num_processes)
        todo = [k for k in share if k not in self.done[pass_name]]
        if count_reuse and share and not todo:
            self.reused.append(f"{pass_name} {len(share)}/{len(share)} batches")
        return plan, todo

    def _run_batches(self, pass_name: str, plan: list[np.ndarray], todo: list[int], progress: bool) -> None:
        """Run the batches ``todo`` of ``plan``, writing a shard and the manifest after each."""
        import pandas as pd
        from tqdm.auto import tqdm

        generated = None
        if pass_name == GENERATION:
            # The engine works ahead (a server gets every batch's prompts at once) and hands the batches
            # back in this order.
            generated = self.engine.generate(
                [[self.encoded.prompt_ids[i] for i in plan[k]] for k in todo],
                GreedySettings(self.pad_id, sorted(self.eos_ids), self.config.max_new_tokens),
            )
        try:
            # No bar for a pass with nothing to run: a resumed evaluation printed one empty bar per pass.
            label = f"{self.out_dir.name}: {pass_name}"
            for k in tqdm(todo, desc=label, disable=not progress or not todo, unit="batch"):
                index = plan[k]
                columns = self._scores(index) if generated is None else self._texts(index, next(generated))
                pd.DataFrame(columns).to_parquet(shard_path(self.out_dir, pass_name, k), index=False)
                self.manifest["completed"][pass_name].append(k)
                write_manifest(self.out_dir / self.own, self.manifest)
        finally:
            if generated is not None:
                generated.close()  # what the engine still has in flight is dropped (early stop, an error)
        self.done[pass_name].update(todo)
        if self.budget is not None:
            self.budget -= len(todo)

    def _scores(self, index: np.ndarray) -> dict:
        """One teacher-forced shard's columns: the sequences ``index`` scored."""
        encoded = self.encoded
        score = shared_prompt_statistics if self.config.share_prompts else answer_token_statistics
        return {
            "example_id": self.sequence_ids[index],
            "variant": encoded.sequence_variant[index],
            **score(
                self.model,
                [encoded.full_ids[i] for i in index],
                encoded.answer_start[index],
                encoded.answer_end[index],
                self.pad_id,
            ),
        }

    def _texts(self, index: np.ndarray, tokens: list[list[int]]) -> dict:
        """One generation shard's columns: the examples ``index`` and their generated tokens."""
        return {
            "example_id": self.example_ids[index],
            "generated_text": self.tokenizer.batch_decode(tokens, skip_special_tokens=True),
            "generated_token_ids": tokens,
        }


__all__ = [
    "ANSWER",
    "AUTO_BATCH_SIZE_WITHOUT_CUDA",
    "BATCH_PLAN_VERSION",
    "GENERATION",
    "MANIFEST",
    "PASSES",
    "TEACHER_FORCED",
    "VARIANT_COLUMNS",
    "EncodedExamples",
    "RunOptions",
    "RunnerConfig",
    "StaleOutputsError",
    "answer_token_statistics",
    "answer_variants",
    "auto_batch_size",
    "encode_examples",
    "generation_batches",
    "generation_order_key",
    "locate_answers",
    "manifest_name",
    "outputs_complete",
    "outputs_current",
    "outputs_fingerprint",
    "padded_tokens",
    "plan_batches",
    "prompt_groups",
    "read_answer_variants",
    "read_outputs",
    "run_model",
    "shared_prompt_statistics",
    "should_reduce_batch_size",
    "teacher_forced_batches",
    "weights_checksum",
]
