r"""Representation Misdirection for Unlearning (RMU).

    L_forget = mean_b (1/|y_b|) Σ_{t ∈ y_b} (1/d) ‖h^l_θ(x_b)_t − c·u‖²
    L_retain = mean_b (1/|y_b|) Σ_{t ∈ y_b} (1/d) ‖h^l_θ(x_b)_t − h^l_ref(x_b)_t‖²
    L = γ · L_forget + α · L_retain

h^l is the output of decoder layer ``layer`` (d its width), u a fixed random unit vector (uniform [0,1)^d,
normalised, seeded by ``seed``), c the steering coefficient. Only parameters matching
``trainable_params_regex`` are trained (full fine-tuning); under PEFT the adapter is trained. Li et al., "The
WMDP Benchmark: Measuring and Reducing Malicious Use with Unlearning", ICML 2024 (arXiv 2403.03218). Positions
are the completion tokens of each QA (as OpenUnlearning's RMU), averaged per sequence. Defaults as in the WMDP
recipe and OpenUnlearning's RMU class (``src/trainer/unlearn/rmu.py:12-14`` at d3d7cf9): layer 7, trainable
``layers.(5|6|7).mlp.down_proj.weight`` (the layer and the two before it), c = 20, γ = α = 1. OpenUnlearning's
config overrides them (``configs/trainer/RMU.yaml:8,12-13``: c = 2, every parameter trained), and
``--preset open-unlearning`` selects that (docs/tofu.md); ours stay the WMDP paper's recipe.
The AMNESIA paper steers layer 7. Layer 7 is a depth of 7/32 in the 32-layer Llama-3-8B the papers use; on a
model with 7 decoder layers or fewer the default is the layer at that relative depth,
``floor(7·n/32 + 1/2)`` [ours], see :func:`default_rmu_layer`.

Reference (retain activations): the steered layer's outputs at the retain rows' answer positions, precomputed
once before training (answer tokens × hidden size × dtype bytes; ``medunlearn.unlearn.frozen``). The forget
term reads no reference (its target is c·u). Above ``UnlearningTrainer.frozen_memory_limit_bytes``, or with
``reference_mode="copy"`` / ``"adapter"``, live: the adapter-disabled model under PEFT, else a frozen copy.
"""

from __future__ import annotations

import logging
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.ops import (
    LossAveraging,
    TwoTermWeighting,
    answer_positions,
    average_tokens,
    resolve_weighting,
    select_parameters,
)
from medunlearn.unlearn.trainer import UnlearningTrainer

logger = logging.getLogger(__name__)

# The paper's layer and the depth of the model it belongs to (Llama-3-8B / Zephyr-7B: 32 decoder layers).
PAPER_LAYER = 7
PAPER_MODEL_LAYERS = 32


