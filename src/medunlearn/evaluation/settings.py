"""The runner's settings: one flat :class:`RunnerConfig`, read as *what is computed* and *where it runs*.

``RunnerConfig`` stays the one record a command, a study file or a caller fills in (its fields are the
options' names). The runner reads it through two views:

- :class:`Computation`: what the outputs depend on (batch plan, generation length, prompt sharing, the
  transformers engine's KV cache). The output folder's fingerprint hashes it whole, projected on the passes
  that run (:func:`medunlearn.evaluation.outputs_folder.outputs_fingerprint`).
- :class:`Placement`: where the generation runs (the engine, a vLLM server's URL, model name, Python and
  arguments). Never fingerprinted: the engine built from it reports which weights generated
  (:mod:`medunlearn.evaluation.engines`), and that identity is.

``progress`` and ``stop_after_batches`` steer the run itself (bars, an early stop) and are neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

from medunlearn.generation import Decoding

# ``batch_size="auto"`` without CUDA: no out-of-memory search (a CPU run is slow long before memory runs out).
AUTO_BATCH_SIZE_WITHOUT_CUDA = 16


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
        dtype: the dtype the passes compute in: ``"float32"`` (the default), ``"bfloat16"`` or ``"auto"``
            (bf16 on a GPU that supports it, and on a CPU only where its flags say native bf16 and a probe
            measures it faster: :func:`medunlearn.utils.precision.resolve_precision`, docs/scaling.md,
            "Precision"). A model the evaluation loads from its folder is cast to it; a model object runs in
            its own dtype, which its outputs record. The resolved dtype enters the fingerprint when not
            ``"float32"`` (float32 fingerprints are those of earlier versions).
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
    dtype: Literal["auto", "float32", "bfloat16"] = "float32"

    @property
    def resolved_dtype(self) -> str:
        """``dtype`` with ``"auto"`` resolved for the device the evaluation runs on (CUDA when available)."""
        if self.dtype != "auto":  # no torch import, no probe
            return self.dtype
        from medunlearn.utils.precision import default_device, resolve_precision

        return resolve_precision(self.dtype, default_device()).dtype

    @property
    def computation(self) -> Computation:
        return Computation(
            batch_size=self.batch_size,
            max_batch_size=self.max_batch_size,
            max_new_tokens=self.max_new_tokens,
            sort_by_length=self.sort_by_length,
            share_prompts=self.share_prompts,
            decoding=self.decoding,
            dtype=self.resolved_dtype,
        )

    @property
    def placement(self) -> Placement:
        return Placement(
            engine=self.engine,
            vllm_url=self.vllm_url,
            vllm_model=self.vllm_model,
            vllm_python=self.vllm_python,
            vllm_args=tuple(self.vllm_args),
        )


@dataclass(frozen=True)
class Computation:
    """What the outputs depend on besides the model, its weights and the examples (fingerprinted whole).

    ``decoding`` is the transformers engine's KV cache as asked; the engine resolves ``"auto"`` once and
    reports the resolved value as part of its identity (:meth:`HFEngine.identity`). ``dtype`` is the
    resolved dtype the passes compute in (``RunnerConfig.dtype``).
    """

    batch_size: int | Literal["auto"]
    max_batch_size: int
    max_new_tokens: int
    sort_by_length: bool
    share_prompts: bool
    decoding: Decoding
    dtype: str = "float32"


@dataclass(frozen=True)
class Placement:
    """Where the generation pass runs: never part of a fingerprint (the weights a server generates from
    are, as the engine's identity)."""

    engine: Literal["hf", "vllm"] = "hf"
    vllm_url: str | None = None
    vllm_model: str | None = None
    vllm_python: str | None = None
    vllm_args: tuple[str, ...] = ()

    def __post_init__(self):
        if self.vllm_url is not None:  # however it was set: a study file, a config, the Python API
            from medunlearn.llm.spec import check_server_url

            check_server_url(self.vllm_url, f"vllm_url {self.vllm_url!r}")


class Overwrite(str, Enum):
    """What a run does with outputs already in its folder.

    ``KEEP``: reuse those of the same fingerprint, stop on others (:class:`StaleOutputsError`); ``STALE``:
    discard them only when some belong to another fingerprint (a folder shared by several evaluations keeps
    outputs that match); ``ALL``: discard them first.
    """

    KEEP = "keep"
    STALE = "stale"
    ALL = "all"

    @classmethod
    def of(cls, value: bool | str | Overwrite) -> Overwrite:
        """``True`` -> ``ALL``, ``False`` -> ``KEEP`` (the earlier boolean flag), a name or member as is."""
        if isinstance(value, bool):
            return cls.ALL if value else cls.KEEP
        return cls(value)

    @classmethod
    def for_folder(cls, overwrite: bool, shared: bool) -> Overwrite:
        """The policy of ``--overwrite`` for one role's folder: a shared folder (``--before-outputs``,
        ``--retain-outputs``) is discarded only when stale, since other evaluations reuse what matches."""
        if not overwrite:
            return cls.KEEP
        return cls.STALE if shared else cls.ALL


__all__ = ["AUTO_BATCH_SIZE_WITHOUT_CUDA", "Computation", "Overwrite", "Placement", "RunnerConfig"]
