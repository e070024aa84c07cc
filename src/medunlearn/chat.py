"""One QA example as a chat: how training (completion-only labels) and evaluation (scoring, generation) render
it.

Both passes must see the same text for the same example, or the model is scored on turns it was never trained
on. The prompt is the user turn plus the generation prompt; the conversation adds the assistant turn.

How a run renders (system prompt, chat template or literal tags, EOS after the answer), how long it generates
and where it cuts, are the run's :class:`Conventions`, chosen once (a preset of :data:`PRESETS`, e.g.
``open-unlearning``) and used by ``finetune``, ``unlearn`` and ``evaluate`` alike. Each model folder records
them (``conventions.json``, :func:`write_model_conventions`); an evaluation warns when the model's recorded
conventions render differently from its own (:func:`warn_if_conventions_differ`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from medunlearn.errors import FileContentError, InputError
from medunlearn.utils.user_files import json_type_name, read_json


class MissingChatTemplateError(InputError):
    """The tokenizer has no chat template, so prompts and completions cannot be delimited."""


def require_chat_template(tokenizer, conventions: Conventions | None = None) -> None:
    """Raise ``MissingChatTemplateError`` unless the tokenizer has a template (or ``conventions`` render with
    literal tags, which need none)."""
    if conventions is not None and not conventions.chat_template:
        return
    if not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise MissingChatTemplateError(
            f"tokenizer {name!r} has no chat template: set tokenizer.chat_template (for example a ChatML "
            "template) so prompts and answers can be told apart"
        )


def rendering_tokenizer(tokenizer, conventions: Conventions | None = None):
    """The tokenizer whose ``apply_chat_template`` renders by ``conventions`` (the tokenizer itself when they
    render as its own template does: no system prompt, no tags)."""
    if conventions is None or conventions.renders_like_template():
        return tokenizer
    if isinstance(tokenizer, ConventionTokenizer):
        return tokenizer
    return ConventionTokenizer(tokenizer, conventions)


def render_prompts(tokenizer, questions: Sequence[str], conventions: Conventions | None = None) -> list[str]:
    """Each question as a user turn followed by the generation prompt: what the model sees before
    answering."""
    conversations = [[{"role": "user", "content": q}] for q in questions]
    tokenizer = rendering_tokenizer(tokenizer, conventions)
    return list(tokenizer.apply_chat_template(conversations, tokenize=False, add_generation_prompt=True))


def render_conversations(
    tokenizer, questions: Sequence[str], answers: Sequence[str], conventions: Conventions | None = None
) -> list[str]:
    """Each (question, answer) as a user turn and an assistant turn."""
    conversations = [
        [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        for q, a in zip(questions, answers)
    ]
    tokenizer = rendering_tokenizer(tokenizer, conventions)
    return list(tokenizer.apply_chat_template(conversations, tokenize=False))


# ------------------------------------------------------------------------------------------------------------
# Conventions: chosen once per run, used by finetune, unlearn and evaluate alike
# ------------------------------------------------------------------------------------------------------------

RENDERING_FIELDS = (
    "chat_template",
    "system_prompt",
    "prompt_prefix",
    "user_start_tag",
    "user_end_tag",
    "assistant_start_tag",
)
"""The fields that decide the tokens of a prompt and its answer: training and evaluation must agree."""

CONVENTIONS_FILE = "conventions.json"
"""Written beside the weights of every model ``medunlearn finetune`` and ``medunlearn unlearn`` write."""


class ConventionsMismatchWarning(UserWarning):
    """A model is evaluated with conventions that render prompts unlike those it was trained with."""


@dataclass(frozen=True)
class Conventions:
    """Rendering, generation, scoring and loss conventions of a run (:mod:`medunlearn.tofu.conventions`).

    Args:
        name: preset name, recorded in model cards and evaluation summaries.
        chat_template: render with the tokenizer's chat template; False renders with the literal tags below.
        system_prompt: a system message placed before the question (chat template rendering).
        prompt_prefix: text before everything in tag rendering (e.g. the system block with special tokens).
        user_start_tag, user_end_tag, assistant_start_tag: tag rendering of ``question`` and the answer slot;
            tag rendering writes the tokenizer's EOS after the answer (the reference appends it to labels).
        max_new_tokens: greedy generation stops at EOS or after this many tokens.
        stop_strings: a generated answer is cut before the first of these strings, then stripped.
        score_eos: Prob, truth ratio and the loss count the end-of-answer token.
        tokenwise_score_eos: extraction strength, exact memorisation and min-k% count it.
        min_k_count: ``"ceil"`` takes ceil(k·n) tokens; ``"floor"`` max(1, floor(k·n)) as the reference.
        extraction_strength: ``"exact"`` 1 − k/n with k the shortest prefix after which the greedy
            continuation is right (0 when even the last token is wrong); ``"reference"`` caps k at n − 1.
        epsilon: added to ratio denominators (the reference uses 1e-10).
        variance_floor: min-k%++ divides by sqrt(max(Var, variance_floor)) (the reference clamps at 1e-6).
        loss_averaging: how unlearning losses average tokens when the method's config is built under these
            conventions: ``"sequence"`` or ``"token"`` for every method, ``"reference"`` each method's choice
            in the reference implementation (``UnlearningConfig.reference_loss_averaging``).
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
    loss_averaging: str = "sequence"

    def __post_init__(self):
        if self.min_k_count not in ("ceil", "floor"):
            raise InputError(f"min_k_count must be 'ceil' or 'floor', got {self.min_k_count!r}")
        if self.extraction_strength not in ("exact", "reference"):
            raise InputError(
                f"extraction_strength must be 'exact' or 'reference', got {self.extraction_strength!r}"
            )
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.loss_averaging not in ("sequence", "token", "reference"):
            raise InputError(
                f"loss_averaging must be 'sequence', 'token' or 'reference', got {self.loss_averaging!r}"
            )

    def to_dict(self) -> dict:
        values = asdict(self)
        values["stop_strings"] = list(self.stop_strings)
        return values

    @classmethod
    def from_dict(cls, values: dict) -> Conventions:
        """Conventions from :meth:`to_dict`'s output (a run.json, a model's ``conventions.json``)."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in values.items() if key in known}
        if "stop_strings" in values:
            values["stop_strings"] = tuple(values["stop_strings"])
        return cls(**values)

    def with_options(self, **changes) -> Conventions:
        """A copy with some fields changed (``None`` values are ignored, so CLI defaults pass through)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def rendering(self) -> dict:
        """The fields that decide the prompt and answer tokens (:data:`RENDERING_FIELDS`)."""
        return {name: getattr(self, name) for name in RENDERING_FIELDS}

    def renders_like_template(self) -> bool:
        """True when rendering is the tokenizer's own chat template, unchanged (no system prompt, no tags)."""
        return self.chat_template and not self.system_prompt

    def prompt_messages(self, question: str) -> list[dict[str, str]]:
        """The prompt of ``question`` as chat messages (chat template rendering): system prompt, user turn."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return [*system, {"role": "user", "content": question}]


_REFERENCE_SCORING = {
    "score_eos": True,
    "tokenwise_score_eos": False,
    "min_k_count": "floor",
    "extraction_strength": "reference",
    "epsilon": 1e-10,
    "variance_floor": 1e-6,
    # OpenUnlearning d3d7cf9, configs/generation/default.yaml: max_new_tokens: 200; every TOFU ROUGE metric
    # config (configs/eval/tofu_metrics/*_ROUGE.yaml) includes it as its generation_args.
    "max_new_tokens": 200,
    "loss_averaging": "reference",
}

PRESETS: dict[str, Conventions] = {
    "medunlearn": Conventions(),
    "open-unlearning": Conventions(
        name="open-unlearning", system_prompt="You are a helpful assistant.", **_REFERENCE_SCORING
    ),
    "open-unlearning-llama3": Conventions(
        name="open-unlearning-llama3",
        chat_template=False,
        prompt_prefix=(
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "You are a helpful assistant.<|eot_id|>"
        ),
        user_start_tag="<|start_header_id|>user<|end_header_id|>\n\n",
        user_end_tag="<|eot_id|>",
        assistant_start_tag="<|start_header_id|>assistant<|end_header_id|>\n\n",
        **_REFERENCE_SCORING,
    ),
}
"""The named conventions: ours (``medunlearn``) and the reference implementation's (OpenUnlearning)."""


