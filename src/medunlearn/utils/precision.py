"""The one home of the ``--dtype auto|float32|bfloat16`` decision (docs/scaling.md, "Precision").

The rule [ours]:

- an explicit ``float32`` or ``bfloat16`` is taken as given;
- ``auto`` on CUDA: ``bfloat16`` when ``torch.cuda.is_bf16_supported()``, else ``float32``;
- ``auto`` on a CPU: ``bfloat16`` only when the CPU's flags say it computes bf16 natively (``avx512_bf16``
  or ``amx_bf16`` on x86, the ``bf16`` feature on aarch64) *and* a short probe measures a bf16 matrix
  product at least :data:`BF16_MIN_SPEEDUP` times as fast as a float32 one; else ``float32``. An AVX2 CPU
  emulates bf16 and runs it 40 to 400 times slower than float32 (docs/scaling.md has the measurement);
- ``auto`` under a parity preset (``open-unlearning``) on a CPU: ``float32``, as the reference's CPU runs.

Evaluation loads the model in the resolved dtype; training keeps float32 weights and runs bf16 under
autocast (``TrainingArguments(bf16=True)``: mixed precision with float32 master weights).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path

from medunlearn.errors import InputError

DTYPE_CHOICES = ("auto", "float32", "bfloat16")
BF16_MIN_SPEEDUP = 1.5  # a bf16 product must run this many times as fast as a float32 one for auto
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # x86 (two), aarch64 (the `Features` line)
PROBE_SIZE = 256
PROBE_REPEATS = 3


@dataclass(frozen=True)
class Precision:
    """A resolved ``--dtype``: ``dtype`` (``"float32"`` or ``"bfloat16"``) and why it was chosen."""

    dtype: str
    reason: str

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    @property
    def is_bf16(self) -> bool:
        return self.dtype == "bfloat16"

    def describe(self) -> str:
        """The line a command prints once: ``dtype: float32 (auto: this CPU has no native bf16)``."""
        return f"dtype: {self.dtype} ({self.reason})"


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags as the kernel lists them (x86 ``flags``, aarch64 ``Features``); empty where
    there is no such file (macOS, Windows)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def native_bf16_flags(flags: frozenset[str] | None = None) -> list[str]:
    """The flags among :data:`NATIVE_BF16_FLAGS` this CPU has (``flags``: :func:`cpu_flags` by default)."""
    flags = cpu_flags() if flags is None else flags
    return [flag for flag in NATIVE_BF16_FLAGS if flag in flags]


@functools.cache
def bf16_matmul_speedup(size: int = PROBE_SIZE, repeats: int = PROBE_REPEATS) -> float:
    """float32 time / bf16 time of a ``size``² matrix product on the CPU (best of ``repeats`` each, after a
    warm-up); measured once per process."""
    import torch

    def best_time(dtype) -> float:
        a = torch.randn(size, size).to(dtype)
        b = torch.randn(size, size).to(dtype)
        torch.mm(a, b)  # warm-up: kernel selection, first-touch allocation
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            torch.mm(a, b)
            times.append(time.perf_counter() - start)
        return min(times)

    return best_time(torch.float32) / max(best_time(torch.bfloat16), 1e-9)


def _device_type(device) -> str:
    return str(getattr(device, "type", device) or "cpu").split(":")[0]


def _auto_cpu(parity: str | None) -> Precision:
    if parity:
        return Precision("float32", f"auto: the {parity} preset pins float32 on CPU")
    flags = native_bf16_flags()
    if not flags:
        return Precision("float32", "auto: this CPU has no native bf16 flag (avx512_bf16, amx_bf16, bf16)")
    speedup = bf16_matmul_speedup()
    measured = f"{', '.join(flags)}; bf16 matmul {speedup:.2f}x float32"
    if speedup < BF16_MIN_SPEEDUP:
        return Precision("float32", f"auto: {measured}, below {BF16_MIN_SPEEDUP}x")
    return Precision("bfloat16", f"auto: {measured}")


def resolve_precision(choice: str = "auto", device="cpu", parity: str | None = None) -> Precision:
    """The dtype of ``choice`` on ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``torch.device``),
    by the rule of this module's docstring. ``parity``: the name of a parity preset in use (its CPU runs
    stay float32 under ``auto``)."""
    if choice not in DTYPE_CHOICES:
        raise InputError(f"--dtype must be one of {', '.join(DTYPE_CHOICES)}, got {choice!r}")
    if choice != "auto":
        return Precision(choice, "as asked")
    kind = _device_type(device)
    if kind == "cuda":
        import torch

        if torch.cuda.is_bf16_supported():
            return Precision("bfloat16", "auto: this GPU supports bf16")
        return Precision("float32", "auto: this GPU does not support bf16")
    if kind != "cpu":
        return Precision("float32", f"auto: bf16 is not measured on {kind}")
    return _auto_cpu(parity)


def resolve_dtype(choice: str = "auto", device="cpu", parity: str | None = None):
    """The ``torch.dtype`` of :func:`resolve_precision`."""
    return resolve_precision(choice, device, parity).torch_dtype


def default_device() -> str:
    """Where a command's model runs when nothing else says: ``"cuda"`` when CUDA is available, else
    ``"cpu"``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def training_bf16(choice: str, bf16: bool, fp16: bool, precision: Precision) -> bool:
    """The ``TrainingArguments.bf16`` of a training run (autocast over float32 weights): ``precision`` is
    ``choice`` resolved. An explicit ``float32`` or ``bfloat16`` that the trainer's own ``--bf16`` /
    ``--fp16`` contradict is an error; under ``auto`` a ``--bf16`` or ``--fp16`` set by the user or a recipe
    stands."""
    if choice == "float32" and (bf16 or fp16):
        raise InputError(f"--dtype float32 contradicts --{'bf16' if bf16 else 'fp16'} True: drop one of them")
    if choice == "bfloat16" and fp16:
        raise InputError("--dtype bfloat16 contradicts --fp16 True: drop one of them")
    if choice == "auto" and (bf16 or fp16):
        return bf16
    return precision.is_bf16


def describe_training(bf16: bool, fp16: bool, precision: Precision) -> str:
    """The line a training command prints once: what its trainer computes in, and why."""
    if bf16:
        why = precision.reason if precision.is_bf16 else "--bf16 True"
        return f"dtype: bfloat16 autocast over float32 weights ({why})"
    if fp16:
        return "dtype: float16 autocast over float32 weights (--fp16 True)"
    return precision.describe()


__all__ = [
    "BF16_MIN_SPEEDUP",
    "DTYPE_CHOICES",
    "Precision",
    "bf16_matmul_speedup",
    "cpu_flags",
    "default_device",
    "describe_training",
    "native_bf16_flags",
    "resolve_dtype",
    "resolve_precision",
    "training_bf16",
]
