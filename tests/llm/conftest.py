"""Fixtures of the medunlearn.llm tests: a scripted OpenAI-compatible server on loopback. (The real vLLM
server, ``vllm_server``, is a session fixture of tests/conftest.py: the AMNESIA pipeline tests use it too.)

The fake server answers like vLLM (``/v1/models``, ``/v1/chat/completions``) from a script, counts the calls
it gets and the largest number in flight at once, and keeps the Authorization headers it saw, so tests can
check retries, concurrency and that a key was sent (and nowhere else).
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

FAKE_MODEL = "fake-model"


def echo_answer(body: dict) -> str:
    """The fake model's deterministic answer: the last message and the sampling it was asked for."""
    return f"echo {body['messages'][-1]['content']} seed={body.get('seed')} t={body.get('temperature')}"


@dataclass
class FakeServerState:
    # reply(call_number, request_body) -> (status, headers, json_body); call numbers count completions from 1.
    reply: Callable[[int, dict], tuple[int, dict, dict]]
    delay_s: float = 0.0
    # The ``GET /models`` entries (None: the one served name, with no root, as llama.cpp lists it).
    models: list[dict] | None = None
    calls: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    authorizations: list[str] = field(default_factory=list)
    bodies: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def completion_body(text: str, finish_reason: str = "stop", prompt_tokens: int = 7) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": FAKE_MODEL,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(text.split()),
            "total_tokens": prompt_tokens + len(text.split()),
        },
    }


def ok_echo(call: int, body: dict):
    return 200, {}, completion_body(echo_answer(body))


def make_handler(state: FakeServerState):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet: the test output is what is checked for keys
            pass

        def _send(self, status: int, headers: dict, body: dict) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):
            if self.path.rstrip("/").endswith("/models"):
                models = state.models or [{"id": FAKE_MODEL, "object": "model"}]
                self._send(200, {}, {"object": "list", "data": models})
            else:
                self._send(404, {}, {"error": {"message": "not found"}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with state.lock:
                state.calls += 1
                call = state.calls
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
                state.authorizations.append(self.headers.get("Authorization", ""))
                state.bodies.append(body)
            try:
                if state.delay_s:
                    time.sleep(state.delay_s)
                status, headers, reply = state.reply(call, body)
            finally:
                with state.lock:
                    state.in_flight -= 1
            self._send(status, headers, reply)

    return Handler


@dataclass
class FakeServer:
    state: FakeServerState
    port: int

    @property
    def model(self) -> str:
        return FAKE_MODEL

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def spec(self) -> str:
        return f"openai:{FAKE_MODEL}@{self.base_url}"


class FakeServers:
    """``fake_servers(reply=..., delay_s=...)`` starts a scripted server; all stop after the test. The reply
    helpers ride along, since tests/llm is not a package its modules could import from."""

    completion_body = staticmethod(completion_body)
    echo_answer = staticmethod(echo_answer)
    model = FAKE_MODEL

    def __init__(self):
        self._running: list[ThreadingHTTPServer] = []

    def __call__(self, reply=ok_echo, delay_s: float = 0.0, models: list[dict] | None = None) -> FakeServer:
        state = FakeServerState(reply=reply, delay_s=delay_s, models=models)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._running.append(httpd)
        return FakeServer(state, httpd.server_address[1])

    def stop_all(self) -> None:
        for httpd in self._running:
            httpd.shutdown()
            httpd.server_close()


@pytest.fixture()
def fake_server():
    servers = FakeServers()
    yield servers
    servers.stop_all()


@pytest.fixture()
def tiny_backend(tiny_model, tiny_tokenizer):
    from medunlearn.llm.transformers_backend import TransformersBackend, TransformersConfig

    return TransformersBackend(
        tiny_model, tiny_tokenizer, model_id="tiny-test", config=TransformersConfig(batch_size=4)
    )


@pytest.fixture(scope="session")
def kill_resume():
    """The kill-and-resume child module (loaded by path: tests/llm is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "kill_resume_child", Path(__file__).with_name("kill_resume_child.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