def preset(name: str) -> Conventions:
    """A named preset (``medunlearn``, ``open-unlearning``, ``open-unlearning-llama3``)."""
    if name not in PRESETS:
        raise InputError(f"unknown conventions preset {name!r}; known: {', '.join(PRESETS)}")
    return PRESETS[name]


def resolve_conventions(conventions: Conventions | str | None) -> Conventions:
    """``conventions`` itself, the preset it names, or ``medunlearn``'s for ``None``."""
    if conventions is None:
        return PRESETS["medunlearn"]
    if isinstance(conventions, str):
        return preset(conventions)
    return conventions


class ConventionTokenizer:
    """A tokenizer whose ``apply_chat_template`` renders by ``conventions``; everything else is the wrapped
    one.

    Only string rendering (``tokenize=False``, what the runner and the training tokenisation ask for) is
    supported. Tag rendering writes the tokenizer's EOS after the answer, as the reference appends it to its
    labels.
    """

    def __init__(self, tokenizer, conventions: Conventions):
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
        batch, single = text_only_batch(conversations, tokenize, "ConventionTokenizer")
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


def text_only_batch(conversations, tokenize: bool, renderer: str) -> tuple[list, bool]:
    """What an ``apply_chat_template`` that renders text gets: one conversation (a list of messages) or a
    batch of them, as a batch, and whether it was one (the result is then unwrapped)."""
    if tokenize:
        raise ValueError(f"{renderer} renders text only (tokenize=False)")
    single = bool(conversations) and isinstance(conversations[0], dict)
    return ([conversations] if single else list(conversations)), single


