"""``medunlearn env``: the versions, devices and settings a bug report needs (as ``transformers env`` does).

Package versions are read from the installed distributions' metadata, so the command imports none of them
except torch (for its devices). An access token is reported as set or not set, never by its value.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import sys
from collections.abc import Callable, Mapping

from medunlearn import __version__
from medunlearn.utils.secrets import SECRET_VARIABLES

# The libraries a medunlearn run goes through, in the order of the data flow; vllm only where installed.
PACKAGES = (
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "evaluate",
    "huggingface_hub",
    "tokenizers",
    "safetensors",
    "sentence-transformers",
    "bitsandbytes",
    "numpy",
    "vllm",
)
OPTIONAL_PACKAGES = frozenset({"vllm", "bitsandbytes"})
# Settings that change what a run downloads, where it caches, or how it uses the hardware.
ENVIRONMENT_FLAGS = (
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_DATASETS_CACHE",
    "HF_ENDPOINT",
    "TOKENIZERS_PARALLELISM",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "PYTORCH_ENABLE_MPS_FALLBACK",
    "ACCELERATE_USE_CPU",
)
# Secrets: only whether one is set is printed.
TOKEN_VARIABLES = SECRET_VARIABLES

EPILOG = """examples:
  medunlearn env           # paste the output into a bug report
  medunlearn env --json    # the same as one JSON object"""


def build_parser(prog: str = "medunlearn env") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Print the versions, devices and settings a bug report needs (no token value is "
        "ever printed).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a list")
    return parser


def package_version(name: str) -> str | None:
    """The installed distribution's version, or ``None`` when it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_devices() -> dict[str, str]:
    """CUDA, MPS and the CPU's bf16 support as torch sees them (empty when torch is not installed)."""
    try:
        import torch
    except ImportError:
        return {}
    cuda = torch.cuda.is_available()
    devices = {
        "CUDA available": str(cuda),
        "CUDA version (torch build)": str(torch.version.cuda),
    }
    if cuda:
        names = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
        devices["GPUs"] = f"{len(names)}: {', '.join(names)}"
        devices["GPU bf16 supported"] = str(torch.cuda.is_bf16_supported())
    mps = getattr(torch.backends, "mps", None)
    devices["MPS available"] = str(bool(mps and mps.is_available()))
    devices["CPU capability"] = str(torch.backends.cpu.get_cpu_capability())
    # Private helpers (present in torch 2.x): AVX512-BF16 and AMX make bf16 fast on the CPU.
    for label, helper in (
        ("CPU avx512_bf16", "_is_avx512_bf16_supported"),
        ("CPU AMX", "_is_amx_tile_supported"),
    ):
        check = getattr(torch.cpu, helper, None)
        if check is not None:
            devices[label] = str(bool(check()))
    devices["torch threads"] = str(torch.get_num_threads())
    return devices


def token_status(environ: Mapping[str, str], stored_token: Callable[[], str | None]) -> dict[str, str]:
    """Per token variable, "set" or "not set"; and whether huggingface_hub finds a token at all (the
    environment or the file ``hf auth login`` writes). Never a value."""
    status = {name: "set" if environ.get(name) else "not set" for name in TOKEN_VARIABLES}
    status["HF token found by huggingface_hub"] = "yes" if stored_token() else "no"
    return status


def _stored_hf_token() -> str | None:
    try:
        from huggingface_hub import get_token
    except ImportError:
        return None
    return get_token()


def environment_report(
    environ: Mapping[str, str] | None = None,
    version_of: Callable[[str], str | None] = package_version,
    devices: Callable[[], dict[str, str]] = torch_devices,
    stored_token: Callable[[], str | None] = _stored_hf_token,
) -> dict[str, dict[str, str]]:
    """Sections of ``name: value`` lines: system, packages, devices, settings, tokens."""
    environ = os.environ if environ is None else environ
    packages = {}
    for name in PACKAGES:
        version = version_of(name)
        if version is not None or name not in OPTIONAL_PACKAGES:
            packages[name] = version or "not installed"
    return {
        "system": {
            "medunlearn": __version__,
            "Python": f"{platform.python_version()} ({platform.python_implementation()})",
            "Platform": platform.platform(),
            "Executable": sys.executable,
        },
        "packages": packages,
        "devices": devices(),
        "settings": {name: environ.get(name, "not set") for name in ENVIRONMENT_FLAGS},
        "tokens": token_status(environ, stored_token),
    }


def format_report(report: dict[str, dict[str, str]]) -> str:
    """A Markdown list, ready to paste into an issue."""
    lines = ["Copy-and-paste the text below in your GitHub issue.", ""]
    for section, values in report.items():
        lines.append(f"{section}:")
        lines.extend(f"- {name}: {value}" for name, value in values.items())
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def run(args: argparse.Namespace) -> int:
    report = environment_report()
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
