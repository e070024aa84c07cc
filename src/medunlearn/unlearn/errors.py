"""Errors a user can cause in an unlearning run (light module: importing it does not import torch).

The commands print their message and exit non-zero without a traceback.
"""

from __future__ import annotations

from medunlearn.chat import MissingChatTemplateError  # raised where prompts are rendered; re-exported
from medunlearn.errors import MedunlearnError


class UnlearningInputError(MedunlearnError, ValueError):
    """Bad input to an unlearning run: the message names the file, config, row or field at fault."""


class EmptyForgetSetError(UnlearningInputError):
    """The forget set has no rows."""


class NonFiniteLossError(UnlearningInputError):
    """The loss became NaN or infinite; checkpoints written before this step are kept."""


__all__ = [
    "EmptyForgetSetError",
    "MissingChatTemplateError",
    "NonFiniteLossError",
    "UnlearningInputError",
]
