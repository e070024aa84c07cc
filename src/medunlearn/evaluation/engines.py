"""Generation engines of the runner's greedy pass: transformers (``hf``) or a vLLM server (``vllm``).

Both take the same prompt token ids (the chat template is rendered and tokenised once, by the runner) and give
back the greedy continuation of each, cut before its first end-of-turn token, so the runner decodes and stores
them the same way. The teacher-forced pass always runs on transformers: it needs every answer token's
log-probability and the moments of the next-token distribution, which a server does not return.

``vllm`` sends the token ids to a vLLM OpenAI-compatible server's *completions* endpoint (``prompt`` as a list
of token ids, so nothing is rendered or tokenised again), with temperature 0, ``max_tokens`` and the runner's
end-of-turn ids as ``stop_token_ids``, through the one ``openai`` async client
(:mod:`medunlearn.llm.openai_client`). The server is either one the engine starts for the checkpoint under
evaluation (from the vLLM Python, on a free loopback port, stopped at the end, also on error) or one given by
URL. A PEFT adapter folder is served as base + adapter (vLLM's LoRA support), never merged. Requests of every
batch are in flight together (up to ``max_in_flight``), so the server batches them continuously; batches come
back in order, so the runner writes its shards as each one completes.

An engine generates only for the weights it was asked about: a server given by URL must list the checkpoint's
folder as a model's root (:mod:`medunlearn.evaluation.vllm_served`), an in-memory model never goes to a URL
(:func:`make_engine` gives it the hf engine), and a model vLLM's CPU backend cannot run is refused before a
server starts (:func:`medunlearn.llm.server.check_vllm_cpu_can_serve`). See docs/evaluation.md, "Generation
engines".
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from medunlearn.errors import InputError
from medunlearn.evaluation.vllm_served import (
    IN_MEMORY_COPY,
    GenerationEngineError,
    choose_served_model,
    list_served_models,
    served_checkpoint,
    served_weights_identity,
)
from medunlearn.generation import (
    Decoding,
    check_new_tokens_fit,
    greedy_generate,
    model_device,
    resolve_decoding,
)
from medunlearn.llm.openai_client import ClientSettings, bounded_client, import_openai
from medunlearn.utils.user_files import read_json

ENGINES = ("hf", "vllm")
Engine = Literal["hf", "vllm"]
# Generation-config options under which transformers' greedy decoding is no longer a plain argmax; the vLLM
# engine does not reproduce them and refuses a model that sets them.
ARGMAX_CHANGING_OPTIONS = {
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "bad_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "sequence_bias": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "min_length": 0,
    "min_new_tokens": None,
}


@dataclass
class GreedySettings:
    """What a greedy continuation depends on, besides the prompt and the weights."""

    pad_token_id: int
    eos_token_ids: Sequence[int]
    max_new_tokens: int


class HFEngine:
    """Greedy generation with transformers' ``model.generate`` (left padding, one call per batch).

    ``decoding``: the KV cache, ``"dynamic"``, ``"static"``, ``"compiled"`` (static + ``torch.compile``, CUDA
    only) or ``"auto"`` (compiled on CUDA, else dynamic); see :func:`medunlearn.generation.greedy_generate`.
    """

    name = "hf"

    def __init__(self, model, decoding: Decoding = "dynamic"):
        self.model = model
        self.decoding = resolve_decoding(decoding, model_device(model))

    def generate(
        self, batches: Sequence[Sequence[Sequence[int]]], settings: GreedySettings
    ) -> Iterator[list[list[int]]]:
        for prompts in batches:
            yield greedy_generate(
                self.model,
                prompts,
                settings.pad_token_id,
                settings.eos_token_ids,
                settings.max_new_tokens,
                self.decoding,
            )

    def identity(self) -> dict:
        """What the generations depend on besides the model, prompts and settings, for the outputs'
        fingerprint: the KV cache when not transformers' default (the dynamic one, which earlier versions
        used and did not record)."""
        return {} if self.decoding == "dynamic" else {"decoding": self.decoding}

    def close(self) -> None:
        pass

    def __enter__(self) -> HFEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_plain_greedy(model) -> None:
    """Raise if ``model``'s generation config changes transformers' greedy decoding in a way the vLLM engine
    does not reproduce (a repetition penalty, banned n-grams, a minimum length…)."""
    config = getattr(model, "generation_config", None)
    if config is None:
        return
    changed = [
        f"{name}={getattr(config, name)!r}"
        for name, neutral in ARGMAX_CHANGING_OPTIONS.items()
        if getattr(config, name, neutral) not in (neutral, None)
    ]
    if changed:
        raise InputError(
            f"the model's generation config sets {', '.join(changed)}: the vLLM engine generates by plain "
            "argmax and would not give transformers' texts; use --engine hf (or reset those options)"
        )


def model_dtype(model) -> str:
    """The dtype transformers runs ``model`` in, as vLLM's ``--dtype`` names it (``float32``...)."""
    try:
        return str(next(model.parameters()).dtype).removeprefix("torch.")
    except (StopIteration, AttributeError):
        return "float32"


