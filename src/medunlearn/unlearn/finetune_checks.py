"""What a fine-tuning run (``medunlearn finetune``, :func:`medunlearn.unlearn.run.run_finetune`) refuses
before any work: settings each stage sets itself, and a run that would train no step."""

from __future__ import annotations

from medunlearn.unlearn.errors import UnlearningInputError

# SFTConfig fields each fine-tuning stage sets itself, and why: given as an override, refused.
STAGE_SETTINGS = {
    "num_train_epochs": "the two stages have their own epochs: use --notes-epochs (stage 1, the notes) and "
    "--qa-epochs (stage 2, the QA)",
    "output_dir": "the model goes to --out (each stage trains in its staging folder)",
}


def check_finetune_trains(args, template, has_notes: bool) -> None:
    """Refuse a fine-tuning (``args``: its ``FinetuneArguments``) that would train no step, which would write
    the base model as "fine-tuned": the QA stage needs positive epochs (or a positive ``max_steps``), and
    epochs are never negative."""
    for flag, epochs in (("--notes-epochs", args.notes_epochs), ("--qa-epochs", args.qa_epochs)):
        if epochs < 0:
            raise UnlearningInputError(f"{flag} must be at least 0, got {epochs}")
    steps_cap = getattr(template, "max_steps", -1)  # Trainer: a positive max_steps overrides the epochs
    if args.qa_epochs == 0 and steps_cap <= 0:
        notes_stage = " (the notes stage alone does not make a fine-tuned QA model)" if has_notes else ""
        raise UnlearningInputError(
            f"--qa-epochs {args.qa_epochs} with --max_steps {steps_cap}: the QA stage would train 0 steps"
            f"{notes_stage}"
        )


__all__ = ["STAGE_SETTINGS", "check_finetune_trains"]
