"""``--dtype``'s rule (medunlearn.utils.precision, docs/scaling.md "Precision"): the CPU flags and the matmul
probe are planted, so every branch runs on any machine."""

from __future__ import annotations

import pytest

from medunlearn.errors import InputError
from medunlearn.utils import precision
from medunlearn.utils.precision import Precision, cpu_flags, resolve_dtype, resolve_precision, training_bf16


@pytest.fixture()
def cpu(monkeypatch):
    """Plant the CPU's flags and the probe's speed-up: ``cpu(flags, speedup)``; counts the probe's calls."""
    calls = []

    def plant(flags, speedup):
        monkeypatch.setattr(precision, "cpu_flags", lambda *a: frozenset(flags))

        def probe(*args):
            calls.append(args)
            return speedup

        monkeypatch.setattr(precision, "bf16_matmul_speedup", probe)
        return calls

    return plant


def test_no_native_flag_keeps_float32_even_when_the_probe_says_fast(cpu):
    calls = cpu({"avx2", "fma"}, speedup=8.0)
    chosen = resolve_precision("auto", "cpu")
    assert chosen.dtype == "float32"
    assert "no native bf16" in chosen.reason
    assert calls == []  # without the flags the probe is not even run


@pytest.mark.parametrize("flag", ["avx512_bf16", "amx_bf16", "bf16"])
def test_native_flag_and_a_slow_probe_keep_float32(cpu, flag):
    cpu({"avx2", flag}, speedup=1.2)
    chosen = resolve_precision("auto", "cpu")
    assert chosen.dtype == "float32"
    assert flag in chosen.reason and "1.20x" in chosen.reason


def test_native_flag_and_a_fast_probe_take_bfloat16(cpu):
    cpu({"avx512f", "avx512_bf16", "amx_bf16"}, speedup=4.0)
    import torch

    assert resolve_dtype("auto", "cpu") is torch.bfloat16
    # the threshold itself: 1.5x is enough, just under it is not
    cpu({"avx512_bf16"}, speedup=precision.BF16_MIN_SPEEDUP)
    assert resolve_precision("auto", "cpu").dtype == "bfloat16"
    cpu({"avx512_bf16"}, speedup=precision.BF16_MIN_SPEEDUP - 0.01)
    assert resolve_precision("auto", "cpu").dtype == "float32"


def test_an_explicit_choice_wins(cpu):
    import torch

    calls = cpu({"avx2"}, speedup=0.01)
    assert resolve_dtype("bfloat16", "cpu") is torch.bfloat16
    cpu({"avx512_bf16"}, speedup=10.0)
    assert resolve_dtype("float32", "cpu") is torch.float32
    assert resolve_precision("bfloat16", "cpu", parity="open-unlearning").dtype == "bfloat16"
    assert calls == []


def test_a_parity_preset_pins_float32_on_cpu(cpu):
    cpu({"avx512_bf16", "amx_bf16"}, speedup=10.0)
    chosen = resolve_precision("auto", "cpu", parity="open-unlearning")
    assert chosen == Precision("float32", "auto: the open-unlearning preset pins float32 on CPU")


def test_cuda_follows_bf16_support(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_precision("auto", "cuda:0").dtype == "bfloat16"
    assert resolve_precision("auto", torch.device("cuda", 1)).dtype == "bfloat16"
    # a parity preset does not pin a GPU: the reference itself trains and evaluates in bf16 there
    assert resolve_precision("auto", "cuda", parity="open-unlearning").dtype == "bfloat16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_precision("auto", "cuda").dtype == "float32"


def test_unknown_choice_names_the_flag():
    with pytest.raises(InputError, match="--dtype must be one of auto, float32, bfloat16"):
        resolve_precision("float16", "cpu")


def test_cpu_flags_read_x86_and_aarch64_cpuinfo(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16 amx_bf16\n\nprocessor\t: 1\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")
    assert precision.native_bf16_flags(cpu_flags(x86)) == ["avx512_bf16", "amx_bf16"]
    assert precision.native_bf16_flags(cpu_flags(arm)) == ["bf16"]
    assert cpu_flags(tmp_path / "absent") == frozenset()


def test_training_bf16_rule():
    fp32, bf16 = Precision("float32", "r"), Precision("bfloat16", "r")
    assert training_bf16("auto", False, False, bf16) is True
    assert training_bf16("auto", False, False, fp32) is False
    assert training_bf16("auto", True, False, fp32) is True  # a recipe's / user's --bf16 stands under auto
    assert training_bf16("auto", False, True, bf16) is False  # so does --fp16
    assert training_bf16("bfloat16", False, False, bf16) is True
    with pytest.raises(InputError, match="--dtype float32 contradicts --bf16"):
        training_bf16("float32", True, False, fp32)
    with pytest.raises(InputError, match="--dtype bfloat16 contradicts --fp16"):
        training_bf16("bfloat16", False, True, bf16)
