"""Raw-text rendering for the evaluation runner: a prompt and its continuation joined as they are, no chat
template, tokenised with the tokenizer's special tokens.

The runner (:mod:`medunlearn.evaluation.runner`) renders every example through ``apply_chat_template`` and
tokenises without special tokens (a template writes them). Text that was trained as raw text, a MUSE corpus
(:mod:`medunlearn.muse.rendering`) or an AMNESIA note (:mod:`medunlearn.evaluation.notes_memorization`), is
scored and continued the way it was read instead: :class:`RawTextRendering` answers the runner's calls so.
"""

from __future__ import annotations

from medunlearn.chat import text_only_batch


class RawTextRendering:
    """A tokenizer whose ``apply_chat_template`` joins a conversation's texts as they are (no template) and
    whose ``__call__`` adds the tokenizer's special tokens, as OpenUnlearning tokenises MUSE
    (:mod:`medunlearn.muse.rendering`) and fine-tuning's notes stage reads a note; everything else is the
    wrapped tokenizer's.

    >>> from types import SimpleNamespace
    >>> rendering = RawTextRendering(SimpleNamespace(eos_token="</s>"))
    >>> rendering.apply_chat_template([[{"role": "user", "content": "Once"}], [
    ...     {"role": "user", "content": "Once"}, {"role": "assistant", "content": " upon"}]])
    ['Once', 'Once upon']
    """

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def __call__(self, text, *args, add_special_tokens: bool = True, **kwargs):
        # The runner asks for no special tokens (its templates write them); raw text gets the tokenizer's.
        return self._tokenizer(text, *args, add_special_tokens=True, **kwargs)

    def apply_chat_template(
        self, conversations, tokenize: bool = False, add_generation_prompt: bool = False, **kwargs
    ):
        batch, single = text_only_batch(conversations, tokenize, "RawTextRendering")
        rendered = []
        for conversation in batch:
            roles = [message["role"] for message in conversation]
            if roles not in (["user"], ["user", "assistant"]):
                raise ValueError(f"raw text renders a prompt and its continuation, not turns {roles}")
            rendered.append("".join(message["content"] for message in conversation))
        return rendered[0] if single else rendered


__all__ = ["RawTextRendering"]
