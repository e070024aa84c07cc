"""Attacks on forgetting: does a patient come back after a few gradient steps, a 4-bit load, a reworded
question? (docs/attacks.md)

- :mod:`~medunlearn.attacks.relearning`: fine-tune k steps on related data (Hu et al. arXiv 2406.13356,
  Che et al. arXiv 2502.05209, Łucki et al. arXiv 2409.18025);
- :mod:`~medunlearn.attacks.quantization`: 8-bit and 4-bit NF4 weights (Zhang et al. ICLR 2025);
- :mod:`~medunlearn.attacks.probing`: paraphrased questions (Lynch et al. arXiv 2402.16835);
- :mod:`~medunlearn.attacks.hidden_probe`: a hidden-state probe of the disease, beside a baseline that never
  saw the patients (the retain model, or a text-only classifier of the questions);
- :mod:`~medunlearn.attacks.membership`: the forget patients' seen vs holdout QA (loss, zlib, min-k%,
  min-k%++, reference), beside the before and retain models' AUCs;
- :mod:`~medunlearn.attacks.summary`: recovered share, worst-case recovery beside AFE and MU, table and plot;
- :mod:`~medunlearn.attacks.recovery`: patient-bootstrap intervals of every recovered share, and the
  selection-aware worst case (interval, win shares, verdict);
- :mod:`~medunlearn.attacks.run`: :func:`run_attacks`, the Python API under ``medunlearn attack``.

>>> from medunlearn.attacks import AttackArguments, run_attacks  # doctest: +SKIP
>>> run_attacks(  # doctest: +SKIP
...     AttackArguments(["ckpt/grad_diff"], "ckpt/finetuned", "amnesia", "forget_10", "attacks/grad_diff")
... )
"""

from medunlearn.attacks.relearning import AttackInputError, RelearnConfig, relearning_attack
from medunlearn.attacks.run import ATTACKS, AttackArguments, run_attacks
from medunlearn.attacks.summary import recovered_share, robustness_summary

__all__ = [
    "ATTACKS",
    "AttackArguments",
    "AttackInputError",
    "RelearnConfig",
    "recovered_share",
    "relearning_attack",
    "robustness_summary",
    "run_attacks",
]
