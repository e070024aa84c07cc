"""The settings of notes memorization (:mod:`medunlearn.evaluation.notes_memorization`), in a module of their
own: ``medunlearn evaluate``'s parser reads their defaults without importing the evaluation."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from medunlearn.errors import InputError


@dataclass(frozen=True)
class NotesMemorizationConfig:
    """How notes are cut and scored (the module's metric card gives the formulas).

    Args:
        prefix_words: ``P``, the words of the prompt.
        continuation_words: ``C``, the words of the continuation scored against the generation.
        max_new_tokens: ``T``, the greedy continuation's length; ``None``: ``2·C``.
        min_k: the share of lowest-probability tokens of Min-K% Prob (MUSE's 0.4).
    """

    prefix_words: int = 32
    continuation_words: int = 64
    max_new_tokens: int | None = None
    min_k: float = 0.4

    def __post_init__(self):
        for name in ("prefix_words", "continuation_words"):
            if getattr(self, name) < 1:
                raise InputError(f"notes memorization: {name} must be at least 1, got {getattr(self, name)}")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise InputError(
                f"notes memorization: max_new_tokens must be at least 1, got {self.max_new_tokens}"
            )
        if not 0.0 < self.min_k <= 1.0:
            raise InputError(f"notes memorization: min_k must be in (0, 1], got {self.min_k}")

    @property
    def generation_tokens(self) -> int:
        """``T``: ``max_new_tokens``, or ``2·C`` when it is not set."""
        return self.max_new_tokens or 2 * self.continuation_words

    def to_dict(self) -> dict:
        return {**asdict(self), "max_new_tokens": self.generation_tokens}

    @classmethod
    def from_dict(cls, values: dict) -> NotesMemorizationConfig:
        return cls(
            **{key: values[key] for key in ("prefix_words", "continuation_words", "max_new_tokens", "min_k")}
        )


__all__ = ["NotesMemorizationConfig"]
