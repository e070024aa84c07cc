"""How questions are rendered, answers generated and answer tokens scored: our defaults and the reference's.

OpenUnlearning [ref] and the medunlearn runner agree on the metric definitions but differ in a few conventions.
Each is a field of :class:`TofuConventions`; ``PRESETS["open-unlearning"]`` selects the reference's:

================================  ===========================  =====================================
convention                        medunlearn                   open-unlearning [ref]
================================  ===========================  =====================================
prompt rendering                  tokenizer's chat template,   chat template with the system prompt
                                  no system prompt             "You are a helpful assistant."
max new tokens (greedy)           64                           64 (configs/generation/default.yaml)
stop strings (text cut after)     none (EOS token only)        none in the TOFU config (EOS only)
EOS in Prob / truth ratio labels  yes                          yes (appended when missing)
EOS in ES / EM / min-k tokens     yes                          no (the last label token is dropped)
min-k% token count                ceil(k·n)                    max(1, floor(k·n))
min-k%++ variance floor           1e-24                        1e-6
extraction strength, no suffix    0 (k = n)                    1/n (the loop stops at k = n − 1)
  of the greedy answer matches
ratio denominators                exact                        + 1e-10
================================  ===========================  =====================================

``PRESETS["open-unlearning-llama3"]`` renders without a chat template, with the literal Llama-3 tags of
OpenUnlearning's ``configs/model/Llama-3.2-*-Instruct.yaml`` (system prompt included), as the reference does
for its TOFU Llama models. With a chat template, the runner scores the answer tokens up to and including the
end-of-turn token; the reference also scores what the template writes after it (a newline for ChatML) plus an
appended EOS. With the tag rendering (or Llama-3's template) nothing follows and both score the same tokens.

:class:`ConventionTokenizer` applies the rendering conventions to the unchanged evaluation runner: the runner
renders every example through ``tokenizer.apply_chat_template``, and this wrapper answers that call the way the
chosen convention renders (adding the system prompt, or the literal tags). The scoring conventions are applied
when the stored per-token outputs are turned into metrics (:mod:`medunlearn.tofu.scoring`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from medunlearn.errors import InputError


@dataclass(frozen=True)
class TofuConventions:
    """Rendering, generation and scoring conventions of a TOFU evaluation (see the module table).

    Args:
        name: preset name, recorded in the summary.
        chat_template: render with the tokenizer's chat template; False renders with the literal tags below.
        system_prompt: a system message placed before the question (chat template rendering).
        prompt_prefix: text before everything in tag rendering (e.g. the system block with special tokens).
        user_start_tag, user_end_tag, assistant_start_tag: tag rendering of ``question`` and the answer slot.
        max_new_tokens: greedy generation stops at EOS or after this many tokens.
        stop_strings: a generated answer is cut before the first of these strings, then stripped.
        score_eos: Prob, truth ratio and the loss count the end-of-answer token.
        tokenwise_score_eos: extraction strength, exact memorisation and min-k% count it.
        min_k_count: ``"ceil"`` takes ceil(k·n) tokens; ``"floor"`` max(1, floor(k·n)) as the reference.
        extraction_strength: ``"exact"`` 1 − k/n with k the shortest prefix after which the greedy
            continuation is right (0 when even the last token is wrong); ``"reference"`` caps k at n − 1.
        epsilon: added to ratio denominators (the reference uses 1e-10).
        variance_floor: min-k%++ divides by sqrt(max(Var, variance_floor)) (the reference clamps at 1e-6).
    """

    name: str = "medunlearn"
    chat_template: bool = True
    system_prompt: str | None = None
    prompt_prefix: str = ""
    user_start_tag: str = ""
    user_end_tag: str = ""
    assistant_start_tag: str = ""
    max_new_tokens: int = 64
    stop_strings: tuple[str, ...] = ()
    score_eos: bool = True
    tokenwise_score_eos: bool = True
    min_k_count: str = "ceil"
    extraction_strength: str = "exact"
    epsilon: float = 0.0
    variance_floor: float = 1e-24

    def __post_init__(self):
        if self.min_k_count not in ("ceil", "floor"):
            raise InputError(f"min_k_count must be 'ceil' or 'floor', got {self.min_k_count!r}")
        if self.extraction_strength not in ("exact", "reference"):
            raise InputError(
                f"extraction_strength must be 'exact' or 'reference', got {self.extraction_strength!r}"
            )
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")

    def to_dict(self) -> dict:
        values = asdict(self)
        values["stop_strings"] = list(self.stop_strings)
        return values

    def with_options(self, **changes) -> TofuConventions:
        """A copy with some fields changed (``None`` values are ignored, so CLI defaults pass through)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


