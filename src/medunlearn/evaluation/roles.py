"""One role orchestration for every benchmark mode: a model role (``--model``, ``--before``, the retain model)
is checked, reused, loaded, given its engine and run the same way for AMNESIA
(:func:`medunlearn.evaluation.pipeline.evaluate_unlearning`), TOFU
(:func:`medunlearn.tofu.evaluate.evaluate_tofu`) and MUSE (:func:`medunlearn.muse.evaluate.evaluate_muse`).

A role writes one or more output folders (:class:`RoleRun`: its examples and passes there). A benchmark
(:class:`Benchmark`) says only what differs between modes: how a model is resolved, how prompts are
rendered, which id the outputs' fingerprint gives the model, and which conventions a checkpoint should have
been trained with. The steps, in order:

1. :func:`check_role_names`: before any work, a bad model name fails plainly, and a vLLM engine that cannot
   generate for a checkpoint stops the run (:func:`~medunlearn.evaluation.engines.check_engine_serves`).
2. :func:`role_reusable`: a model named by its folder whose outputs are all there (the same fingerprint,
   from its cached weights digest) is not even loaded.
3. :func:`load_role`: the weights digest starts while the model loads; the conventions warning.
4. :func:`run_role`: one engine for the role (:func:`~medunlearn.evaluation.engines.engine_for`; a vLLM
   server is started only if the role generates, and stopped when it is done, also on error), then the
   runner over each of its folders.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from medunlearn.chat import warn_if_conventions_differ
from medunlearn.evaluation.engines import check_engine_serves, engine_for
from medunlearn.evaluation.outputs_folder import GENERATION, outputs_current, outputs_fingerprint
from medunlearn.evaluation.runner import run_model
from medunlearn.evaluation.settings import Overwrite, RunnerConfig
from medunlearn.models import check_model_name, load_model, resolve_model
from medunlearn.utils.digest import folder_weights_digest, start_folder_digest

if TYPE_CHECKING:
    import pandas as pd


class Benchmark(Protocol):
    """What a benchmark mode adds to the shared role steps."""

    conventions: object  # the rendering conventions a checkpoint is checked against

    def resolve(self, model, tokenizer, flag: str) -> tuple[object, object, str | None]:
        """``(model, tokenizer, path)``: :func:`medunlearn.models.resolve_model` or the mode's own."""

    def rendering(self, tokenizer):
        """The tokenizer the runner renders and tokenises prompts with."""

    def model_id(self, path: str | None, model, role: str) -> str:
        """The model's id in the outputs' fingerprint (``path`` is ``None`` for an in-memory ``model``)."""

    def named(self, model) -> bool:
        """Whether ``model`` is a folder or name (checked, possibly reused without loading)."""


SMOKE_MODEL = "tiny-llama"
"""The model name every benchmark mode builds fresh (smoke runs): never checked, reused or hashed."""


def named_model(model) -> bool:
    """Whether ``model`` is a folder or name (checked, possibly reused without loading): ``tiny-llama`` is
    built anew each time, so it never is."""
    return isinstance(model, (str, Path)) and str(model) != SMOKE_MODEL


def model_name(path: str | None, model) -> str:
    """A role's model in its outputs' fingerprint: its folder, else its config's ``name_or_path``."""
    return path or str(getattr(getattr(model, "config", None), "name_or_path", "") or "in-memory model")


def resolve_or_build(model, tokenizer, flag: str, texts: Callable[[], list[str]]):
    """``(model, tokenizer, path)``: :func:`medunlearn.models.resolve_model`, except ``tiny-llama``, built
    fresh on a tokenizer of ``texts()`` (the benchmark's text; ``path`` ``None``)."""
    if isinstance(model, str) and model == SMOKE_MODEL:
        return (*load_model(SMOKE_MODEL, texts=texts(), flag=flag), None)
    return resolve_model(model, tokenizer, flag)


@dataclass
class RoleRun:
    """One output folder of a role: the examples and passes the runner writes there, and the generation
    length there when it is not the role's config's (MUSE: 32 new tokens for knowmem, 128 for verbmem).

    ``rendering`` (with its ``rendering_id``): this folder's own rendering of the role's tokenizer, where it
    is not the benchmark's (AMNESIA's notes are raw text beside its chat-rendered QA); the id enters the
    folder's fingerprint through the model id, so outputs rendered otherwise are never reused."""

    folder: Path
    examples: pd.DataFrame
    passes: Sequence[str]
    max_new_tokens: int | None = None
    rendering: Callable | None = None
    rendering_id: str | None = None

    def config(self, config: RunnerConfig) -> RunnerConfig:
        """The runner's settings in this folder: the role's, with this folder's generation length."""
        if self.max_new_tokens is None:
            return config
        return replace(config, max_new_tokens=self.max_new_tokens)

    def model_id(self, model_id: str) -> str:
        """The model's id in this folder's fingerprint: the role's, with this folder's rendering."""
        return model_id if self.rendering_id is None else f"{model_id} | rendering {self.rendering_id}"

    def tokenizer(self, rendering, tokenizer):
        """What the runner renders with here: the benchmark's ``rendering``, or this folder's own."""
        return rendering if self.rendering is None else self.rendering(tokenizer)


@dataclass
class Role:
    """A model role: its name (``model``, ``before``, ``retain``), the flag naming it in errors, what was
    given (a folder or name, a ``(model, tokenizer)`` pair or an object with ``tokenizer``), its folders and
    what ``--overwrite`` does to them (:meth:`Overwrite.for_folder`)."""

    name: str
    flag: str
    model: object
    runs: list[RoleRun]
    tokenizer: object = None
    overwrite: Overwrite = Overwrite.KEEP

    @property
    def generates(self) -> bool:
        return any(GENERATION in run.passes for run in self.runs)


