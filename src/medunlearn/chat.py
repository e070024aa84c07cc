"""One QA example as a chat: how training (completion-only labels) and evaluation (scoring, generation) render it.

Both passes must see the same text for the same example, or the model is scored on turns it was never trained
on. The prompt is the user turn plus the generation prompt; the conversation adds the assistant turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from medunlearn.errors import InputError


class MissingChatTemplateError(InputError):
    """The tokenizer has no chat template, so prompts and completions cannot be delimited."""


def require_chat_template(tokenizer) -> None:
    if not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise MissingChatTemplateError(
            f"tokenizer {name!r} has no chat template: set tokenizer.chat_template (for example a ChatML template) "
            "so prompts and answers can be told apart"
        )


def render_prompts(tokenizer, questions: Sequence[str]) -> list[str]:
    """Each question as a user turn followed by the generation prompt: what the model sees before answering."""
    conversations = [[{"role": "user", "content": q}] for q in questions]
    return list(tokenizer.apply_chat_template(conversations, tokenize=False, add_generation_prompt=True))


def render_conversations(tokenizer, questions: Sequence[str], answers: Sequence[str]) -> list[str]:
    """Each (question, answer) as a user turn and an assistant turn."""
    conversations = [
        [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        for q, a in zip(questions, answers)
    ]
    return list(tokenizer.apply_chat_template(conversations, tokenize=False))
