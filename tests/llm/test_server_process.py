"""start_tied_process: a server's child process dies with its parent, even when the parent is SIGKILLed.

No vLLM here: the "server" is a sleeping Python process, started by an intermediate parent that the test
SIGKILLs (so that the parent never runs any cleanup of its own).
"""

from __future__ import annotations

import select
import subprocess
import sys
import textwrap
import time

import pytest

from medunlearn.llm.server import start_tied_process

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]
PARENT_SCRIPT = textwrap.dedent(
    """
    import subprocess, sys, time
    from medunlearn.llm.server import start_tied_process

    command = {sleeper!r}
    if {tied!r}:
        child = start_tied_process(command, stdin=subprocess.DEVNULL, start_new_session=True)
    else:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
    print(child.pid, flush=True)
    time.sleep(120)
    """
)


def alive(process: psutil.Process) -> bool:
    """Running and not a zombie (an orphan's zombie lingers where nothing reaps it: that counts as dead)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def kill_quietly(process) -> None:
    try:
        process.kill()  # psutil checks that the pid was not reused
    except (psutil.NoSuchProcess, ProcessLookupError):
        pass


def child_after_parent_sigkill(tied: bool, wait_s: float) -> bool:
    """Start the scenario, SIGKILL the parent; whether the child is still alive ``wait_s`` later."""
    script = PARENT_SCRIPT.format(sleeper=SLEEPER, tied=tied)
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
    child = None
    try:
        ready, _, _ = select.select([parent.stdout], [], [], 60)
        assert ready, "the intermediate parent printed no child pid within 60 s"
        line = parent.stdout.readline().strip()
        assert line.isdigit(), f"the intermediate parent printed {line!r} (exit status {parent.poll()})"
        child = psutil.Process(int(line))
        assert child.ppid() == parent.pid
        assert alive(child)
        parent.kill()
        parent.wait(timeout=30)
        return not wait_for(lambda: not alive(child), wait_s)
    finally:
        kill_quietly(parent)
        parent.wait(timeout=30)
        parent.stdout.close()
        if child is not None:
            kill_quietly(child)
            wait_for(lambda: not alive(child), 10.0)  # init (or a subreaper) reaps it, not us


def test_tied_child_dies_when_its_parent_is_sigkilled():
    assert not child_after_parent_sigkill(tied=True, wait_s=10.0)


def test_untied_child_outlives_a_sigkilled_parent():
    # The control: without the tie the same scenario leaves an orphan (killed by the test's cleanup).
    assert child_after_parent_sigkill(tied=False, wait_s=2.0)


def test_start_tied_process_runs_the_command_and_refuses_a_preexec_fn():
    process = start_tied_process([sys.executable, "-c", "print('hi')"], stdout=subprocess.PIPE, text=True)
    out, _ = process.communicate(timeout=60)
    assert (process.returncode, out) == (0, "hi\n")
    with pytest.raises(TypeError, match="preexec_fn"):
        start_tied_process(SLEEPER, preexec_fn=lambda: None)


def test_a_child_started_from_a_thread_that_ends_keeps_running():
    # The kernel ties PR_SET_PDEATHSIG to the thread that forks: a server started from a worker thread (as
    # tests/vllm_servers.py starts several side by side) must not die when that thread returns.
    import threading

    started = []
    worker = threading.Thread(target=lambda: started.append(start_tied_process(SLEEPER)))
    worker.start()
    worker.join()
    child = started[0]
    try:
        time.sleep(1.0)
        assert child.poll() is None  # still running after its starting thread ended
    finally:
        child.kill()
        child.wait()
