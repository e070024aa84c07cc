"""Errors a user can cause in an unlearning run (light module: importing it does not import torch).

The commands print their message and exit non-zero without a traceback.
"""

from __future__ import annotations


class UnlearningInputError(ValueError):
    """Bad input to an unlearning run: the message names the file, config, row or field at fault."""


class EmptyForgetSetError(UnlearningInputError):
    """The forget set has no rows."""


class MissingChatTemplateError(UnlearningInputError):
    """The tokenizer has no chat template, so prompts and completions cannot be delimited."""


class NonFiniteLossError(UnlearningInputError):
    """The loss became NaN or infinite; checkpoints written before this step are kept."""