@dataclass
class LoadedRole:
    """A role's model once loaded: the object, its tokenizer, its folder (``None`` in memory) and the
    digest of the weights it was loaded from (``None``: the runner hashes the tensors)."""

    model: object
    tokenizer: object
    path: str | None
    weights: str | None


def check_role_names(benchmark: Benchmark, config: RunnerConfig, models: dict, generating: Sequence[str]):
    """Before any work: every named model's name (``models``: flag -> what was given), then whether the
    configured engine can generate for the roles of ``generating`` (their flags), before anything is
    written (docs/evaluation.md, "Generation engines")."""
    for flag, value in models.items():
        if benchmark.named(value):
            check_model_name(str(value), flag)
    servable = {
        flag: value for flag, value in models.items() if flag in generating and benchmark.named(value)
    }
    check_engine_serves(config, servable)


def role_reusable(benchmark: Benchmark, role: Role, config: RunnerConfig) -> bool:
    """Whether every folder of ``role`` already holds all its outputs, for a model named by its folder: its
    weights digest (from the files, cached) gives the fingerprint without loading it. Never under
    ``Overwrite.ALL`` (the folder is to be discarded); a folder never hashed has no complete outputs (unless
    its cache was removed: the runner then finds them done after the load)."""
    if not benchmark.named(role.model) or role.overwrite is Overwrite.ALL:
        return False
    weights = folder_weights_digest(role.model, cached_only=True)
    if weights is None:
        return False
    model_id = benchmark.model_id(str(role.model), None, role.name)
    for run in role.runs:
        fingerprint = outputs_fingerprint(
            run.model_id(model_id), run.examples, run.config(config), weights, passes=run.passes
        )
        if not outputs_current(run.folder, fingerprint, run.passes):
            return False
    if config.progress:
        folders = ", ".join(str(run.folder) for run in role.runs)
        print(f"{role.name}: reused cached outputs in {folders} ({role.model} not loaded)", file=sys.stderr)
    return True


def load_role(benchmark: Benchmark, role: Role, device=None, warn: bool = True) -> LoadedRole:
    """Load ``role``'s model; a folder's weights are hashed from its files, once (cached beside it), while it
    loads. A model loaded here is placed on ``device`` (objects stay where the caller put them)."""
    digest = start_folder_digest(role.model) if benchmark.named(role.model) else None
    model, tokenizer, path = benchmark.resolve(role.model, role.tokenizer, role.flag)
    if path is not None and warn:
        warn_if_conventions_differ(path, benchmark.conventions, role.flag)
    if path is not None and device is not None:
        model.to(device)
    weights = digest.result() if digest is not None and path is not None else None
    return LoadedRole(model, tokenizer, path, weights)


def in_role_dtype(loaded: LoadedRole, config: RunnerConfig) -> RunnerConfig:
    """The config ``loaded`` runs under, in the dtype it computes in: a model loaded from its folder is cast
    to ``config``'s (resolved) dtype; a model object is left in its own, and the config returned says so,
    for its outputs' fingerprint (docs/scaling.md, "Precision")."""
    from dataclasses import replace

    from medunlearn.evaluation.engines import model_dtype

    wanted, actual = config.computation.dtype, model_dtype(loaded.model)
    if actual == wanted:
        return config
    if loaded.path is None:
        return replace(config, dtype=actual)
    import torch

    loaded.model.to(getattr(torch, wanted))
    return config


def run_role(benchmark: Benchmark, role: Role, loaded: LoadedRole, config: RunnerConfig, processes=None):
    """The runner over each folder of ``role`` with one engine, built here and closed when the role is done.
    ``processes``: the launched processes sharing the batches (``None``: this one alone). Returns whether
    every batch of this process's share is done."""
    model_id = benchmark.model_id(loaded.path, loaded.model, role.name)
    rendering = benchmark.rendering(loaded.tokenizer)
    share = {} if processes is None else {"process_index": processes.index, "num_processes": processes.count}
    config = in_role_dtype(loaded, config)
    finished = True
    with engine_for(config, loaded.model, loaded.path, role.generates) as engine:
        for run in role.runs:
            finished &= run_model(
                loaded.model,
                run.tokenizer(rendering, loaded.tokenizer),
                run.examples,
                run.folder,
                run.config(config),
                model_id=run.model_id(model_id),
                passes=run.passes,
                overwrite=role.overwrite,
                weights=loaded.weights,
                engine=engine,
                **share,
            )
    return finished


def run_roles(
    benchmark: Benchmark,
    roles: Sequence[Role],
    config: RunnerConfig,
    *,
    after_load: Callable[[Role, LoadedRole], None] | None = None,
    always_load: Collection[str] = (),
    warn: bool = True,
) -> tuple[bool, dict[str, str]]:
    """Each of ``roles`` in turn, one model in memory at a time (TOFU, MUSE): reused without loading when its
    outputs are all there (:func:`role_reusable`; never the roles named in ``always_load``), else loaded
    (:func:`load_role`, ``warn``: the conventions warning) and run. ``after_load(role, loaded)``: what the
    mode does with a loaded model besides running it. Returns whether every batch is done and each role's
    model (folder, name or ``"in-memory model"``)."""
    finished, names = True, {}
    for role in roles:
        if role.name not in always_load and role_reusable(benchmark, role, config):
            names[role.name] = str(role.model)
            continue
        loaded = load_role(benchmark, role, warn=warn)
        names[role.name] = loaded.path or "in-memory model"
        if after_load is not None:
            after_load(role, loaded)
        finished &= run_role(benchmark, role, loaded, config)
        del loaded  # one model in memory at a time
    return finished, names
