"""bitsandbytes' CPU-kernel message is held back from runs that do not quantise, and shown to those that
do."""

from __future__ import annotations

import logging

from medunlearn.utils.logs import (
    BITSANDBYTES_CPU_LOGGER,
    hold_back_bitsandbytes_kernel_warning,
    release_bitsandbytes_kernel_warning,
)

MESSAGE = (
    "Failed to load CPU gemm_4bit_forward from kernels-community: %s. Please make sure you already "
    "`pip install kernels` and the kernels >= 0.11.1"
)


def test_the_kernel_message_is_held_back_until_4_bit_is_asked_for(caplog):
    import medunlearn  # noqa: F401  (installs the hold-back)

    logger = logging.getLogger(BITSANDBYTES_CPU_LOGGER)
    hold_back_bitsandbytes_kernel_warning()  # idempotent: still one filter
    assert sum(type(f).__name__ == "_HoldBack" for f in logger.filters) == 1
    try:
        with caplog.at_level(logging.WARNING, logger=BITSANDBYTES_CPU_LOGGER):
            logger.warning(MESSAGE, "No module named 'kernels'")
            logger.warning("another bitsandbytes warning")
            assert [r.getMessage() for r in caplog.records] == ["another bitsandbytes warning"]
            caplog.clear()

            from medunlearn.models import four_bit_quantization_config

            four_bit_quantization_config()  # this run quantises: the held-back message now concerns it
            released = [r.getMessage() for r in caplog.records]
            # (bitsandbytes' own message too, if this session imported it after medunlearn)
            assert MESSAGE % "No module named 'kernels'" in released
            assert all(m.startswith("Failed to load CPU gemm_4bit_forward") for m in released)
            release_bitsandbytes_kernel_warning()  # a no-op the second time
            assert len(caplog.records) == len(released)
    finally:
        hold_back_bitsandbytes_kernel_warning()
