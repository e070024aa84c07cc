r"""The reference's training recipe, which ``--preset open-unlearning`` selects: one table keyed by benchmark.

OpenUnlearning (github.com/locuslab/open-unlearning) at commit d3d7cf9 composes each run with Hydra from a
trainer config (``configs/trainer/<Method>.yaml``, which starts from ``configs/trainer/finetune.yaml``) and an
experiment config (``configs/experiment/unlearn/<benchmark>/default.yaml``). The experiment is merged after
the trainer (``configs/unlearn.yaml:1-10``: ``experiment`` comes after ``trainer`` in the defaults list), so
its ``trainer.args`` win over the method's own ``args`` (SatImp's and WGA's 5 epochs, UNDIAL's lr 1e-4): the
tables below hold what the reference's command ``src/train.py experiment=unlearn/<benchmark>/default
trainer=<Method>`` runs with [inference from Hydra's merge order].

Every value is a :class:`Cited`: the value and ``file:line`` at d3d7cf9. The tables are the one home of these
values; docs/tofu.md ("Training settings under the open-unlearning preset") prints them beside ours.

Settings of the reference that the preset does not take, and why (ours are kept):

* ``optim: paged_adamw_32bit`` (``configs/trainer/finetune.yaml:15``): bitsandbytes' paged AdamW, the same
  AdamW update with optimiser states paged to CPU memory; it needs CUDA and bitsandbytes, so the CPU runs
  and tests could not take it. Ours: ``adamw_torch``.
* ``bf16: True`` (``finetune.yaml:7``): the precision follows the machine (float32 on CPU); pass ``--bf16``.
* ``gradient_checkpointing`` (``finetune.yaml:14``; the scripts turn it on): memory only, not the result.
* The number of processes: the batch is per process. The configs' 8 × 4 on one process is the reference
  script's 4 × 4 on two GPUs (``scripts/tofu_unlearn.sh:26-27``): 32 examples per step either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from medunlearn.unlearn.errors import UnlearningInputError

REFERENCE_COMMIT = "d3d7cf9"
REFERENCE_PRESETS = ("open-unlearning", "open-unlearning-llama3")
"""The conventions presets that stand for the reference implementation and select its training recipe."""


class ReferenceRecipeError(UnlearningInputError):
    """The reference's recipe needs a value it does not set itself (its config says ``???``)."""


@dataclass(frozen=True)
class Cited:
    """A value of the reference's recipe and where it is written (``file:line`` at the commit)."""

    value: Any
    source: str

    def citation(self) -> str:
        return f"open-unlearning@{REFERENCE_COMMIT} {self.source}"


_FINETUNE = "configs/trainer/finetune.yaml"
_TOFU = "configs/experiment/unlearn/tofu/default.yaml"
_MUSE = "configs/experiment/unlearn/muse/default.yaml"

TRAINING: dict[str, dict[str, Cited]] = {
    "tofu": {
        "per_device_train_batch_size": Cited(8, f"{_FINETUNE}:3"),
        "gradient_accumulation_steps": Cited(4, f"{_FINETUNE}:5"),
        "learning_rate": Cited(1e-5, f"{_TOFU}:45"),
        # finetune.yaml:18 sets 0.0; the TOFU experiment, merged later, sets 0.01.
        "weight_decay": Cited(0.01, f"{_TOFU}:46"),
        "num_train_epochs": Cited(10.0, f"{_TOFU}:47"),
        # A custom argument: int(warmup_epochs · rows // (batch · accumulation · devices)) warm-up steps
        # (src/trainer/__init__.py:33-42) of transformers' default linear schedule.
        "warmup_epochs": Cited(1.0, f"{_TOFU}:44"),
        "seed": Cited(0, f"{_FINETUNE}:24"),
    },
    "muse": {
        "per_device_train_batch_size": Cited(4, f"{_MUSE}:44"),
        "gradient_accumulation_steps": Cited(8, f"{_MUSE}:45"),
        "learning_rate": Cited(1e-5, f"{_MUSE}:46"),
        "weight_decay": Cited(0.0, f"{_FINETUNE}:18"),
        "num_train_epochs": Cited(10.0, f"{_MUSE}:47"),
        "lr_scheduler_type": Cited("constant", f"{_MUSE}:48"),
        "seed": Cited(0, f"{_FINETUNE}:24"),
        # MUSE_forget / MUSE_retain are PretrainingDatasets: raw text, 2048-token chunks of the joined corpus.
        "data_format": Cited("text", "configs/data/datasets/MUSE_forget.yaml:2"),
        "max_length": Cited(2048, "configs/data/datasets/MUSE_forget.yaml:9"),
        "text_chunking": Cited("stream", "src/data/pretraining.py:71-84"),
    },
}
"""Training settings shared by every method, per benchmark. AMNESIA uses TOFU's (QA unlearning)."""
TRAINING["amnesia"] = TRAINING["tofu"]