@dataclass(frozen=True)
class ServerLaunch:
    """How a vLLM server that :class:`VLLMEngine` starts runs (nothing is started at a ``url``).

    Parameters:
        python (`str`, `Path` or `None`): the Python that runs a started server (``$MEDUNLEARN_VLLM_PYTHON``,
            else ``.venv-vllm/bin/python``; see :mod:`medunlearn.llm.server`).
        dtype (`str`, defaults to ``"float32"``): the started server's ``--dtype``; give the dtype
            transformers runs the model in (:func:`model_dtype`), so both engines compute alike.
        server_args (`list[str]`): more arguments of a started server (e.g. ``--gpu-memory-utilization 0.5``).
        kv_cache_bytes (`int`, defaults to 1 GiB): the started server's KV cache on CPU (on a GPU, vLLM sizes
            it within ``--gpu-memory-utilization``, 0.5 unless ``server_args`` say otherwise).
    """

    python: str | Path | None = None
    dtype: str = "float32"
    server_args: Sequence[str] = ()
    kv_cache_bytes: int = 1 << 30


class VLLMEngine:
    """Greedy generation on a vLLM server: one started for ``checkpoint`` (no ``url``), or the one at
    ``url``.

    Parameters:
        checkpoint (`str`, `Path` or `None`): the model folder (or a PEFT LoRA adapter folder, served as base
            + adapter) under evaluation. ``None`` with ``model``: the in-memory model is saved to a temporary
            folder and served from there.
        url (`str` or `None`): a running server's base URL (``http://HOST:PORT/v1``); then nothing is started.
            It must serve ``checkpoint`` (list its folder as a root); an in-memory model never goes to a URL.
        served_model (`str` or `None`): the model name to request at ``url``; by default the one whose root is
            ``checkpoint``. A named one must have that root too (see :mod:`.vllm_served`).
        max_in_flight (`int`, defaults to 256): requests sent at once (vLLM schedules them together).
        timeout_s (`float`, defaults to 600): per request.
        model: the in-memory model, saved for the server when ``checkpoint`` is ``None``.
        **launch: how a started server runs, the fields of :class:`ServerLaunch` (``python``, ``dtype``,
            ``server_args``, ``kv_cache_bytes``); unused at a ``url``.
    """

    name = "vllm"

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        *,
        url: str | None = None,
        served_model: str | None = None,
        max_in_flight: int = 256,
        timeout_s: float = 600.0,
        model=None,
        **launch,
    ):
        launch = ServerLaunch(**launch)
        if checkpoint is None and model is None:
            raise InputError("the vLLM engine needs a checkpoint folder or an in-memory model")
        if checkpoint is None and url is not None:
            raise InputError(
                f"an in-memory model is never generated at a URL ({url}): the server there does not hold its "
                "weights; leave out the URL (a server is started from a copy) or use the hf engine"
            )
        self.checkpoint = str(checkpoint) if checkpoint is not None else None
        self.url = url.rstrip("/") if url else None
        self.served_model = served_model
        self.python = Path(launch.python) if launch.python else None
        self.dtype = launch.dtype
        self.max_in_flight = max_in_flight
        self.timeout_s = timeout_s
        self.server_args = list(launch.server_args)
        self.kv_cache_bytes = launch.kv_cache_bytes
        self.model = model
        self.server = None  # a VLLMServer this engine started
        self._saved_dir: str | None = None
        self._checked_url = False  # whether the model requested at ``url`` was matched to the checkpoint

    @property
    def base_url(self) -> str | None:
        return self.url or (self.server.base_url if self.server is not None else None)

    # -- the server ----------------------------------------------------------------------------------------

    def start(self, max_model_len: int) -> VLLMEngine:
        """Start the server now, for sequences of up to ``max_model_len`` tokens (prompt + generation);
        otherwise the first :meth:`generate` starts it, as long as its prompts need. Nothing to start at a
        ``url``."""
        if self.url is None:
            self.close()
            self._start_server(max_model_len)
        return self

    def _start_server(self, max_model_len: int) -> None:
        from medunlearn.llm.server import VLLMServer, VLLMServerConfig

        checkpoint = self.checkpoint
        on_gpu = _cuda_available()
        if not on_gpu:  # before any server starts: what vLLM's CPU backend cannot run, it refuses mid-run
            check_checkpoint_servable(checkpoint, self.dtype, model=self.model)
        if checkpoint is None:
            checkpoint = self._save_in_memory_model()
        served = served_checkpoint(checkpoint)
        arguments = [
            # Prompts arrive as token ids and the runner decodes the ids it gets back: the server needs no
            # tokenizer (nor the model's sampling defaults: every request says what it wants).
            "--skip-tokenizer-init",
            "--generation-config",
            "vllm",
            "--max-num-batched-tokens",
            str(max(2048, max_model_len)),
        ]
        if served.adapter_dir is not None:
            arguments += [
                "--enable-lora",
                "--lora-modules",
                f"adapter={served.adapter_dir}",
                "--max-lora-rank",
                str(served.adapter_rank),
            ]
        if on_gpu and not any(a.startswith("--gpu-memory-utilization") for a in self.server_args):
            # The evaluating process holds the transformers model on the same GPU (its teacher-forced pass).
            arguments += ["--gpu-memory-utilization", "0.5"]
        config = VLLMServerConfig(
            model_dir=served.model_dir,
            served_model_name="base",
            dtype=self.dtype,
            max_model_len=max_model_len,
            # On a GPU vLLM sizes its KV cache and captures CUDA graphs itself (not measured here: no GPU).
            kv_cache_bytes=None if on_gpu else self.kv_cache_bytes,
            enforce_eager=not on_gpu,
            extra_args=[*arguments, *self.server_args],
        )
        if self.python is not None:
            config.python = self.python
        self.served_model = "adapter" if served.adapter_dir is not None else "base"
        self.server = VLLMServer(config)
        self.server.start()

    def _save_in_memory_model(self) -> str:
        if hasattr(self.model, "peft_config"):
            raise InputError(
                "the vLLM engine serves a LoRA model from its adapter folder: save it "
                "(model.save_pretrained) and pass the folder"
            )
        self._saved_dir = tempfile.mkdtemp(prefix="medunlearn-vllm-model-")
        self.model.save_pretrained(self._saved_dir)
        return self._saved_dir

    def _choose_served_model(self) -> None:
        """At a given URL: check that it answers and that it serves the checkpoint, and pick that model."""
        listed = list_served_models(self.url)
        self.served_model = choose_served_model(self.url, listed, self.checkpoint, self.served_model)
        self._checked_url = True

    def served_weights(self) -> str:
        """Which weights generate, for the outputs' fingerprint (:func:`.served_weights_identity`); at a URL
        this first checks that the server serves the checkpoint (and raises before anything is written)."""
        if self.checkpoint is None:
            return IN_MEMORY_COPY
        if self.url is not None and not self._checked_url:
            self._choose_served_model()
        return served_weights_identity(self.checkpoint)

    def identity(self) -> dict:
        """The outputs' fingerprint's record of who generated: this engine, and the weights it serves."""
        return {"engine": self.name, "served_weights": self.served_weights()}

    def _describe_failure(self, error: BaseException) -> str:
        where = f"the vLLM server at {self.base_url}"
        process = self.server.process if self.server is not None else None
        if process is not None and process.poll() is not None:
            # The server died: its log says why (a model it cannot run, memory); a rerun alone would not help.
            return (
                f"{where} exited with status {process.returncode} during the generation pass; the end of its "
                f"log {self.server.log_file}:\n{self.server.log_cause()}\n"
                "The batches written so far are kept (a rerun resumes from them once the cause is fixed; "
                "a model the server cannot run needs --engine hf)"
            )
        return (
            f"{where} stopped answering during the generation pass ({type(error).__name__}: {error}); "
            "the batches written so far are kept: rerun the same command to resume from them"
        )

    # -- generation ----------------------------------------------------------------------------------------

    def generate(
        self, batches: Sequence[Sequence[Sequence[int]]], settings: GreedySettings
    ) -> Iterator[list[list[int]]]:
        """Greedy continuations of every batch, yielded batch by batch in order while later batches are still
        being generated."""
        batches = [[list(prompt) for prompt in prompts] for prompts in batches]
        if not batches:
            return
        needed = max(len(prompt) for prompts in batches for prompt in prompts) + settings.max_new_tokens
        if self.url is None and (self.server is None or self.server.config.max_model_len < needed):
            self.start(needed)  # a started server too short for these prompts is started again, longer
        elif self.url is not None and not self._checked_url:
            self._choose_served_model()
        stream = _BackgroundRequests(self, batches, settings)
        try:
            for index in range(len(batches)):
                yield stream.wait_for(index)
        finally:
            stream.cancel()

    async def _complete(self, client, prompt: list[int], settings: GreedySettings) -> list[int]:
        response = await client.completions.create(
            model=self.served_model,
            prompt=prompt,
            max_tokens=settings.max_new_tokens,
            temperature=0.0,
            n=1,
            extra_body={
                "return_token_ids": True,
                "stop_token_ids": sorted(settings.eos_token_ids),
            },
        )
        tokens = list(response.choices[0].token_ids or [])
        eos = set(settings.eos_token_ids)
        stop = next((position for position, token in enumerate(tokens) if token in eos), len(tokens))
        return tokens[:stop]

    def close(self) -> None:
        """Stop the server this engine started (if any) and remove a temporary model folder."""
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self._saved_dir is not None:
            shutil.rmtree(self._saved_dir, ignore_errors=True)
            self._saved_dir = None

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _BackgroundRequests:
    """Every request of every batch, sent from an event loop in a worker thread (``max_in_flight`` at a
    time, earlier batches first); :meth:`wait_for` hands a batch over once all its prompts are done."""

    def __init__(self, engine: VLLMEngine, batches: list[list[list[int]]], settings: GreedySettings):
        self.engine = engine
        self.results: dict[int, list[list[int]]] = {}
        self.error: BaseException | None = None
        self.condition = threading.Condition()
        self.loop = asyncio.new_event_loop()
        self.task = None
        self.thread = threading.Thread(target=self._run, args=(batches, settings), daemon=True)
        self.thread.start()

    def _run(self, batches, settings) -> None:
        asyncio.set_event_loop(self.loop)
        self.task = self.loop.create_task(self._all(batches, settings))
        try:
            self.loop.run_until_complete(self.task)
        except BaseException as error:  # handed to the waiting thread, which raises it
            with self.condition:
                self.error = self.error or error
                self.condition.notify_all()
        finally:
            self.loop.close()

    async def _all(self, batches, settings) -> None:
        openai = import_openai()
        engine = self.engine
        # The server is one vLLM this run started or named by URL: no API key is read or sent.
        client_settings = ClientSettings(
            base_url=engine.base_url,
            timeout_s=engine.timeout_s,
            max_retries=2,
            concurrency=engine.max_in_flight,
        )
        async with bounded_client(client_settings) as bounded:

            async def one(prompt):
                return await bounded.limited(lambda: engine._complete(bounded.client, prompt, settings))

            async def batch(index, prompts):
                tokens = await asyncio.gather(*(one(prompt) for prompt in prompts))
                with self.condition:
                    self.results[index] = list(tokens)
                    self.condition.notify_all()

            try:
                await asyncio.gather(*(batch(index, prompts) for index, prompts in enumerate(batches)))
            except (openai.APIConnectionError, openai.APITimeoutError) as error:
                raise GenerationEngineError(engine._describe_failure(error)) from None
            except openai.APIStatusError as error:
                raise GenerationEngineError(
                    f"HTTP {error.status_code} from the vLLM server at {engine.base_url}: {error.message}"
                ) from None

    def wait_for(self, index: int) -> list[list[int]]:
        with self.condition:
            self.condition.wait_for(lambda: index in self.results or self.error is not None)
            if index in self.results:
                return self.results.pop(index)
            raise self.error

    def cancel(self) -> None:
        """Stop what is still in flight (the runner stopped early or failed) and wait for the thread."""
        while self.thread.is_alive():
            if self.task is not None:
                try:
                    self.loop.call_soon_threadsafe(self.task.cancel)
                except RuntimeError:  # the loop has just closed: nothing is left in flight
                    pass
            self.thread.join(timeout=0.1)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def check_checkpoint_servable(checkpoint, dtype: str | None = None, *, model=None, flag: str = "") -> None:
    """Raise :class:`InputError` (saying to use ``--engine hf``) when vLLM's CPU backend cannot serve the
    checkpoint (its ``config.json``, or ``model``'s config) in ``dtype`` (``None``: not checked): see
    :func:`medunlearn.llm.server.check_vllm_cpu_can_serve`. A name with no local folder is not checked."""
    from medunlearn.llm.server import check_vllm_cpu_can_serve

    where = f"{flag} {checkpoint}".strip() if checkpoint is not None else "the in-memory model"
    if model is not None and getattr(model, "config", None) is not None:
        config = model.config.to_dict()
        config["architectures"] = config.get("architectures") or [type(model).__name__]  # unset until saved
    else:
        config_file = Path(served_checkpoint(checkpoint).model_dir) / "config.json"
        if not config_file.is_file():
            return
        config = read_json(config_file, expect=dict, allow_non_finite=True)
    check_vllm_cpu_can_serve(config, dtype, where)


