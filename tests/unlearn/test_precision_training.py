"""``--dtype`` for training (docs/scaling.md, "Precision"): bf16 is mixed precision over float32 weights
(``TrainingArguments(bf16=True)``, autocast), ``auto`` keeps float32 on a CPU without native bf16, the
open-unlearning preset pins float32 on CPU, and a contradicting ``--bf16`` / ``--fp16`` is an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medunlearn.cli import main
from medunlearn.errors import InputError, MedunlearnError
from medunlearn.utils import precision

TINY = ["--tiny-vocab-size", "600", "--disable_tqdm", "true"]


@pytest.fixture()
def plant_cpu(monkeypatch):
    def plant(flags, speedup=4.0):
        monkeypatch.setattr(precision, "cpu_flags", lambda *a: frozenset(flags))
        monkeypatch.setattr(precision, "bf16_matmul_speedup", lambda *a: speedup)

    return plant


def _method_config(tmp_path, **fields):
    from medunlearn.unlearn import make_method_config

    return make_method_config("grad_diff", tmp_path / "out", **fields)


def test_unlearning_auto_keeps_float32_without_native_bf16(tmp_path, plant_cpu):
    plant_cpu({"avx2"}, speedup=50.0)
    config = _method_config(tmp_path)
    assert (config.dtype, config.bf16, config.use_cpu, config.mixed_precision) == ("auto", False, True, "no")


def test_unlearning_auto_takes_bf16_on_a_fast_native_bf16_cpu(tmp_path, plant_cpu):
    plant_cpu({"amx_bf16"}, speedup=4.0)
    config = _method_config(tmp_path)
    assert (config.bf16, config.mixed_precision) == (True, "bf16")


def test_the_parity_preset_pins_float32_on_cpu(tmp_path, plant_cpu):
    from medunlearn.unlearn import make_method_config

    plant_cpu({"amx_bf16"}, speedup=4.0)
    config = make_method_config("grad_diff", tmp_path / "out", conventions="open-unlearning")
    assert (config.dtype, config.bf16, config.mixed_precision) == ("float32", False, "no")
    # an explicit choice still wins over the preset
    asked = make_method_config("grad_diff", tmp_path / "o", conventions="open-unlearning", dtype="bfloat16")
    assert asked.bf16


def test_an_explicit_dtype_wins_and_a_contradiction_is_an_error(tmp_path, plant_cpu):
    plant_cpu({"avx2"}, speedup=0.03)
    assert _method_config(tmp_path, dtype="bfloat16").bf16
    assert _method_config(tmp_path, bf16=True).bf16  # under auto, a recipe's --bf16 stands
    with pytest.raises(InputError, match="--dtype float32 contradicts --bf16"):
        _method_config(tmp_path, dtype="float32", bf16=True)


def test_finetune_config_follows_dtype(tmp_path, plant_cpu):
    from medunlearn.models import ModelArguments
    from medunlearn.unlearn.run import default_sft_config

    plant_cpu({"avx2"}, speedup=50.0)
    model_args = ModelArguments("tiny-llama")
    assert default_sft_config(model_args, tmp_path).bf16 is False  # TRL's own default is True
    assert default_sft_config(model_args, tmp_path, dtype="bfloat16").bf16 is True
    with pytest.raises(MedunlearnError, match="--dtype bfloat16 contradicts --bf16 False"):
        default_sft_config(model_args, tmp_path, ["--bf16", "False"], dtype="bfloat16")
    plant_cpu({"amx_bf16"}, speedup=4.0)
    assert default_sft_config(model_args, tmp_path, parity="open-unlearning").bf16 is False


def _float_dtypes(folder: Path) -> set[str]:
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), framework="pt") as weights:
        return {str(weights.get_tensor(name).dtype) for name in weights.keys()}


@pytest.mark.slow  # ~20 s: builds a 20-patient folder, fine-tunes and unlearns a tiny Llama one step each
def test_bf16_training_runs_mixed_precision_and_saves_float32_weights(tmp_path, capsys, monkeypatch):
    from medunlearn.amnesia import build_amnesia_folder
    from medunlearn.unlearn.trainer import UnlearningTrainer

    data = build_amnesia_folder(tmp_path / "data", patients=20, seed=0)
    finetuned = tmp_path / "ft"
    argv = ["finetune", "--model", "tiny-llama", "--data", str(data), "--out", str(finetuned), "--dtype"]
    assert (
        main([*argv, "bfloat16", "--notes-epochs", "0", "--qa-epochs", "1", "--max_steps", "1", *TINY]) == 0
    )
    assert "dtype: bfloat16 autocast over float32 weights (as asked)" in capsys.readouterr().err
    assert _float_dtypes(finetuned) == {"torch.float32"}

    seen = []
    original = UnlearningTrainer.train

    def train(self, *args, **kwargs):
        seen.append((self.args.bf16, self.accelerator.mixed_precision, next(self.model.parameters()).dtype))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(UnlearningTrainer, "train", train)
    out = tmp_path / "gd"
    argv = ["unlearn", "--method", "grad_diff", "--model", str(finetuned), "--data", str(data)]
    argv += ["--forget", "forget_10", "--out", str(out), "--max_steps", "1", "--disable_tqdm", "true"]
    assert main([*argv, "--dtype", "bfloat16"]) == 0
    import torch

    assert seen == [(True, "bf16", torch.float32)]
    assert _float_dtypes(out) == {"torch.float32"}
    assert json.loads((out / "unlearning_config.json").read_text())["bf16"] is True