METHOD_ARGS: dict[str, dict[str, Cited]] = {
    "rmu": {
        "steering_coeff": Cited(2.0, "configs/trainer/RMU.yaml:8"),
        # `.*`: every parameter (RMU.yaml:12-13); the WMDP recipe's down_proj-only list is commented out (:14)
        "trainable_params_regex": Cited([".*"], "configs/trainer/RMU.yaml:12-13"),
        "forget_weight": Cited(1.0, "configs/trainer/RMU.yaml:7"),
        "retain_weight": Cited(1.0, "configs/trainer/RMU.yaml:10"),
    },
    "pdu": {
        "forget_weight": Cited(1.0, "configs/trainer/PDU.yaml:11"),
        "retain_weight": Cited(1.0, "configs/trainer/PDU.yaml:12"),
        "primal_dual": Cited(True, "configs/trainer/PDU.yaml:7"),
        "dual_step_size": Cited(1.0, "configs/trainer/PDU.yaml:8"),
        "dual_warmup_epochs": Cited(5.0, "configs/trainer/PDU.yaml:10"),
        # The margin is taken at the positions whose own label is kept, unshifted (src/trainer/unlearn/pdu.py:
        # 115-122), not at the positions predicting them.
        "forget_positions": Cited("labelled", "src/trainer/unlearn/pdu.py:115-122"),
    },
}
r"""Method arguments of the reference that differ from our defaults. The other methods' arguments are ours
already (docs/methods/<stem>.md cites each). RMU's layer stays ours: 7, as ``module_regex: model\.layers\.7``
(``RMU.yaml:11``), on every model with more than 7 layers."""

REQUIRED: dict[str, dict[str, str]] = {"pdu": {"retain_loss_eps": "configs/trainer/PDU.yaml:6"}}
"""Fields the reference's config leaves ``???`` (Hydra: must be given), per method."""


def reference_recipe(method: str, benchmark: str, fields: set[str] | None = None) -> dict[str, Cited]:
    """The reference's settings for ``method`` (a method-table stem) on ``benchmark``: the shared training
    settings, then the method's arguments; only ``fields`` when given (the fields of the method's config)."""
    if benchmark not in TRAINING:
        raise UnlearningInputError(
            f"no reference recipe for benchmark {benchmark!r}; known: {', '.join(sorted(TRAINING))}"
        )
    recipe = {**TRAINING[benchmark], **METHOD_ARGS.get(method, {})}
    return {name: cited for name, cited in recipe.items() if fields is None or name in fields}


def reference_defaults(method: str, benchmark: str, fields: set[str]) -> dict[str, Any]:
    """``{field: value}`` of :func:`reference_recipe`, for a parser's defaults."""
    return {name: cited.value for name, cited in reference_recipe(method, benchmark, fields).items()}


def check_reference_requirements(method: str, config) -> None:
    """Raise :class:`ReferenceRecipeError` naming each field the reference requires and ``config`` lacks."""
    for name, source in REQUIRED.get(method, {}).items():
        if getattr(config, name, None) is None:
            raise ReferenceRecipeError(
                f"--preset open-unlearning: {type(config).__name__} needs --{name}; the reference requires "
                f"it (open-unlearning@{REFERENCE_COMMIT} {source} is `???`) and derives no value"
            )


def is_reference_preset(conventions) -> bool:
    """Whether ``conventions`` (a ``Conventions`` or ``None``) are one of :data:`REFERENCE_PRESETS`."""
    return conventions is not None and getattr(conventions, "name", None) in REFERENCE_PRESETS