# ------------------------------------------------------------------------------------------------------------
# The conventions a model was trained with, beside its weights
# ------------------------------------------------------------------------------------------------------------


def write_model_conventions(folder: str | Path, conventions: Conventions) -> Path:
    """``folder/conventions.json``: the conventions the model in ``folder`` was trained with."""
    path = Path(folder) / CONVENTIONS_FILE
    path.write_text(json.dumps(conventions.to_dict(), indent=2))
    return path


def read_model_conventions(model) -> Conventions | None:
    """The conventions recorded beside a model folder's weights; ``None`` for a name, an object, or a folder
    written before they were recorded."""
    if not isinstance(model, (str, Path)):
        return None
    path = Path(model) / CONVENTIONS_FILE
    if not path.is_file():
        return None
    recorded = read_json(path, expect=dict, what="a conventions file")  # the shared reader names the problem
    return recorded_conventions(recorded, str(path), None)


def recorded_conventions(
    values, source: str, field_name: str | None = "conventions", kind: type = Conventions
):
    """``kind.from_dict(values)`` for the conventions a file recorded (``field_name`` of an evaluation's
    run.json, a model's whole conventions.json; ``kind``: :class:`Conventions` or MUSE's). A record that is
    missing, not an object, or holds a value the conventions refuse is a
    :class:`~medunlearn.errors.FileContentError` naming the file and field: a rescoring read a KeyError or a
    TypeError traceback from an edited run.json.

    >>> recorded_conventions({"min_k_count": "round"}, "eval/run.json")
    Traceback (most recent call last):
    ...
    medunlearn.errors.FileContentError: eval/run.json, field 'conventions': not the conventions of a run ...
    """
    if not isinstance(values, dict):
        why = "is missing" if values is None else f"must be an object, not {json_type_name(values)}"
        raise FileContentError(source, None, field_name, f"{why} (the conventions the run was scored by)")
    try:
        return kind.from_dict(values)
    except (TypeError, ValueError) as error:  # an unknown or missing field, a value __post_init__ refuses
        why = f"not the conventions of a run ({error}): rerun the evaluation, or restore the file"
        raise FileContentError(source, None, field_name, why) from None


def conventions_differences(trained: Conventions, evaluated: Conventions) -> dict[str, tuple]:
    """``{field: (trained, evaluated)}`` for every rendering field on which the two disagree."""
    return {
        name: (getattr(trained, name), getattr(evaluated, name))
        for name in RENDERING_FIELDS
        if getattr(trained, name) != getattr(evaluated, name)
    }


def warn_if_conventions_differ(model, conventions: Conventions, flag: str = "--model") -> str | None:
    """Warn (``ConventionsMismatchWarning``) when ``model``'s recorded conventions render prompts differently
    from ``conventions`` (an evaluation's, or an unlearning run's); returns the message (``None`` when they
    agree or nothing is recorded)."""
    import warnings

    trained = read_model_conventions(model)
    if trained is None:
        return None
    differences = conventions_differences(trained, conventions)
    if not differences:
        return None
    listed = "; ".join(f"{name}: {old!r} vs {new!r}" for name, (old, new) in differences.items())
    message = (
        f"{flag} {model} was trained with the {trained.name!r} conventions but this run uses "
        f"{conventions.name!r}, which render prompts differently ({listed}); pass --preset {trained.name} "
        "to render them as in training"
    )
    warnings.warn(message, ConventionsMismatchWarning, stacklevel=2)
    return message