def check_engine_serves(config, models: dict) -> None:
    """Before an evaluation writes anything: raise when ``config``'s vLLM engine cannot generate for one of
    ``models`` (flag -> a checkpoint folder or name; in-memory models and ``None`` are skipped, they never go
    to a URL): at ``config.vllm_url``, no served model was loaded from the checkpoint; without a URL, on CPU,
    vLLM cannot serve the checkpoint's shape. Nothing to check on the hf engine."""
    if getattr(config, "engine", "hf") != "vllm":
        return
    checkpoints = {
        flag: str(value) for flag, value in models.items() if isinstance(value, (str, Path)) and str(value)
    }
    if config.vllm_url and checkpoints:
        listed = list_served_models(config.vllm_url.rstrip("/"))
        for flag, checkpoint in checkpoints.items():
            choose_served_model(config.vllm_url.rstrip("/"), listed, checkpoint, config.vllm_model, flag)
    elif not config.vllm_url and not _cuda_available():
        for flag, checkpoint in checkpoints.items():
            check_checkpoint_servable(checkpoint, flag=flag)


def refuse_one_url_for_many_models(runner: dict) -> None:
    """A study evaluates a different model in every cell (and its baselines): one server at a URL serves
    fixed weights, so ``vllm_url`` is refused for it (before anything is trained or written)."""
    if runner.get("vllm_url"):
        raise InputError(
            f"--vllm-url {runner['vllm_url']} (evaluation.runner.vllm_url): a study evaluates a different "
            "model in every cell, and one server serves fixed weights; use --engine vllm without --vllm-url "
            "(a server is started for each model), or --engine hf"
        )


