"""The method table: the one place that maps a method's name to its module, classes, aliases and summary.

Names are resolved from this table alone; a method's module is imported only when the method is used
(``MethodSpec.load``), so listing and resolving are instant and never import torch. A module that fails to
import raises its own error there, with its traceback: a bug or a missing dependency, never "unknown method".
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

from medunlearn.unlearn.errors import UnlearningInputError


class UnknownMethodError(UnlearningInputError):
    """``--method`` names no known method."""


@dataclass(frozen=True)
class MethodSpec:
    stem: str
    module: str
    config_class: str
    trainer_class: str
    aliases: tuple[str, ...]
    summary: str

    def load(self):
        """``(ConfigClass, TrainerClass)``, importing the module now."""
        module = importlib.import_module(self.module)
        return getattr(module, self.config_class), getattr(module, self.trainer_class)


_PKG = "medunlearn.unlearn"

# stem, config class, trainer class, aliases (papers' spellings), one-line summary
METHODS: dict[str, MethodSpec] = {
    spec.stem: spec
    for spec in [
        MethodSpec(
            "grad_ascent",
            f"{_PKG}.grad_ascent",
            "GradAscentConfig",
            "GradAscentTrainer",
            ("GradAscent", "GA", "gradient_ascent"),
            "gradient ascent on the forget NLL",
        ),
        MethodSpec(
            "grad_diff",
            f"{_PKG}.grad_diff",
            "GradDiffConfig",
            "GradDiffTrainer",
            ("GradDiff", "GD", "grad-diff"),
            "ascent on forget NLL + descent on retain NLL",
        ),
        MethodSpec(
            "kl_min",
            f"{_PKG}.kl_min",
            "KLMinConfig",
            "KLMinTrainer",
            ("KL-Min", "KLMin", "KL", "kl-min"),
            "ascent on forget NLL + KL(ref‖θ) on retain completions",
        ),
        MethodSpec(
            "npo",
            f"{_PKG}.npo",
            "NPOConfig",
            "NPOTrainer",
            ("NPO",),
            "negative preference optimisation vs precomputed reference log-probs (+ retain NLL)",
        ),
        MethodSpec(
            "simnpo",
            f"{_PKG}.simnpo",
            "SimNPOConfig",
            "SimNPOTrainer",
            ("SimNPO", "sim_npo", "sim-npo"),
            "reference-free, length-normalised NPO (+ retain NLL)",
        ),
        MethodSpec(
            "rmu",
            f"{_PKG}.rmu",
            "RMUConfig",
            "RMUTrainer",
            ("RMU",),
            "steer layer-l activations of forget data to a random vector; keep retain ones",
        ),
        MethodSpec(
            "idk_dpo",
            f"{_PKG}.idk_dpo",
            "IdkDPOConfig",
            "IdkDPOTrainer",
            ("IdkDPO", "idk-dpo"),
            "DPO preferring 'I don't know' answers on forget questions",
        ),
        MethodSpec(
            "undial",
            f"{_PKG}.undial",
            "UNDIALConfig",
            "UNDIALTrainer",
            ("UNDIAL",),
            "self-distillation to reference logits with the forget token's logit lowered",
        ),
        MethodSpec(
            "wga",
            f"{_PKG}.wga",
            "WGAConfig",
            "WGATrainer",
            ("WGA",),
            "weighted gradient ascent: forget tokens weighted by their probability",
        ),
        MethodSpec(
            "satimp",
            f"{_PKG}.satimp",
            "SatImpConfig",
            "SatImpTrainer",
            ("SatImp",),
            "token-weighted ascent, weights p^β1 (1−p)^β2 (saturation × importance)",
        ),
        MethodSpec(
            "ce_u",
            f"{_PKG}.ce_u",
            "CEUConfig",
            "CEUTrainer",
            ("CE-U", "CEU", "ce-u"),
            "cross-entropy to the model's own distribution with the answer token removed",
        ),
        MethodSpec(
            "pdu",
            f"{_PKG}.pdu",
            "PDUConfig",
            "PDUTrainer",
            ("PDU",),
            "primal-dual: forget loss under a bound on the retain loss (dual ascent on λ)",
        ),
    ]
}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def _alias_index() -> dict[str, str]:
    index = {}
    for stem, spec in METHODS.items():
        for name in (stem, *spec.aliases):
            index[_normalise(name)] = stem
    return index


def is_available(stem: str) -> bool:
    """Whether the method's module is installed (found on the path; it is not imported)."""
    return importlib.util.find_spec(METHODS[stem].module) is not None


def available_methods() -> dict[str, MethodSpec]:
    """The table restricted to methods whose module is installed."""
    return {stem: spec for stem, spec in METHODS.items() if is_available(stem)}


def resolve_method(name: str) -> MethodSpec:
    """Look a method up by stem or alias, case-insensitively (``GradDiff``, ``grad-diff``, ``GRAD_DIFF``).

    Only the table is read: no module is imported, so an error in a method's module surfaces in ``load``.
    """
    stem = _alias_index().get(_normalise(name))
    if stem is None:
        known = ", ".join(METHODS)
        raise UnknownMethodError(f"unknown unlearning method {name!r}; known methods: {known}")
    return METHODS[stem]


def get_method(name: str):
    """``(ConfigClass, TrainerClass)`` of a method named by stem or alias."""
    return resolve_method(name).load()
