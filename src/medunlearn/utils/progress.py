"""Progress output that a command's output level decides (docs/getting-started.md, "The pinned environment").

transformers' Trainer writes every log (each ``logging_steps``, and the run's ``{'train_runtime': …}``
summary at the end) as a line through its progress bar (``ProgressCallback``), or prints it without one
(``PrinterCallback``, ``disable_tqdm``): a fine-tuning printed one per 10 steps, the demo one or more per
training run, each breaking its bar in two. :func:`bar_without_logs` keeps a Trainer's bar and drops those
lines at a command's default and ``--quiet`` levels; ``--verbose`` brings them back, and outside a command
(the Python API, a notebook) the Trainer prints them as it always did. The logs stay in
``trainer.state.log_history`` either way.

In a log file (stderr not a terminal) a bar is not redrawn in place: each redraw is kept, ten a second.
:data:`LOG_BAR_SECONDS` is how often a command lets tqdm redraw there (:func:`bar_environment`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["LEVEL_VARIABLE", "LOG_BAR_SECONDS", "bar_environment", "bar_without_logs", "trainer_logs_shown"]

# The output level of the running command (medunlearn.cli.verbosity sets it: quiet, default or verbose).
LEVEL_VARIABLE = "MEDUNLEARN_VERBOSITY"
# Ours: a long training still shows its progress in a log once a minute, a short one only its last state.
LOG_BAR_SECONDS = 60


def trainer_logs_shown(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the Trainer's log lines are printed: with ``--verbose``, and outside a command.

    >>> trainer_logs_shown({}), trainer_logs_shown({LEVEL_VARIABLE: "verbose"})
    (True, True)
    >>> trainer_logs_shown({LEVEL_VARIABLE: "default"}), trainer_logs_shown({LEVEL_VARIABLE: "quiet"})
    (False, False)
    """
    environ = os.environ if environ is None else environ
    return environ.get(LEVEL_VARIABLE, "verbose") == "verbose"


def bar_without_logs(trainer) -> None:
    """Keep ``trainer``'s progress bar, without the log lines it writes, unless :func:`trainer_logs_shown`.

    Call it after building the Trainer and before ``train()``."""
    if trainer_logs_shown():
        return
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.pop_callback(PrinterCallback)  # disable_tqdm: it only prints the logs
    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(_bar_only_callback())


def _bar_only_callback():
    """A ``ProgressCallback`` that draws the training steps' bar only: its ``on_log`` prints nothing and an
    evaluation during training draws no bar of its own (one bar per stage of work; transformers is imported
    here, on use)."""
    from transformers.trainer_callback import ProgressCallback

    class BarOnlyCallback(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            return None

        def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
            return None

    return BarOnlyCallback()


def bar_environment(stderr_is_terminal: bool) -> dict[str, str]:
    """The tqdm settings (environment variables, read when tqdm is imported) for bars drawn on a terminal or
    written to a log: in a log, a bar is redrawn at most every :data:`LOG_BAR_SECONDS` seconds, and when it
    closes. ``miniters`` 1 turns off tqdm's adaptive step count, whose monitor thread otherwise redraws a bar
    between two of its own redraws (every other minute, a second line a few seconds after the first).

    >>> bar_environment(True)
    {}
    >>> bar_environment(False)
    {'TQDM_MININTERVAL': '60', 'TQDM_MINITERS': '1'}
    """
    if stderr_is_terminal:
        return {}
    return {"TQDM_MININTERVAL": str(LOG_BAR_SECONDS), "TQDM_MINITERS": "1"}
