"""The one small interface of :mod:`medunlearn.llm`: requests in, one result per request out.

A :class:`ChatRequest` is what any backend can serve (messages, sampling settings, an optional JSON schema); a
:class:`ChatResult` is what every backend returns, successful or not, so a bulk run never stops on one bad
answer. Both are plain dataclasses that round-trip through JSON (that is how the cache stores them).

>>> request = ChatRequest([{"role": "user", "content": "Name one symptom of pneumonia."}], max_tokens=16)
>>> request.temperature, request.seed, request.json_schema is None
(0.0, 0, True)
>>> result = ChatResult(text="Cough", finish_reason="stop", attempts=(Attempt(0, 0.0, "stop", 12, 2),))
>>> result.ok, result.prompt_tokens, result.completion_tokens
(True, 12, 2)
>>> ChatResult.from_json(result.to_json()) == result
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Message = dict[str, str]
FinishReason = Literal["stop", "length", "error"]


@dataclass
class ChatRequest:
    """One chat completion to make.

    Parameters:
        messages (`list[dict]`): the conversation,
            ``[{"role": "system"|"user"|"assistant", "content": str}]``, as both Hugging Face chat templates
            and the OpenAI API take it.
        max_tokens (`int`, defaults to 256): the most tokens to generate.
        temperature (`float`, defaults to 0.0): 0 is greedy decoding.
        top_p (`float`, defaults to 1.0): nucleus sampling mass (1.0: off).
        seed (`int`, defaults to 0): the sampling seed of the first attempt; attempt ``k`` uses ``seed + k``.
        json_schema (`dict` or `None`, defaults to None): when given, the answer must be JSON valid against
            it; it is enforced while decoding (constrained decoding locally, ``response_format`` on a server)
            and checked after.
        schema_name (`str`, defaults to ``"response"``): the name sent with the schema (OpenAI requires one).
        prompt_version (`str`, defaults to ``""``): the version of the prompt template that wrote
            ``messages``. It is part of the cache key, so answers to an old template are never served for a
            new one.
    """

    messages: list[Message]
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    json_schema: dict | None = None
    schema_name: str = "response"
    prompt_version: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Attempt:
    """One try at a request: the sampling it used, what came back, and why it was rejected (``error``)."""

    seed: int
    temperature: float
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None


@dataclass(frozen=True)
class ChatResult:
    """The outcome of one request.

    Parameters:
        text (`str`): the answer of the last attempt (empty when no answer came back).
        parsed (`Any`): the answer as JSON, when the request had a schema and the answer is valid against it.
        finish_reason (`str`): ``"stop"``, ``"length"`` (cut at ``max_tokens``) or ``"error"`` (no answer).
        error (`str` or `None`): why the request failed, after every allowed attempt; None on success.
        attempts (`tuple[Attempt]`): every attempt in order, with its seed and token counts.
        transient (`bool`): no answer came back (an HTTP error after the client's retries, a lost connection):
            such failures are not cached, so a rerun tries them again. Invalid answers are not transient.
        cached (`bool`): this result was read from the cache (not compared by ``==``).
    """

    text: str
    parsed: Any = None
    finish_reason: str = "stop"
    error: str | None = None
    attempts: tuple[Attempt, ...] = ()
    transient: bool = False
    cached: bool = field(default=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens over every attempt: what the request cost, retries included."""
        return sum(attempt.prompt_tokens for attempt in self.attempts)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens over every attempt."""
        return sum(attempt.completion_tokens for attempt in self.attempts)

    def to_json(self) -> dict:
        data = asdict(self)
        data.pop("cached")
        return data

    @classmethod
    def from_json(cls, data: dict, cached: bool = False) -> ChatResult:
        attempts = tuple(Attempt(**attempt) for attempt in data.get("attempts", ()))
        return cls(**{**data, "attempts": attempts, "cached": cached})


@dataclass(frozen=True)
class UsageSummary:
    """What a batch of results cost, for a stage's report.

    ``prompt_tokens`` / ``completion_tokens`` count every result (the cost of the outputs, whenever it was
    paid); the ``*_this_run`` fields count only results made now, not read from the cache.
    """

    requests: int
    failed: int
    from_cache: int
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    prompt_tokens_this_run: int
    completion_tokens_this_run: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def summarize_usage(results: Iterable[ChatResult]) -> UsageSummary:
    """Add up requests, failures, cache hits, attempts and tokens of ``results``.

    >>> fresh = ChatResult("a", attempts=(Attempt(0, 0.0, "stop", 10, 3), Attempt(1, 0.7, "stop", 10, 4)))
    >>> old = ChatResult("b", attempts=(Attempt(0, 0.0, "stop", 8, 2),), cached=True)
    >>> summary = summarize_usage([fresh, old])
    >>> summary.attempts, summary.prompt_tokens, summary.completion_tokens, summary.prompt_tokens_this_run
    (3, 28, 9, 20)
    """
    results = list(results)
    fresh = [result for result in results if not result.cached]
    return UsageSummary(
        requests=len(results),
        failed=sum(not result.ok for result in results),
        from_cache=len(results) - len(fresh),
        attempts=sum(len(result.attempts) for result in results),
        prompt_tokens=sum(result.prompt_tokens for result in results),
        completion_tokens=sum(result.completion_tokens for result in results),
        prompt_tokens_this_run=sum(result.prompt_tokens for result in fresh),
        completion_tokens_this_run=sum(result.completion_tokens for result in fresh),
    )


def validate_requests(requests: Sequence[ChatRequest]) -> None:
    """Raise :class:`~medunlearn.llm.errors.RequestError` naming the first bad request, before any call."""
    from medunlearn.llm.errors import RequestError
    from medunlearn.llm.schema import check_schema

    for index, request in enumerate(requests):
        where = f"request {index}"
        if not isinstance(request, ChatRequest):
            raise RequestError(f"{where}: expected a ChatRequest, got {type(request).__name__}")
        if not request.messages:
            raise RequestError(f"{where}: messages is empty")
        for turn, message in enumerate(request.messages):
            if not isinstance(message, dict) or not {"role", "content"} <= message.keys():
                raise RequestError(f"{where}, message {turn}: expected a dict with 'role' and 'content'")
        if request.max_tokens < 1:
            raise RequestError(f"{where}: max_tokens must be at least 1, got {request.max_tokens}")
        if request.temperature < 0:
            raise RequestError(f"{where}: temperature must be >= 0, got {request.temperature}")
        if request.json_schema is not None:
            check_schema(request.json_schema, where=where)
