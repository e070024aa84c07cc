"""The attempt loop every backend shares: generate, check the answer, retry with a new seed, give up cleanly.

Transport retries (429, 5xx, time-outs) belong to the server client (``openai``'s ``max_retries`` with
exponential backoff); this loop retries *answers*: one that is not valid JSON against the request's schema is
asked for again, up to :attr:`RetryPolicy.max_attempts` times, and then the request is reported as failed.
Every attempt's seed and temperature are recorded in the result.

>>> policy = RetryPolicy(max_attempts=3, retry_temperature=0.7)
>>> request = ChatRequest([{"role": "user", "content": "x"}], seed=5)
>>> [attempt_sampling(request, k, policy) for k in range(3)]
[(5, 0.0), (6, 0.7), (7, 0.7)]
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from medunlearn.llm.interface import Attempt, ChatRequest, ChatResult
from medunlearn.llm.schema import parse_json_answer


@dataclass(frozen=True)
class RetryPolicy:
    """How often an answer is asked for again.

    Parameters:
        max_attempts (`int`, defaults to 3): attempts per request with a schema before it is reported as
            failed (requests without a schema take any answer, so they are never retried).
        retry_temperature (`float`, defaults to 0.7): the temperature of the retries of a greedy request.
            Greedy decoding gives the same answer whatever the seed, so a retry with a new seed must also
            sample.
    """

    max_attempts: int = 3
    retry_temperature: float = 0.7


@dataclass(frozen=True)
class Completion:
    """What one backend call returned, before any checking."""

    text: str
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class BackendCallError(Exception):
    """A call that got no answer (transport failure after the client's own retries); its message names the URL
    and status, never a key. Backends raise it; the attempt loop turns it into a failed, uncached result."""


def attempt_sampling(request: ChatRequest, attempt: int, policy: RetryPolicy) -> tuple[int, float]:
    """The ``(seed, temperature)`` of attempt number ``attempt`` (0-based) of ``request``."""
    temperature = request.temperature
    if attempt > 0 and temperature == 0:
        temperature = policy.retry_temperature
    return request.seed + attempt, temperature


def made_under(request: ChatRequest, result: ChatResult, policy: RetryPolicy) -> bool:
    """Whether ``result`` is what ``policy`` makes of ``request`` [ours]: attempt ``k`` used the seed and
    temperature :func:`attempt_sampling` gives it, and the attempts stop where the policy stops them (at the
    first accepted answer, or after exactly ``max_attempts`` rejected ones). The cache serves a stored result
    only then, so a failure stored under one attempt is asked again by a run allowed three.

    >>> request = ChatRequest([{"role": "user", "content": "x"}], json_schema={"type": "object"})
    >>> failed = ChatResult("no", error="invalid", attempts=(Attempt(0, 0.0, "stop", error="invalid"),))
    >>> made_under(request, failed, RetryPolicy(max_attempts=1)), made_under(request, failed, RetryPolicy())
    (True, False)
    >>> first_try = ChatResult("{}", attempts=(Attempt(0, 0.0, "stop"),))
    >>> made_under(request, first_try, RetryPolicy(max_attempts=9))
    True
    """
    attempts = result.attempts
    if not attempts or len(attempts) > policy.max_attempts:
        return False
    for number, attempt in enumerate(attempts):
        if (attempt.seed, attempt.temperature) != attempt_sampling(request, number, policy):
            return False
    return result.ok or len(attempts) == policy.max_attempts


def judge(request: ChatRequest, completion: Completion, seed: int, temperature: float) -> tuple[Attempt, Any]:
    """Record one attempt and check its answer: ``(attempt, parsed JSON or None)``."""
    parsed, error = None, None
    if request.json_schema is not None:
        parsed, error = parse_json_answer(completion.text, request.json_schema)
        if error and completion.finish_reason == "length":
            error = f"{error} (the answer was cut at max_tokens={request.max_tokens})"
    attempt = Attempt(
        seed=seed,
        temperature=temperature,
        finish_reason=completion.finish_reason,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        error=error,
    )
    return attempt, parsed


def final_result(request: ChatRequest, attempts: list[Attempt], text: str, parsed: Any) -> ChatResult:
    last = attempts[-1]
    error = None
    if last.error is not None:
        error = f"no valid answer after {len(attempts)} attempt(s); last: {last.error}"
    return ChatResult(
        text=text, parsed=parsed, finish_reason=last.finish_reason, error=error, attempts=tuple(attempts)
    )


def transport_failure(
    attempts: list[Attempt], failure: BackendCallError, seed: int, temperature: float
) -> ChatResult:
    attempts = [
        *attempts,
        Attempt(seed=seed, temperature=temperature, finish_reason="error", error=str(failure)),
    ]
    return ChatResult(
        text="", finish_reason="error", error=str(failure), attempts=tuple(attempts), transient=True
    )


def _needs_retry(request: ChatRequest, attempt: Attempt, number: int, policy: RetryPolicy) -> bool:
    return request.json_schema is not None and attempt.error is not None and number + 1 < policy.max_attempts


BatchGenerate = Callable[[Sequence[ChatRequest], Sequence[tuple[int, float]]], list[Completion]]


def resolve_batch(
    requests: Sequence[ChatRequest], generate: BatchGenerate, policy: RetryPolicy
) -> list[ChatResult]:
    """Run the attempt loop for a batch: all requests once, then the rejected ones again, and so on.

    ``generate(requests, [(seed, temperature), ...])`` returns one :class:`Completion` per request.
    """
    attempts: list[list[Attempt]] = [[] for _ in requests]
    answers: list[tuple[str, Any]] = [("", None) for _ in requests]
    pending = list(range(len(requests)))
    number = 0
    while pending:
        sampling = [attempt_sampling(requests[index], number, policy) for index in pending]
        completions = generate([requests[index] for index in pending], sampling)
        retry = []
        for index, (seed, temperature), completion in zip(pending, sampling, completions):
            attempt, parsed = judge(requests[index], completion, seed, temperature)
            attempts[index].append(attempt)
            answers[index] = (completion.text, parsed)
            if _needs_retry(requests[index], attempt, number, policy):
                retry.append(index)
        pending, number = retry, number + 1
    return [final_result(request, attempts[i], *answers[i]) for i, request in enumerate(requests)]


async def resolve_one(
    request: ChatRequest,
    generate: Callable[[ChatRequest, int, float], Awaitable[Completion]],
    policy: RetryPolicy,
) -> ChatResult:
    """The attempt loop for one request served by an async backend; never raises for a failed call."""
    attempts: list[Attempt] = []
    for number in range(policy.max_attempts):
        seed, temperature = attempt_sampling(request, number, policy)
        try:
            completion = await generate(request, seed, temperature)
        except BackendCallError as failure:
            return transport_failure(attempts, failure, seed, temperature)
        attempt, parsed = judge(request, completion, seed, temperature)
        attempts.append(attempt)
        if not _needs_retry(request, attempt, number, policy):
            break
    return final_result(request, attempts, completion.text, parsed)
