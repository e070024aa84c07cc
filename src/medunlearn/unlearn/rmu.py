r"""Representation Misdirection for Unlearning (RMU).

    L_forget = mean_b (1/|y_b|) Σ_{t ∈ y_b} (1/d) ‖h^l_θ(x_b)_t − c·u‖²
    L_retain = mean_b (1/|y_b|) Σ_{t ∈ y_b} (1/d) ‖h^l_θ(x_b)_t − h^l_ref(x_b)_t‖²
    L = γ · L_forget + α · L_retain

h^l is the output of decoder layer ``layer`` (d its width), u a fixed random unit vector (uniform [0,1)^d,
normalised, seeded by ``seed``), c the steering coefficient. Only parameters matching ``trainable_params_regex``
are trained (full fine-tuning); under PEFT the adapter is trained. Li et al., "The WMDP Benchmark: Measuring and
Reducing Malicious Use with Unlearning", ICML 2024 (arXiv 2403.03218). Positions are the completion tokens of
each QA (as OpenUnlearning's RMU), averaged per sequence. Defaults as in OpenUnlearning: layer 7, trainable
``layers.(5|6|7).mlp.down_proj.weight`` (the layer and the two before it), c = 20, γ = α = 1. The AMNESIA paper
steers layer 7.

Reference (retain activations): the adapter-disabled model under PEFT, otherwise a frozen copy.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.ops import masked_sequence_mean, select_parameters
from medunlearn.unlearn.trainer import UnlearningTrainer


def activation_mse(activations: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """mean_b over sequences of the mean over masked positions of (1/d)‖a_t − target_t‖² (``targets`` broadcast)."""
    squared = (activations.float() - targets.float()).pow(2).mean(-1)
    return masked_sequence_mean(squared, mask).mean()


def rmu_loss(
    forget_activations: torch.Tensor,
    control_vector: torch.Tensor,
    forget_mask: torch.Tensor,
    retain_activations: torch.Tensor,
    reference_retain_activations: torch.Tensor,
    retain_mask: torch.Tensor,
    forget_weight: float = 1.0,
    retain_weight: float = 1.0,
) -> dict[str, torch.Tensor]:
    forget_loss = activation_mse(forget_activations, control_vector, forget_mask)
    retain_loss = activation_mse(retain_activations, reference_retain_activations, retain_mask)
    return {
        "loss": forget_weight * forget_loss + retain_weight * retain_loss,
        "forget_loss": forget_loss,
        "retain_loss": retain_loss,
    }


def random_control_vector(hidden_size: int, steering_coeff: float, seed: int) -> torch.Tensor:
    """c · u with u uniform in [0,1)^d normalised to unit length (WMDP's construction), seeded."""
    generator = torch.Generator().manual_seed(seed)
    direction = torch.rand(hidden_size, generator=generator)
    return steering_coeff * direction / direction.norm()


def find_layer(model: torch.nn.Module, layer: int) -> torch.nn.Module:
    """The decoder layer module named ``...layers.<layer>`` (works through PEFT and DDP wrappers)."""
    pattern = re.compile(rf"(^|\.)layers\.{layer}$")
    matches = [module for name, module in model.named_modules() if pattern.search(name)]
    if not matches:
        count = sum(1 for name, _ in model.named_modules() if re.search(r"(^|\.)layers\.\d+$", name))
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
        layer (`int`, *optional*, defaults to `7`):
            Decoder layer (0-based) whose output is steered [AMNESIA paper, OpenUnlearning].
        steering_coeff (`float`, *optional*, defaults to `20.0`):
            c, norm of the random control vector [OpenUnlearning].
        trainable_params_regex (`list[str] | None`, *optional*, defaults to `None`):
            Regexes (``re.search``) of the parameters trained under full fine-tuning; the rest are frozen.
            Unset: ``layers\.(l-2..l)\.mlp\.down_proj\.weight``, the steered layer and the two before it
            [OpenUnlearning, WMDP]. Ignored under PEFT, where the adapter is trained.
        forget_weight (`float`, *optional*, defaults to `1.0`):
            γ, weight of the steering term [OpenUnlearning].
        retain_weight (`float`, *optional*, defaults to `1.0`):
            α, weight of the retain activation term [OpenUnlearning].

    > [!NOTE]
    > The shared fields (retain sampling, reference mode, columns, ...) and the training defaults are those of
    > [`UnlearningConfig`]; this config overrides no further [`~transformers.TrainingArguments`] default.
    """

    layer: int = field(default=7, metadata={"help": "decoder layer whose output is steered"})
    steering_coeff: float = field(default=20.0, metadata={"help": "c, norm of the random control vector"})
    trainable_params_regex: list[str] | None = field(
        default=None,
        metadata={"help": "regexes of trained parameters (default: mlp.down_proj.weight of layers l-2..l)"},
    )
    forget_weight: float = field(default=1.0, metadata={"help": "γ, weight of the steering term"})
    retain_weight: float = field(default=1.0, metadata={"help": "α, weight of the retain activation term"})

    def trainable_patterns(self) -> list[str]:
        if self.trainable_params_regex:
            return list(self.trainable_params_regex)
        layers = "|".join(str(i) for i in range(max(0, self.layer - 2), self.layer + 1))
        return [rf"layers\.({layers})\.mlp\.down_proj\.weight"]


class RMUTrainer(UnlearningTrainer):
    __doc__ = __doc__
    config_class = RMUConfig
    reference_usage = "model"
    uses_retain = True

    def configure_trainable_parameters(self, model, args: RMUConfig) -> None:
        find_layer(model, args.layer)
        self.trainable_parameter_names = select_parameters(model, args.trainable_patterns())

    def __init__(self, *positional, **keywords):
        super().__init__(*positional, **keywords)
        hidden_size = self.accelerator.unwrap_model(self.model).config.get_text_config().hidden_size
        self.control_vector = random_control_vector(hidden_size, self.args.steering_coeff, self.args.seed)

    def layer_activations(self, model, batch) -> torch.Tensor:
        with capture_output(find_layer(self.accelerator.unwrap_model(model), self.args.layer)) as captured:
            self.forward(model, batch)
        return captured[0]

    def unlearning_loss(self, model, forget, retain):
        forget_activations = self.layer_activations(model, forget)
        retain_activations = self.layer_activations(model, retain)
        with self.reference(model) as reference_model:
            reference_activations = self.layer_activations(reference_model, retain)
        control = self.control_vector.to(forget_activations.device)
        return rmu_loss(
            forget_activations,
            control,
            forget["labels"] != -100,
            retain_activations,
            reference_activations,
            retain["labels"] != -100,
            self.args.forget_weight,
            self.args.retain_weight,
        )
