"""Child process of the kill-and-resume tests: complete a fixed set of requests into a cache until killed.

    python kill_resume_child.py SPEC CACHE N MAX_TOKENS PAUSE_S OUT_JSON

PAUSE_S > 0 sleeps after each commit, so the parent can SIGKILL it mid-run at a known point; OUT_JSON gets the
results when it finishes (it does not, when killed).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from medunlearn.llm import BulkChat, ChatRequest, ResultCache

LABEL_SCHEMA = {
    "type": "object",
    "properties": {"diagnosis": {"enum": ["pneumonia", "myocardial infarction", "breast cancer"]}},
    "required": ["diagnosis"],
    "additionalProperties": False,
}
FINDINGS = [
    "fever and a productive cough",
    "chest pain and ST elevation",
    "a breast mass",
    "troponin of 2.4 ng/mL",
]


def make_requests(count: int, max_tokens: int, sampled: bool = True) -> list[ChatRequest]:
    """Free-text and schema requests, greedy and (when ``sampled``) seeded sampling, in a fixed order."""
    requests = []
    for index in range(count):
        finding = FINDINGS[index % len(FINDINGS)]
        content = f"Patient {index} presented with {finding}. What is the most likely diagnosis?"
        requests.append(
            ChatRequest(
                [{"role": "user", "content": content}],
                max_tokens=max_tokens,
                temperature=0.8 if sampled and index % 3 == 1 else 0.0,
                seed=index,
                json_schema=LABEL_SCHEMA if index % 2 else None,
                prompt_version="kill-resume-v1",
            )
        )
    return requests


def backend_options(spec: str) -> dict:
    if spec.startswith("openai:"):
        from medunlearn.llm.openai_backend import ServerConfig

        return {"config": ServerConfig(concurrency=2)}
    from medunlearn.llm.transformers_backend import TransformersConfig

    return {"config": TransformersConfig(batch_size=2)}


def main(spec: str, cache: str, count: int, max_tokens: int, pause_s: float, out: str) -> None:
    if pause_s > 0:
        put_many = ResultCache.put_many

        def put_many_then_pause(self, *args, **kwargs):
            put_many(self, *args, **kwargs)
            time.sleep(pause_s)

        ResultCache.put_many = put_many_then_pause
    sampled = not spec.startswith("openai:")
    chat = BulkChat.from_spec(spec, cache=cache, show_progress=False, **backend_options(spec))
    results = chat.complete(make_requests(count, max_tokens, sampled=sampled))
    with open(out, "w") as handle:
        json.dump([result.to_json() for result in results], handle)


def child_command(
    spec: str, cache: Path, count: int, max_tokens: int, pause_s: float, out: Path
) -> list[str]:
    return [sys.executable, __file__, spec, str(cache), str(count), str(max_tokens), str(pause_s), str(out)]


def child_env() -> dict:
    # One thread, as in the in-process comparisons: a different thread count may round float sums differently.
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def committed_rows(cache: Path) -> int:
    if not cache.is_file():
        return 0
    try:
        with sqlite3.connect(cache, timeout=1) as connection:
            return connection.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0


def run_killed_mid_run(
    spec, cache: Path, count, max_tokens, pause_s, at_rows: int, timeout_s: float = 300
) -> int:
    """Start the child, SIGKILL it once ``at_rows`` results are committed; return how many were committed."""
    out = cache.with_suffix(".killed.json")
    child = subprocess.Popen(
        child_command(spec, cache, count, max_tokens, pause_s, out),
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + timeout_s
    try:
        while committed_rows(cache) < at_rows:
            if child.poll() is not None:
                raise AssertionError(f"the child ended before it was killed:\n{child.stdout.read().decode()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the child committed fewer than {at_rows} rows in {timeout_s} s")
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL and not out.exists()
    return committed_rows(cache)


def run_to_the_end(spec, cache: Path, count, max_tokens, timeout_s: float = 300) -> list[dict]:
    out = cache.with_suffix(".json")
    completed = subprocess.run(
        child_command(spec, cache, count, max_tokens, 0.0, out),
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return json.loads(out.read_text())


if __name__ == "__main__":
    spec, cache, count, max_tokens, pause_s, out = sys.argv[1:]
    main(spec, cache, int(count), int(max_tokens), float(pause_s), out)
