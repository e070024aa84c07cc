"""Third-party log lines that do not concern a run, held back until they do.

bitsandbytes (0.50) logs "Failed to load CPU gemm_4bit_forward from kernels-community: No module named
'kernels'" the first time it is imported on a CPU with AVX512-BF16. It is imported by peft, which transformers
imports with ``TrainingArguments``, so every run printed it, though the kernel only serves 4-bit layers on the
CPU. Installing ``kernels`` would not help offline: it downloads the kernel from the Hub on first use.

:func:`hold_back_bitsandbytes_kernel_warning` (installed by ``import medunlearn``, before anything imports
bitsandbytes) keeps that one record instead of printing it; :func:`release_bitsandbytes_kernel_warning`,
called when 4-bit weights are asked for, prints what was held back.
"""

from __future__ import annotations

import logging

__all__ = ["hold_back_bitsandbytes_kernel_warning", "release_bitsandbytes_kernel_warning"]

BITSANDBYTES_CPU_LOGGER = "bitsandbytes.backends.cpu.ops"
KERNEL_MESSAGE_PREFIX = "Failed to load CPU gemm_4bit_forward from kernels-community"


class _HoldBack(logging.Filter):
    """Drops the kernel message and keeps it, to be printed if 4-bit weights are asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith(KERNEL_MESSAGE_PREFIX):
            self.held.append(record)
            return False
        return True


def _installed(logger: logging.Logger) -> _HoldBack | None:
    return next((f for f in logger.filters if isinstance(f, _HoldBack)), None)


def hold_back_bitsandbytes_kernel_warning() -> None:
    """Hold back bitsandbytes' CPU-kernel message (idempotent; does not import bitsandbytes)."""
    logger = logging.getLogger(BITSANDBYTES_CPU_LOGGER)
    if _installed(logger) is None:
        logger.addFilter(_HoldBack())


def release_bitsandbytes_kernel_warning() -> None:
    """Print the held-back message (once) and let later ones through: the run quantises, so it concerns it."""
    logger = logging.getLogger(BITSANDBYTES_CPU_LOGGER)
    hold_back = _installed(logger)
    if hold_back is None:
        return
    logger.removeFilter(hold_back)
    for record in hold_back.held:
        logger.handle(record)
