"""Compatibility module: the shared unlearning machinery, re-exported from the modules that now hold it.

``base.py`` used to hold eight jobs; each now has its module, and new code imports from there:

* ``medunlearn.unlearn.config``: ``UnlearningConfig``;
* ``medunlearn.unlearn.data``: tokenising, forget/retain pairing, collation (and the batches a method sees);
* ``medunlearn.unlearn.ops``: log-probs and losses on tensors (and the loss reduction), parameter selection;
* ``medunlearn.unlearn.trainer``: ``UnlearningTrainer`` (and how to add a method, the reference policy);
* ``medunlearn.unlearn.errors``: the errors a user can cause;
* ``medunlearn.utils.distributed``: ``leave_process_group``.
"""

from __future__ import annotations

from medunlearn.unlearn.config import UnlearningConfig
from medunlearn.unlearn.data import (
    EpochPairingCallback,
    ForgetRetainCollator,
    ForgetRetainDataset,
    collate_examples,
    sample_retain_indices,
    tokenize_prompt_completion,
    tokenize_qa_dataset,
)
from medunlearn.unlearn.errors import (
    EmptyForgetSetError,
    MissingChatTemplateError,
    NonFiniteLossError,
    UnlearningInputError,
)
from medunlearn.unlearn.ops import (
    IGNORE_INDEX,
    answer_soft_cross_entropy,
    completion_lengths,
    completion_token_logps,
    kl_to_reference,
    masked_sequence_mean,
    nll_loss,
    select_parameters,
    sequence_logps,
    sequence_mean_nll,
    shift_for_next_token,
)
from medunlearn.unlearn.trainer import ReferenceUsage, UnlearningLoss, UnlearningTrainer
from medunlearn.utils.distributed import leave_process_group

__all__ = [
    "IGNORE_INDEX",
    "EmptyForgetSetError",
    "EpochPairingCallback",
    "ForgetRetainCollator",
    "ForgetRetainDataset",
    "MissingChatTemplateError",
    "NonFiniteLossError",
    "ReferenceUsage",
    "UnlearningConfig",
    "UnlearningInputError",
    "UnlearningLoss",
    "UnlearningTrainer",
    "answer_soft_cross_entropy",
    "collate_examples",
    "completion_lengths",
    "completion_token_logps",
    "kl_to_reference",
    "leave_process_group",
    "masked_sequence_mean",
    "nll_loss",
    "sample_retain_indices",
    "select_parameters",
    "sequence_logps",
    "sequence_mean_nll",
    "shift_for_next_token",
    "tokenize_prompt_completion",
    "tokenize_qa_dataset",
]
