"""A scripted LLM backend for the silver-label and pipeline tests (loaded by path: tests are not packages).

``ScriptedBackend(answer)`` answers each attempt with ``answer(request, attempt_number)``; the llm layer's own
attempt loop (schema validation, retries, the cache) runs on it unchanged. ``fail_after`` makes every call
after that many requests a transport failure (a server that went away), to test resuming.
"""

from __future__ import annotations

import hashlib
import json

from medunlearn.llm.cache import BackendIdentity
from medunlearn.llm.retry import BackendCallError, Completion, resolve_batch, transport_failure


class ScriptedBackend:
    def __init__(self, answer, model: str = "scripted", fail_after: int | None = None):
        self.answer = answer
        self.identity = BackendIdentity("scripted", model)
        self.fail_after = fail_after
        self.requests_seen = 0

    def check_ready(self) -> None:
        pass

    def run(self, requests, todo, policy, on_results) -> None:
        for index in todo:
            request = requests[index]
            self.requests_seen += 1
            if self.fail_after is not None and self.requests_seen > self.fail_after:
                failure = BackendCallError("http://127.0.0.1:9/v1: connection lost")
                on_results([(index, transport_failure([], failure, request.seed, request.temperature))])
                continue
            calls = {"n": 0}

            def generate(batch, sampling, calls=calls):
                completions = []
                for item, _ in zip(batch, sampling):
                    completions.append(Completion(self.answer(item, calls["n"]), "stop", 50, 20))
                calls["n"] += 1
                return completions

            on_results([(index, resolve_batch([request], generate, policy)[0])])


def claims_of(request) -> tuple[str, str]:
    """The two claims a label request shows (from the built-in prompt's "Claim A (...): ..." lines)."""
    lines = request.messages[-1]["content"].splitlines()
    found = [line.split("): ", 1)[1] for line in lines if line.startswith(("Claim A (", "Claim B ("))]
    return found[0], found[1]


def garbage_answer(request, attempt: int) -> str:
    """Deterministic mixed answers per pair: valid, repairable, unparseable, schema-invalid; some fixed on
    the retry."""
    claim_a, claim_b = claims_of(request)
    kind = int(hashlib.sha256((claim_a + claim_b).encode()).hexdigest(), 16) % 6
    if kind == 0:
        return "I think these claims are about the same thing."
    if kind == 1:
        return json.dumps({"conflict_type": "maybe", "axes": ["age"], "dominant_confounder": "age"})
    if kind == 2 and attempt == 0:
        return '{"conflict_type": "contextual_contradiction", "axes": ["population"'  # cut short
    record = {
        "conflict_type": "contextual_contradiction" if kind in (2, 3) else "no_conflict",
        "axes": ["population", "population"] if kind == 3 else [],
        "dominant_confounder": "geography" if kind in (3, 4) else "none",
        "reconciliation": "  The cohorts   differ. ",
        "evidence_a": claim_a.split()[0].upper() + " " + " ".join(claim_a.split()[1:3]),
        "evidence_b": "words the claim does not contain" if kind != 5 else claim_b,
    }
    return json.dumps(record)