def in_memory_fallback(config, model) -> str | None:
    """Why the vLLM engine cannot generate for the in-memory ``model`` (it then runs on transformers), or
    ``None`` when a server started from a temporary copy of it can."""
    if config.vllm_url:
        return f"the server at --vllm-url {config.vllm_url} does not hold an in-memory model's weights"
    if hasattr(model, "peft_config"):
        return "vLLM serves a LoRA model from its saved adapter folder, and this one is in memory"
    if getattr(model, "hf_quantizer", None) is not None or getattr(model, "is_quantized", False):
        return "a quantized model in memory (vLLM would load other weights)"
    if not _cuda_available():
        try:
            check_checkpoint_servable(None, model_dtype(model), model=model)
        except InputError as error:
            return str(error)
    return None


def make_engine(config, model, checkpoint: str | Path | None = None):
    """The generation engine a :class:`~medunlearn.evaluation.settings.RunnerConfig` asks for, for ``model``
    (loaded from ``checkpoint`` when it is a folder or name; ``None``: an in-memory model, saved for a started
    server). The one place an engine is built and the transformers engine's decoding is resolved.

    An in-memory model that vLLM cannot be given (at a URL, which serves other weights; a PEFT or quantized
    model; a shape the CPU backend does not run) generates on transformers instead, said on stderr: its
    outputs are then fingerprinted as the hf engine's (docs/evaluation.md, "Generation engines")."""
    check_new_tokens_fit(model, config.max_new_tokens)
    placement = config.placement
    if placement.engine == "hf":
        return HFEngine(model, config.decoding)
    if placement.engine != "vllm":
        raise InputError(f"unknown generation engine {placement.engine!r}; engines: {', '.join(ENGINES)}")
    if checkpoint is None:
        reason = in_memory_fallback(config, model)
        if reason is not None:
            name = getattr(getattr(model, "config", None), "name_or_path", "") or "model"
            print(f"{name} (in-memory): generating with transformers, not vLLM: {reason}", file=sys.stderr)
            return HFEngine(model, config.decoding)
    check_plain_greedy(model)
    return VLLMEngine(
        checkpoint,
        url=placement.vllm_url,
        served_model=placement.vllm_model,
        python=placement.vllm_python,
        dtype=model_dtype(model),
        server_args=list(placement.vllm_args),
        model=model,
    )


class NoGeneration:
    """The engine of a role that only runs the teacher-forced pass (the retain model): it never generates,
    and its identity is not fingerprinted (nothing it could generate is stored)."""

    name = "none"

    def generate(self, batches, settings):  # pragma: no cover - the runner never asks it
        raise RuntimeError("this role runs no generation pass")

    def identity(self) -> dict:
        return {}

    def close(self) -> None:
        pass

    def __enter__(self) -> NoGeneration:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def engine_for(config, model, checkpoint: str | Path | None, generates: bool):
    """The engine of one role: :func:`make_engine`'s when the role generates, else :class:`NoGeneration`
    (no server is started, no decoding checked, for a teacher-forced-only role)."""
    return make_engine(config, model, checkpoint) if generates else NoGeneration()