_REFERENCE_SCORING = {
    "score_eos": True,
    "tokenwise_score_eos": False,
    "min_k_count": "floor",
    "extraction_strength": "reference",
    "epsilon": 1e-10,
    "variance_floor": 1e-6,
    "max_new_tokens": 64,  # OpenUnlearning's configs/generation/default.yaml, used by every TOFU metric
}

PRESETS: dict[str, TofuConventions] = {
    "medunlearn": TofuConventions(),
    "open-unlearning": TofuConventions(
        name="open-unlearning", system_prompt="You are a helpful assistant.", **_REFERENCE_SCORING
    ),
    "open-unlearning-llama3": TofuConventions(
        name="open-unlearning-llama3",
        chat_template=False,
        prompt_prefix="<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>",
        user_start_tag="<|start_header_id|>user<|end_header_id|>\n\n",
        user_end_tag="<|eot_id|>",
        assistant_start_tag="<|start_header_id|>assistant<|end_header_id|>\n\n",
        **_REFERENCE_SCORING,
    ),
}


def preset(name: str) -> TofuConventions:
    """A named preset (``medunlearn``, ``open-unlearning``, ``open-unlearning-llama3``)."""
    if name not in PRESETS:
        raise InputError(f"unknown conventions preset {name!r}; known: {', '.join(PRESETS)}")
    return PRESETS[name]


class ConventionTokenizer:
    """A tokenizer whose ``apply_chat_template`` renders by ``conventions``; everything else is the wrapped one.

    Only string rendering (``tokenize=False``, what the runner asks for) is supported. Tag rendering writes the
    tokenizer's EOS after the answer, as the reference appends it to its labels.
    """

    def __init__(self, tokenizer, conventions: TofuConventions):
        self._tokenizer = tokenizer
        self._conventions = conventions

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def __call__(self, *args, **kwargs):
        return self._tokenizer(*args, **kwargs)

    def _render_tags(self, conversation, add_generation_prompt: bool) -> str:
        c = self._conventions
        text = c.prompt_prefix
        for message in conversation:
            if message["role"] == "user":
                text += c.user_start_tag + message["content"] + c.user_end_tag
            elif message["role"] == "assistant":
                text += c.assistant_start_tag + message["content"] + self._tokenizer.eos_token
        if add_generation_prompt:
            text += c.assistant_start_tag
        return text

    def apply_chat_template(
        self, conversations, tokenize: bool = False, add_generation_prompt: bool = False, **kwargs
    ):
        if tokenize:
            raise ValueError("ConventionTokenizer renders text only (tokenize=False)")
        single = bool(conversations) and isinstance(conversations[0], dict)
        batch = [conversations] if single else list(conversations)
        c = self._conventions
        if c.chat_template:
            if c.system_prompt:
                batch = [
                    [{"role": "system", "content": c.system_prompt}, *conversation] for conversation in batch
                ]
            rendered = self._tokenizer.apply_chat_template(
                batch, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
            )
        else:
            rendered = [self._render_tags(conversation, add_generation_prompt) for conversation in batch]
        return rendered[0] if single else list(rendered)


__all__ = ["PRESETS", "ConventionTokenizer", "TofuConventions", "preset"]
