"""Helpers for runs launched on several processes (``accelerate launch``): one place for all of them."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


def leave_process_group(accelerator) -> None:
    """Wait for every launched process, then tear the ``torch.distributed`` process group down.

    Why: the gloo worker thread frees finished collectives (and their tensors) after the caller has moved on,
    and needs the GIL to do so. If the group is destroyed at interpreter exit, that thread dies mid-free and
    the rank aborts ("terminate called without an active exception"); if it is destroyed while the main thread
    holds the GIL (the DDP wrapper going out of scope), the two threads wait on each other forever. The
    launcher then reports a failed or hung run although every file was written. So: meet at a barrier, sleep a
    moment (which releases the GIL) so the worker frees what it holds, then destroy the group while Python is
    fully alive. Does nothing in a single process.
    """
    # torch is imported here, not at module level, so that importing medunlearn.utils never imports torch.
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        accelerator.wait_for_everyone()
        time.sleep(0.2)
        dist.destroy_process_group()


@dataclass
class LaunchedProcesses:
    """This process's place among data-parallel processes (torchrun / ``accelerate launch``)."""

    index: int = 0
    count: int = 1
    local_index: int = 0

    @property
    def is_main(self) -> bool:
        return self.index == 0

    @property
    def device(self):
        import torch

        return torch.device("cuda", self.local_index) if torch.cuda.is_available() else torch.device("cpu")

    def wait_for_everyone(self) -> None:
        """A barrier over the launcher's process group (gloo on CPU, nccl on GPU), created for it if needed.

        No tensor of ours is in flight here, so the teardown race :func:`leave_process_group` guards against
        does not arise.
        """
        import torch
        import torch.distributed as dist

        created = not dist.is_initialized()
        if created:
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        dist.barrier()
        if created:
            dist.destroy_process_group()


def launched_processes() -> LaunchedProcesses:
    """Read the launcher's environment (RANK, WORLD_SIZE, LOCAL_RANK: set by torchrun and accelerate
    launch)."""
    return LaunchedProcesses(
        index=int(os.environ.get("RANK", "0")),
        count=int(os.environ.get("WORLD_SIZE", "1")),
        local_index=int(os.environ.get("LOCAL_RANK", "0")),
    )
