"""Run a coroutine from synchronous code, also where an event loop already runs (Jupyter)."""

from __future__ import annotations

import asyncio
import concurrent.futures


def run_sync(coroutine):
    """``asyncio.run(coroutine)``, or the same in a worker thread when this thread's loop is running.

    >>> async def answer():
    ...     return 42
    >>> run_sync(answer())
    42
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
