"""Fake OpenAI-compatible servers for the tests (no vLLM needed): :class:`LoopbackServer`, the one home of
every fake server (the scripted LLM of ``amnesia_llm_fakes.ScriptedServer`` builds on it), and
:class:`FakeVLLM`, the vLLM server of the generation-engine tests.

``FakeVLLM(models).start()`` serves on a free loopback port: ``GET /v1/models`` lists ``models`` (name ->
root folder, as vLLM lists the folder a model was loaded from), ``POST /v1/completions`` answers every prompt
with :data:`ANSWER_TOKENS` and counts the requests, so a test can check that nothing was generated.

Run as a script, it stands in for the vLLM Python: :func:`fake_vllm_python` writes an executable that takes
``-m vllm.entrypoints.openai.api_server --model DIR --served-model-name NAME --port P ...`` and serves DIR as
NAME. ``$FAKE_VLLM_STARTED`` (a file) is created when it starts; with ``$FAKE_VLLM_DIE_WITH`` set it prints
that text to its log and exits with status 1 on the first completion request, as a vLLM server whose engine
core crashed does.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ANSWER_TOKENS = [5, 6, 7]


class LoopbackServer:
    """A fake OpenAI-compatible server on a loopback port (``port=0``: a free one), the one home of the
    tests' fake servers: ``GET`` answers :meth:`list_models`, ``POST`` (any path) :meth:`respond`, both as
    JSON. A subclass says what it serves; :attr:`lock` guards its counters across request threads."""

    def __init__(self, port: int = 0):
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True

    def list_models(self) -> list[dict]:
        raise NotImplementedError

    def respond(self, body: dict, headers) -> dict:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self):
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _handler(server: LoopbackServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, body: dict) -> None:
            payload = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):
            self._send({"object": "list", "data": server.list_models()})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            self._send(server.respond(body, self.headers))

    return Handler


class FakeVLLM(LoopbackServer):
    """A scripted vLLM server listing ``models`` (served name -> root folder)."""

    def __init__(self, models: dict[str, str], port: int = 0, die_with: str | None = None):
        super().__init__(port)
        self.models = {name: str(root) for name, root in models.items()}
        self.completions = 0
        self.die_with = die_with

    def list_models(self) -> list[dict]:
        return [
            {"id": name, "object": "model", "created": 0, "owned_by": "vllm", "root": root, "parent": None}
            for name, root in self.models.items()
        ]

    def respond(self, body: dict, headers) -> dict:
        with self.lock:
            self.completions += 1
        if self.die_with:
            print(self.die_with, flush=True)
            os._exit(1)
        return {
            "id": "cmpl-fake",
            "object": "text_completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [{"index": 0, "text": "", "finish_reason": "length", "token_ids": ANSWER_TOKENS}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4},
        }


def fake_vllm_python(folder: Path) -> Path:
    """An executable in ``folder`` that runs this module as the fake server (the engine's ``python``)."""
    script = Path(folder) / "fake-vllm-python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
    script.chmod(0o755)
    return script


def _argument(arguments: list[str], name: str) -> str:
    return arguments[arguments.index(name) + 1]


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if os.environ.get("FAKE_VLLM_STARTED"):
        Path(os.environ["FAKE_VLLM_STARTED"]).touch()
    served = {_argument(arguments, "--served-model-name"): _argument(arguments, "--model")}
    fake = FakeVLLM(
        served, port=int(_argument(arguments, "--port")), die_with=os.environ.get("FAKE_VLLM_DIE_WITH")
    )
    print("INFO: fake vLLM server started", flush=True)
    fake.httpd.serve_forever(poll_interval=0.05)
