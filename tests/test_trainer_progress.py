"""The Trainer's bar without its log lines at a command's default level (medunlearn.utils.progress)."""

from __future__ import annotations

import doctest

import pytest

from medunlearn.utils import progress
from medunlearn.utils.progress import LEVEL_VARIABLE, bar_without_logs


class _Trainer:
    """What ``bar_without_logs`` uses of a ``transformers.Trainer``: its callback handler."""

    def __init__(self, callbacks):
        from transformers.trainer_callback import CallbackHandler

        self.callback_handler = CallbackHandler(callbacks, None, None, None, None)

    def pop_callback(self, callback):
        return self.callback_handler.pop_callback(callback)

    def add_callback(self, callback):
        self.callback_handler.add_callback(callback)

    def train_one_logged_step(self) -> None:
        from transformers import TrainingArguments
        from transformers.trainer_callback import TrainerControl, TrainerState

        args, state = TrainingArguments(output_dir="unused", report_to="none"), TrainerState(max_steps=1)
        handler, control = self.callback_handler, TrainerControl()
        handler.on_train_begin(args, state, control)
        state.global_step = 1
        handler.on_step_end(args, state, control)
        handler.on_log(args, state, control, {"loss": 1.25, "train_runtime": 0.5})
        handler.on_train_end(args, state, control)

    def evaluate_three_batches(self) -> None:
        """What the Trainer's evaluation loop tells the callbacks: a step per batch, then the metrics."""
        from transformers import TrainingArguments
        from transformers.trainer_callback import TrainerControl, TrainerState

        args, state = TrainingArguments(output_dir="unused", report_to="none"), TrainerState(max_steps=1)
        handler, control = self.callback_handler, TrainerControl()
        handler.eval_dataloader = [1, 2, 3]  # the handler passes it to every callback
        for _ in range(3):
            handler.on_prediction_step(args, state, control)
        handler.on_evaluate(args, state, control, metrics={"eval_loss": 1.0})


def _trainer(disable_tqdm: bool) -> _Trainer:
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    return _Trainer([PrinterCallback() if disable_tqdm else ProgressCallback()])


@pytest.mark.parametrize("disable_tqdm", [False, True])
@pytest.mark.parametrize("level", ["default", "quiet"])
def test_a_command_keeps_the_bar_and_drops_the_log_lines(monkeypatch, capsys, level, disable_tqdm):
    monkeypatch.setenv(LEVEL_VARIABLE, level)
    trainer = _trainer(disable_tqdm)
    bar_without_logs(trainer)
    trainer.train_one_logged_step()
    out, err = capsys.readouterr()
    assert "train_runtime" not in out + err
    assert ("1/1" in err) is not disable_tqdm  # the bar is drawn unless the Trainer was told not to


@pytest.mark.parametrize("level", ["verbose", None])
def test_verbose_and_the_python_api_print_the_log_lines(monkeypatch, capsys, level):
    if level is None:
        monkeypatch.delenv(LEVEL_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(LEVEL_VARIABLE, level)
    trainer = _trainer(disable_tqdm=False)
    bar_without_logs(trainer)
    trainer.train_one_logged_step()
    assert "'train_runtime': '0.5'" in capsys.readouterr().out


def test_an_evaluation_during_training_draws_no_second_bar(monkeypatch, capsys):
    """One bar per stage: the steps' bar, not one more per evaluation (the BioDivergence baseline evaluates on
    dev every epoch); the Trainer's own callback would draw a 3-batch bar here."""
    monkeypatch.setenv(LEVEL_VARIABLE, "default")
    trainer = _trainer(disable_tqdm=False)
    bar_without_logs(trainer)
    trainer.evaluate_three_batches()
    assert "3/3" not in capsys.readouterr().err
    monkeypatch.setenv(LEVEL_VARIABLE, "verbose")  # the library's own output: its evaluation bar
    trainer = _trainer(disable_tqdm=False)
    bar_without_logs(trainer)
    trainer.evaluate_three_batches()
    assert "3/3" in capsys.readouterr().err


def test_module_doctests():
    assert doctest.testmod(progress).failed == 0