def activation_mse(
    activations: torch.Tensor,
    targets: torch.Tensor,
    mask: torch.Tensor,
    averaging: LossAveraging = "sequence",
    num_items: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """(1/d)‖a_t − target_t‖² averaged over the masked positions (``targets`` broadcast): ``"sequence"``
    mean_b over sequences of the mean over each one's positions, ``"token"`` one mean over all of them."""
    squared = (activations.float() - targets.float()).pow(2).mean(-1)
    return average_tokens(squared, mask, averaging, num_items)


def rmu_loss(
    forget_activations: torch.Tensor,
    control_vector: torch.Tensor,
    forget_mask: torch.Tensor,
    retain_activations: torch.Tensor,
    reference_retain_activations: torch.Tensor,
    retain_mask: torch.Tensor,
    weighting: TwoTermWeighting | None = None,
    **weights,
) -> dict[str, torch.Tensor]:
    w = resolve_weighting(weighting, weights)
    forget_loss = activation_mse(
        forget_activations, control_vector, forget_mask, w.averaging, w.forget_num_items
    )
    retain_loss = activation_mse(
        retain_activations, reference_retain_activations, retain_mask, w.averaging, w.retain_num_items
    )
    return w.combine(forget_loss, retain_loss)


def random_control_vector(hidden_size: int, steering_coeff: float, seed: int) -> torch.Tensor:
    """c · u with u uniform in [0,1)^d normalised to unit length (WMDP's construction), seeded."""
    generator = torch.Generator().manual_seed(seed)
    direction = torch.rand(hidden_size, generator=generator)
    return steering_coeff * direction / direction.norm()


_LAYER = re.compile(r"(^|\.)layers\.(\d+)$")


def count_decoder_layers(model: torch.nn.Module) -> int:
    """Number of decoder layers: modules named ``...layers.<i>`` (through PEFT and DDP wrappers)."""
    indices = {int(match.group(2)) for name, _ in model.named_modules() if (match := _LAYER.search(name))}
    return max(indices) + 1 if indices else 0


def default_rmu_layer(num_layers: int) -> int:
    """The steered layer when ``layer`` is unset: the paper's layer 7 when the model has it and more above it
    (more than 7 layers), otherwise the layer at the same relative depth, 7/32, rounded to the nearest layer
    with halves rounded up [ours].

    >>> tuple(default_rmu_layer(n) for n in (1, 2, 3, 4, 6, 7, 8, 32, 80))
    (0, 0, 1, 1, 1, 2, 7, 7, 7)
    """
    if num_layers < 1:
        raise UnlearningInputError("RMU needs a model with decoder layers (modules named `layers.<i>`)")
    if num_layers > PAPER_LAYER:
        return PAPER_LAYER
    return math.floor(PAPER_LAYER * num_layers / PAPER_MODEL_LAYERS + 0.5)


def find_layer(model: torch.nn.Module, layer: int) -> torch.nn.Module:
    """The decoder layer module named ``...layers.<layer>`` (works through PEFT and DDP wrappers)."""
    pattern = re.compile(rf"(^|\.)layers\.{layer}$")
    matches = [module for name, module in model.named_modules() if pattern.search(name)]
    if not matches:
        count = count_decoder_layers(model)
        raise UnlearningInputError(
            f"RMU layer {layer} does not exist: the model has {count} decoder layers (0..{count - 1})"
        )
    return matches[0]


@contextmanager
def capture_output(module: torch.nn.Module):
    """Record the (first) output tensor of ``module`` during the forward passes run inside the block."""
    captured: list[torch.Tensor] = []

    def hook(_module, _inputs, output):
        captured.append(output[0] if isinstance(output, tuple) else output)

    handle = module.register_forward_hook(hook)
    try:
        yield captured
    finally:
        handle.remove()


@dataclass
class RMUConfig(UnlearningConfig):
    r"""Configuration of :class:`RMUTrainer`, with OpenUnlearning's defaults (layer 7, as the AMNESIA paper).

    Parameters:
        layer (`int | None`, *optional*, defaults to `None`):
            Decoder layer (0-based) whose output is steered. Unset: the paper's layer 7 [AMNESIA paper,
            OpenUnlearning] on a model with more than 7 decoder layers, otherwise the layer at the same
            relative depth, 7/32 of the model's layers rounded to the nearest [ours]. The trainer writes the
            layer it resolved into this field, so the model card and ``unlearning_config.json`` record it.
        steering_coeff (`float`, *optional*, defaults to `20.0`):
            c, norm of the random control vector [WMDP; OpenUnlearning's class default, whose config sets 2:
            ``configs/trainer/RMU.yaml:8``, the ``open-unlearning`` preset's value].
        trainable_params_regex (`list[str] | None`, *optional*, defaults to `None`):
            Regexes (``re.search``) of the parameters trained under full fine-tuning; the rest are frozen.
            Unset: ``layers\.(l-2..l)\.mlp\.down_proj\.weight``, the steered layer and the two before it
            [WMDP; OpenUnlearning's class default; its config trains every parameter, ``[".*"]``
            (``configs/trainer/RMU.yaml:12-13``), the ``open-unlearning`` preset's value].
            Ignored under PEFT, where the adapter is trained.
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the steering term [OpenUnlearning].
        retain_weight (`float`, *optional*, defaults to `1.0`):
            α, weight of the retain activation term [OpenUnlearning].
        loss_averaging (`Literal["sequence", "token"]`, *optional*, defaults to `"sequence"`):
            Token averaging of both activation terms: ``"sequence"`` [ours, and the reference's] per answer,
            then over answers (``compute_activation_loss``, ``src/trainer/unlearn/rmu.py:108-117`` at
            d3d7cf9); ``"token"`` one mean over the batch's answer positions.

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

    # OpenUnlearning averages RMU's activation terms per sequence (rmu.py:108-117 at d3d7cf9).
    reference_loss_averaging = "sequence"

    layer: int | None = field(
        default=None,
        metadata={
            "help": "decoder layer whose output is steered (unset: 7, or depth 7/32 of a smaller model)"
        },
    )
    steering_coeff: float = field(default=20.0, metadata={"help": "c, norm of the random control vector"})
    trainable_params_regex: list[str] | None = field(
        default=None,
        metadata={"help": "regexes of trained parameters (default: mlp.down_proj.weight of layers l-2..l)"},
    )
    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the steering term"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain activation term"})

    def trainable_patterns(self) -> list[str]:
        """The regexes of the trained parameters; ``layer`` must be resolved (the trainer does it)."""
        if self.trainable_params_regex:
            return list(self.trainable_params_regex)
        layers = "|".join(str(i) for i in range(max(0, self.layer - 2), self.layer + 1))
        return [rf"layers\.({layers})\.mlp\.down_proj\.weight"]


class RMUTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = RMUConfig
    reference_usage = "model"
    uses_retain = True
    frozen_parts = ("retain",)

    @staticmethod
    def resolve_layer(model, args: RMUConfig) -> int:
        """``args.layer``, set to :func:`default_rmu_layer` of the model's depth when unset; checks it
        exists."""
        if args.layer is None:
            count = count_decoder_layers(model)
            args.layer = default_rmu_layer(count)
            if args.layer == PAPER_LAYER:
                logger.info("RMU steers decoder layer %d (the paper's layer)", args.layer)
            else:
                logger.warning(
                    "RMU steers decoder layer %d of %d: the paper's layer 7 at the same relative depth "
                    "(7/32) of this smaller model; set `layer` to choose another",
                    args.layer,
                    count,
                )
        find_layer(model, args.layer)
        return args.layer

    def configure_trainable_parameters(self, model, args: RMUConfig) -> None:
        self.resolve_layer(model, args)
        self.trainable_parameter_names = select_parameters(model, args.trainable_patterns())

    def __init__(self, *positional, **keywords):
        super().__init__(*positional, **keywords)
        # Under PEFT configure_trainable_parameters is not called: resolve here (a no-op when already done).
        self.resolve_layer(self.accelerator.unwrap_model(self.model), self.args)
        hidden_size = self.accelerator.unwrap_model(self.model).config.get_text_config().hidden_size
        self.control_vector = random_control_vector(hidden_size, self.args.steering_coeff, self.args.seed)

    def layer_activations(self, model, batch) -> torch.Tensor:
        with capture_output(find_layer(self.accelerator.unwrap_model(model), self.args.layer)) as captured:
            self.forward(model, batch)
        return captured[0]

    def read_reference(self, model, batch):
        """The reference's activations of the steered layer (precomputed at answer positions)."""
        return self.layer_activations(model, batch)

    def reference_positions(self, labels):
        return answer_positions(labels)

    def reference_width(self, model):
        return model.config.get_text_config().hidden_size

    def precompute_reference_outputs(self):
        # Under PEFT the layer is not resolved yet (configure_trainable_parameters was not called).
        self.resolve_layer(self.accelerator.unwrap_model(self.model), self.args)
        super().precompute_reference_outputs()

    def unlearning_loss(self, model, forget, retain):
        forget_activations, retain_activations = self.forward_pair(
            model, forget, retain, read=self.layer_activations
        )
        reference_activations = self.reference_outputs(model, "retain", retain)
        control = self.control_vector.to(forget_activations.device)
        return rmu_loss(
            forget_activations,
            control,
            forget["labels"] != -100,
            retain_activations,
            reference_activations,
            retain["labels"] != -100,
            self.two_term_weighting(),
        )

    def count_loss_tokens(self, part, batch):
        """Activations are compared at the answer positions themselves (labels ≠ −100, not shifted)."""
        return (batch["labels"] != -100).sum()
