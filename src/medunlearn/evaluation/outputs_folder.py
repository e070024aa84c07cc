"""The runner's output folder: its fingerprint, its manifests, and reading its outputs back.

Layout of an output folder (one per model role: ``model``, ``before``, ``retain``)::

    manifest.json                        fingerprint of (model, examples, settings) + completed batches
                                         (manifest-R-of-N.json per process when N processes share the work)
    teacher_forced-00000.parquet ...     example_id, token_logprobs, token_is_argmax, token_mean_logprob,
                                         token_std_logprob
    generation-00000.parquet ...         example_id, generated_text, generated_token_ids

A folder's outputs are reused exactly when its manifests hold the fingerprint of what a run would compute
(:func:`outputs_fingerprint`); :func:`open_manifest` applies an :class:`~.settings.Overwrite` policy to
outputs of another fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from medunlearn.errors import MedunlearnError, MissingInputError
from medunlearn.evaluation.batching import BATCH_PLAN_VERSION
from medunlearn.evaluation.encoding import ANSWER, VARIANT_COLUMNS
from medunlearn.evaluation.settings import Computation, Overwrite, RunnerConfig
from medunlearn.evaluation.vllm_served import served_weights_identity
from medunlearn.utils.files import atomic_write_text
from medunlearn.utils.user_files import read_json, read_parquet_frame

if TYPE_CHECKING:
    import pandas as pd

TEACHER_FORCED = "teacher_forced"
GENERATION = "generation"
PASSES = (TEACHER_FORCED, GENERATION)
MANIFEST = "manifest.json"


class StaleOutputsError(MedunlearnError, ValueError):
    """An output folder holds results of another model, data or setting (and would be silently mixed)."""


@dataclass(frozen=True)
class FingerprintedSettings:
    """The settings the outputs of some passes depend on, hashed whole; ``None`` fields are left out.

    A field is ``None`` where it cannot change these passes' outputs, or holds the value every earlier
    version computed with, so folders written before the field existed keep their fingerprint:
    ``max_batch_size`` (only ``batch_size="auto"`` starts a search there), ``share_prompts`` (the
    teacher-forced pass's batches, when on), and the generating engine's identity (generation only:
    ``decoding``, the transformers engine's KV cache when not dynamic; ``engine`` and ``served_weights``, a
    vLLM server and the weights it serves), and ``dtype``, the dtype the passes compute in when not float32.
    """

    batch_size: int | str
    max_new_tokens: int
    sort_by_length: bool
    batch_plan: int = BATCH_PLAN_VERSION
    max_batch_size: int | None = None
    share_prompts: bool | None = None
    decoding: str | None = None
    engine: str | None = None
    served_weights: str | None = None
    dtype: str | None = None

    @classmethod
    def of(cls, computation: Computation, passes: Sequence[str], generator: dict) -> FingerprintedSettings:
        """What ``passes`` compute under ``computation``, with ``generator`` the identity of the engine
        that generates (:meth:`~medunlearn.evaluation.engines.HFEngine.identity`)."""
        return cls(
            batch_size=computation.batch_size,
            max_new_tokens=computation.max_new_tokens,
            sort_by_length=computation.sort_by_length,
            max_batch_size=computation.max_batch_size if computation.batch_size == "auto" else None,
            share_prompts=True if TEACHER_FORCED in passes and computation.share_prompts else None,
            dtype=None if computation.dtype == "float32" else computation.dtype,
            **(generator if GENERATION in passes else {}),
        )

    def payload(self) -> dict:
        return {name: value for name, value in asdict(self).items() if value is not None}


def configured_generator(config: RunnerConfig, model_id: str, served_weights: str | None = None) -> dict:
    """The generating engine's identity as ``config`` names it, before any engine is built (the engines
    report the same, :mod:`medunlearn.evaluation.engines`): transformers with ``config.decoding`` (as
    given, so resolve ``"auto"`` first), or a vLLM server serving ``served_weights`` (default
    :func:`~.vllm_served.served_weights_identity` of ``model_id``)."""
    if config.engine == "hf":
        return {} if config.decoding == "dynamic" else {"decoding": config.decoding}
    return {"engine": config.engine, "served_weights": served_weights or served_weights_identity(model_id)}


def outputs_fingerprint(
    model_id: str,
    examples: pd.DataFrame,
    config: RunnerConfig | Computation,
    weights: str = "",
    passes: Sequence[str] = PASSES,
    served_weights: str | None = None,
    *,
    generator: dict | None = None,
) -> str:
    """Hash of what the outputs depend on: the model id, its weights, the examples (question, answer and
    answer-variant columns) and :class:`FingerprintedSettings` (batch plan settings included because shards
    are per batch). ``generator``: the generating engine's identity (``engine.identity()``); ``None`` takes
    the one ``config`` names (:func:`configured_generator`, with ``served_weights``). Where the generation
    runs (the server's URL, Python, arguments) never enters it.
    """
    if generator is None:
        generator = configured_generator(config, model_id, served_weights) if GENERATION in passes else {}
    computation = config.computation if isinstance(config, RunnerConfig) else config
    settings = FingerprintedSettings.of(computation, passes, generator).payload()
    digest = hashlib.sha256()
    digest.update(
        json.dumps({"model": model_id, "weights": weights, "settings": settings}, sort_keys=True).encode()
    )
    for column in ("example_id", "question", "answer", *[c for c in VARIANT_COLUMNS if c in examples]):
        digest.update("\x1f".join(examples[column].astype(str)).encode())
    return digest.hexdigest()


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


# -- manifests -------------------------------------------------------------------------------------------


def manifest_name(process_index: int = 0, num_processes: int = 1) -> str:
    """One manifest per process, so processes sharing a folder never write the same file."""
    return MANIFEST if num_processes == 1 else f"manifest-{process_index}-of-{num_processes}.json"


def _manifests(out_dir: Path) -> dict[Path, dict]:
    return {path: read_json(path, expect=dict) for path in sorted(out_dir.glob("manifest*.json"))}


def _stale(manifests: dict[Path, dict], fingerprint: str) -> list[Path]:
    return [path for path, manifest in manifests.items() if manifest.get("fingerprint") != fingerprint]


def write_manifest(path: Path, manifest: dict) -> None:
    atomic_write_text(path, json.dumps(manifest, indent=2))


def _discard(out_dir: Path, own: str) -> None:
    """Only this process's manifest goes (with a single process, every manifest and shard goes): other
    processes of the same run may be writing theirs right now."""
    for path in [out_dir / own] if own != MANIFEST else list(out_dir.glob("manifest*.json")):
        path.unlink(missing_ok=True)
    if own == MANIFEST:
        for shard in out_dir.glob("*.parquet"):
            shard.unlink()


def open_manifest(
    out_dir: Path, fingerprint: str, model_id: str, overwrite: Overwrite, own: str
) -> tuple[dict, dict[str, set[int]]]:
    """This process's manifest (``own``), and the batches completed by any process (all manifests must
    hold ``fingerprint`` once ``overwrite`` has been applied, else :class:`StaleOutputsError`)."""
    fresh = {
        "fingerprint": fingerprint,
        "model": model_id,
        "completed": {name: [] for name in PASSES},
        "batches": {},
    }
    stale_here = overwrite is Overwrite.STALE and _stale(_manifests(out_dir), fingerprint)
    if overwrite is Overwrite.ALL or stale_here:
        _discard(out_dir, own)
    manifests = _manifests(out_dir)
    stale = _stale(manifests, fingerprint)
    if stale:
        raise StaleOutputsError(
            f"{out_dir} holds outputs of another model, data or setting "
            f"(model {manifests[stale[0]].get('model')!r}, "
            f"{stale[0].name}); use a new output folder or overwrite=True (--overwrite)"
        )
    done = {name: set().union(*(m["completed"].get(name, []) for m in manifests.values())) for name in PASSES}
    manifest = manifests.get(out_dir / own, fresh)
    manifest.setdefault("batch_sizes", {})
    return manifest, done


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


# -- reading back ----------------------------------------------------------------------------------------


def shard_path(out_dir: Path, pass_name: str, batch: int) -> Path:
    return out_dir / f"{pass_name}-{batch:05d}.parquet"


def _read_pass(out_dir: Path, pass_name: str) -> pd.DataFrame | None:
    """Every completed shard of one pass, concatenated (None when there is none)."""
    import pandas as pd

    manifests = _manifests(out_dir) if out_dir.is_dir() else {}
    if not manifests:
        raise MissingInputError(f"{out_dir} has no {MANIFEST}: not a runner output folder")
    if len({m.get("fingerprint") for m in manifests.values()}) > 1:
        raise StaleOutputsError(f"{out_dir} mixes manifests of different runs")
    completed = set().union(*(m["completed"].get(pass_name, []) for m in manifests.values()))
    shards = [shard_path(out_dir, pass_name, k) for k in sorted(completed)]
    return pd.concat([read_parquet_frame(s) for s in shards], ignore_index=True) if shards else None


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
