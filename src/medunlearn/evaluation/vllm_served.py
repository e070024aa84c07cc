"""Which weights a vLLM server serves, and whether it may generate for a checkpoint.

An engine generates only for the weights it was asked about. At a running server (``--vllm-url``) the model
requested for a checkpoint is the served model whose *root* (the folder vLLM loaded it from, which
``/v1/models`` lists; for a LoRA module, the adapter folder) is that checkpoint; when none is, the run stops
before anything is generated or written (exit 2), naming the URL, the served models and the checkpoint.
``--vllm-model NAME`` only chooses among served names; NAME's root must still be the checkpoint. The served
weights enter the generation outputs' fingerprint (:func:`served_weights_identity`). See docs/evaluation.md,
"Generation engines".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from medunlearn.errors import InputError, MedunlearnError
from medunlearn.utils.user_files import read_json

# vLLM accepts these LoRA ranks only (vllm.config.lora.MaxLoRARanks in 0.32).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# What the fingerprint records for an in-memory model that a started server serves from a temporary copy: the
# weights are the model's own (its checksum is in the fingerprint already).
IN_MEMORY_COPY = "a copy of the in-memory model"


class GenerationEngineError(MedunlearnError, RuntimeError):
    """The generation server failed (it died, refused a request, cannot be reached); the message names its
    URL."""


@dataclass
class ServedCheckpoint:
    """How a checkpoint folder is served: the base model folder, and the adapter (name, folder, rank) when
    the checkpoint is a PEFT LoRA adapter."""

    model_dir: str
    adapter_dir: str | None = None
    adapter_rank: int | None = None


@dataclass
class ServedModel:
    """One model a server lists at ``/v1/models``: its request name and the folder it was loaded from."""

    name: str
    root: str | None

    def __str__(self) -> str:
        return f"{self.name!r} (root {self.root})" if self.root else f"{self.name!r} (no root listed)"


def resolve_builtin(name: str) -> str:
    """A built-in model name's folder (``smollm2-135m``); any other name unchanged."""
    if name == "smollm2-135m":
        from medunlearn.models import smollm2_checkpoint

        return str(smollm2_checkpoint())
    return name


def vllm_lora_rank(rank: int, where: str = "the adapter") -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds an adapter of rank ``rank``.

    >>> vllm_lora_rank(12), vllm_lora_rank(8), vllm_lora_rank(100)
    (16, 8, 128)
    """
    allowed = [r for r in VLLM_LORA_RANKS if r >= rank]
    if not allowed:
        raise InputError(f"{where}: LoRA rank {rank} is above vLLM's largest ({VLLM_LORA_RANKS[-1]})")
    return allowed[0]


def served_checkpoint(checkpoint: str | Path) -> ServedCheckpoint:
    """The base and adapter of a checkpoint folder (a built-in name such as ``smollm2-135m`` is resolved to
    its cached folder; a Hub id is passed to vLLM as is).

    A LoRA adapter's base is read from its ``adapter_config.json`` (``base_model_name_or_path``; a relative
    path is taken from the current folder, as PEFT does); its rank is the largest of ``r`` and
    ``rank_pattern``, rounded up to a rank vLLM accepts.
    """
    path = Path(resolve_builtin(str(checkpoint)))
    adapter_config = path / "adapter_config.json"
    if not adapter_config.is_file():
        return ServedCheckpoint(str(path.resolve()) if path.exists() else str(checkpoint))
    config = read_json(adapter_config, expect=dict, allow_non_finite=True)
    if config.get("peft_type", "LORA") != "LORA":
        raise InputError(
            f"{checkpoint}: a {config.get('peft_type')} adapter; vLLM serves LoRA adapters only "
            "(use --engine hf)"
        )
    base = config.get("base_model_name_or_path")
    if not base:
        raise InputError(f"{adapter_config}: no base_model_name_or_path, so the base model is unknown")
    base = resolve_builtin(base)
    rank = max([int(config.get("r", 8)), *map(int, (config.get("rank_pattern") or {}).values())])
    base_path = Path(base)
    return ServedCheckpoint(
        str(base_path.resolve()) if base_path.exists() else base,
        str(path.resolve()),
        vllm_lora_rank(rank, str(checkpoint)),
    )


def served_weights_identity(checkpoint: str | Path) -> str:
    """What the generation fingerprint records as the weights a server serves for ``checkpoint``: the base
    folder it loads (resolved), and ``+`` the adapter folder for a LoRA adapter.

    A server at a URL is used for a checkpoint only when the root it lists is that folder
    (:func:`choose_served_model`), so a started server and a server at a URL give the same identity.
    """
    served = served_checkpoint(checkpoint)
    return served.model_dir if served.adapter_dir is None else f"{served.model_dir}+{served.adapter_dir}"


def same_path(a: str, b: str) -> bool:
    """Whether two folder names are one folder (by the file system when both exist, else as strings)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.rstrip("/") == b.rstrip("/")


def list_served_models(url: str) -> list[ServedModel]:
    """The models the OpenAI-compatible server at ``url`` lists, with their roots; raises
    :class:`GenerationEngineError` when it does not answer."""
    import openai

    client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=1, timeout=15.0)
    try:
        models = client.models.list().data
    except openai.APIConnectionError as error:
        raise GenerationEngineError(
            f"cannot reach the vLLM server at {url} ({type(error).__name__}: {error}); is it running?"
        ) from None
    finally:
        client.close()
    return [ServedModel(model.id, getattr(model, "root", None)) for model in models]


def choose_served_model(
    url: str, served: list[ServedModel], checkpoint: str | Path, requested: str | None = None, flag: str = ""
) -> str:
    """The name to request at ``url`` for ``checkpoint``: a served model whose root is the checkpoint's folder
    (the adapter folder for a LoRA adapter); ``requested`` (``--vllm-model``) must be one of them. Raises
    :class:`InputError` naming the URL, the served models and the checkpoint when none is."""
    wanted = served_checkpoint(checkpoint)
    folder = wanted.adapter_dir or wanted.model_dir
    matching = [model.name for model in served if model.root and same_path(model.root, folder)]
    if requested is not None and requested in matching:
        return requested
    if requested is None and matching:
        return matching[0]
    listed = ", ".join(map(str, served)) or "no model"
    what = f"{flag} {checkpoint}".strip()
    if requested is not None:
        problem = f"--vllm-model {requested!r} is not served from {folder}"
    else:
        problem = f"no model it serves was loaded from {folder}"
    raise InputError(
        f"{what}: the vLLM server at {url} serves {listed}; {problem}, so it would generate for other "
        "weights. Serve this checkpoint there (its folder as the model, or an adapter with --lora-modules), "
        "or leave out --vllm-url (a server is then started for each model), or use --engine hf"
    )
