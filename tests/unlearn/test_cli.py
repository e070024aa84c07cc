"""``medunlearn unlearn`` and ``medunlearn finetune`` end to end on a tiny AMNESIA folder, and their
errors."""

from __future__ import annotations

import importlib.util
import json
import shutil
import warnings

import pytest

from medunlearn.cli import main
from medunlearn.models import four_bit_quantization_config
from medunlearn.unlearn import sources  # where run_unlearning reads the forget and retain sets


@pytest.fixture(scope="module")
def amnesia_dir(tmp_path_factory):
    from medunlearn.amnesia import build_amnesia_folder

    return build_amnesia_folder(tmp_path_factory.mktemp("amnesia") / "data", patients=20, seed=0)


@pytest.fixture(scope="module")
def finetuned_dir(amnesia_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("ft") / "model"
    rc = main(
        [
            "finetune",
            "--model",
            "tiny-llama",
            "--data",
            str(amnesia_dir),
            "--out",
            str(out),
            "--notes-epochs",
            "1",
            "--qa-epochs",
            "1",
            "--tiny-vocab-size",
            "600",
            "--disable_tqdm",
            "true",
        ]
    )
    assert rc == 0
    return out


def test_list_prints_every_core_method_with_a_summary(capsys):
    assert main(["unlearn", "--list"]) == 0
    out = capsys.readouterr().out
    for stem in ["grad_ascent", "grad_diff", "kl_min", "npo", "simnpo", "rmu"]:
        line = next(line for line in out.splitlines() if line.strip().startswith(stem + " "))
        assert len(line.split()) > 3


def test_unknown_method_is_a_clear_error(tmp_path, capsys):
    rc = main(
        [
            "unlearn",
            "--method",
            "forget-everything",
            "--model",
            "x",
            "--data",
            str(tmp_path),
            "--forget",
            "forget_10",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "unknown unlearning method 'forget-everything'" in err and "Traceback" not in err


def test_unknown_recipe_field_names_the_file_and_field(tmp_path, capsys):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("method: npo\nbetta: 0.2\n")
    rc = main(
        [
            "unlearn",
            "--config",
            str(recipe),
            "--model",
            "x",
            "--data",
            str(tmp_path),
            "--forget",
            "forget_10",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "bad.yaml" in err and "betta" in err


def test_an_unknown_recipe_field_holding_a_yaml_alias_bomb_is_named_without_expanding_it(tmp_path, capsys):
    """A recipe that is nine nested aliases (9**9 strings once expanded) fails at once, naming the key."""
    levels = ["a: &a [" + ", ".join(["lol"] * 9) + "]"]
    for previous, name in zip("abcdefgh", "bcdefghi"):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    recipe = tmp_path / "bomb.yaml"
    recipe.write_text("method: npo\n" + "\n".join(levels) + "\n")
    argv = ["unlearn", "--config", str(recipe), "--model", "x", "--data", str(tmp_path / "d")]
    rc = main([*argv, "--forget", "forget_10", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "bomb.yaml" in err and "unknown fields" in err and "lol" not in err


def test_retain_config_is_derived_from_the_forget_config():
    from medunlearn.unlearn.run import UnlearningDataArguments

    assert UnlearningDataArguments("d", "forget_10").retain_config() == "retain_90"
    assert (
        UnlearningDataArguments("d", "disease_cancer_forget_5").retain_config() == "disease_cancer_retain_95"
    )
    assert UnlearningDataArguments("d", "forget_10", retain="retain_80").retain_config() == "retain_80"


@pytest.mark.slow
def test_finetune_then_unlearn_with_recipe_and_override(finetuned_dir, amnesia_dir, tmp_path):
    from safetensors.torch import load_file

    assert (finetuned_dir / "model.safetensors").is_file()
    out = tmp_path / "unlearned"
    rc = main(
        [
            "unlearn",
            "--config",
            "recipes/npo.yaml",
            "--model",
            str(finetuned_dir),
            "--data",
            str(amnesia_dir),
            "--forget",
            "forget_10",
            "--out",
            str(out),
            "--max_steps",
            "2",
            "--beta",
            "0.3",
            "--retain_sampling",
            "same_disease",
            "--disable_tqdm",
            "true",
        ]
    )
    assert rc == 0
    saved = json.loads((out / "unlearning_config.json").read_text())
    assert saved["beta"] == 0.3 and saved["retain_sampling"] == "same_disease"
    assert saved["per_device_train_batch_size"] == 4  # from the recipe
    card = (out / "README.md").read_text()
    assert "source synthetic, patients 20, seed 0" in card
    assert "`npo`" in card and "forget_10" in card and "retain_90" in card and '"beta": 0.3' in card
    assert not list(out.glob("*.bin")) and not list(out.glob("*.pt"))
    before, after = load_file(finetuned_dir / "model.safetensors"), load_file(out / "model.safetensors")
    assert any(not (before[k] == after[k]).all() for k in before)


@pytest.mark.slow
def test_rmu_on_a_2_layer_model_steers_layer_0_says_so_and_prints_no_bitsandbytes_kernel_message(
    finetuned_dir, amnesia_dir, tmp_path
):
    """The paper's layer 7 does not exist in the 2-layer tiny model: the default is the layer at the same
    relative depth, said in the output and recorded in the card. A fresh process, so that bitsandbytes is
    imported by this run (peft imports it), and its CPU-kernel message would show: the run does not
    quantise."""
    import os
    import subprocess
    import sys

    out = tmp_path / "rmu"
    command = [sys.executable, "-m", "medunlearn.cli", "unlearn", "--method", "rmu"]
    command += ["--model", str(finetuned_dir), "--data", str(amnesia_dir), "--forget", "forget_10"]
    command += ["--out", str(out), "--max_steps", "1"]
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **offline}, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "RMU steers decoder layer 0 of 2" in output
    assert "gemm_4bit_forward" not in output and "kernels-community" not in output
    assert json.loads((out / "unlearning_config.json").read_text())["layer"] == 0
    assert '"layer": 0' in (out / "README.md").read_text()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("accelerate") is None, reason="accelerate CLI not installed")
def test_unlearn_under_accelerate_launch_writes_the_model_once_and_exits_cleanly(
    finetuned_dir, amnesia_dir, tmp_path
):
    import os
    import subprocess

    from tiny_training import free_port

    out = tmp_path / "unlearned"
    # Without a GPU, the multi-GPU launcher starts two gloo processes (see tests/unlearn/test_distributed.py).
    launch = [
        shutil.which("accelerate"),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--main_process_port",
        str(free_port()),
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
    ]
    unlearn = [
        "-m",
        "medunlearn.cli",
        "unlearn",
        "--method",
        "grad_diff",
        "--model",
        str(finetuned_dir),
        "--data",
        str(amnesia_dir),
        "--forget",
        "forget_10",
        "--out",
        str(out),
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "2",
        "--disable_tqdm",
        "true",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    completed = subprocess.run(launch + unlearn, env=env, capture_output=True, text=True, timeout=180)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.count("unlearned model written to") == 1
    assert (out / "model.safetensors").is_file() and (out / "README.md").is_file()
    assert json.loads((out / "unlearning_config.json").read_text())["max_steps"] == 2


@pytest.mark.slow
def test_model_without_chat_template_is_a_clear_error(finetuned_dir, amnesia_dir, tmp_path, capsys):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(finetuned_dir, bare)
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    rc = main(
        [
            "unlearn",
            "--method",
            "grad_diff",
            "--model",
            str(bare),
            "--data",
            str(amnesia_dir),
            "--forget",
            "forget_10",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "chat template" in err


@pytest.mark.slow
def test_nan_loss_is_a_clear_error_and_checkpoints_are_kept(finetuned_dir, amnesia_dir, tmp_path, capsys):
    out = tmp_path / "o"
    rc = main(
        [
            "unlearn",
            "--method",
            "GradAscent",
            "--model",
            str(finetuned_dir),
            "--data",
            str(amnesia_dir),
            "--forget",
            "forget_25",
            "--out",
            str(out),
            "--learning_rate",
            "1e12",
            "--per_device_train_batch_size",
            "1",
            "--max_steps",
            "20",
            "--save_strategy",
            "steps",
            "--save_steps",
            "1",
            "--disable_tqdm",
            "true",
        ]
    )
    err = capsys.readouterr().err
    # The output folder is written whole or not at all; the checkpoints move beside it, and the message says
    # where.
    kept = tmp_path / "o.checkpoints"
    assert rc == 2 and "loss is" in err and f"{kept} are kept" in err
    assert (kept / "checkpoint-1" / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.checkpoints"]


@pytest.mark.slow
def test_unlearn_with_lora_saves_only_the_adapter_and_says_so(finetuned_dir, amnesia_dir, tmp_path):
    out = tmp_path / "lora"
    rc = main(
        [
            "unlearn",
            "--method",
            "kl-min",
            "--lora",
            "--lora-r",
            "4",
            "--model",
            str(finetuned_dir),
            "--data",
            str(amnesia_dir),
            "--forget",
            "forget_10",
            "--out",
            str(out),
            "--max_steps",
            "2",
            "--learning_rate",
            "1e-3",
            "--disable_tqdm",
            "true",
        ]
    )
    assert rc == 0
    assert (out / "adapter_model.safetensors").is_file() and not (out / "model.safetensors").exists()
    card = (out / "README.md").read_text()
    assert "library_name: peft" in card and "LoRA adapter" in card and "`kl_min`" in card
    from medunlearn.models import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(str(out))
    assert type(model).__name__.startswith("Peft") and tokenizer.chat_template


@pytest.mark.slow
def test_finetune_with_lora_writes_a_merged_plain_model(amnesia_dir, tmp_path):
    import json as _json

    out = tmp_path / "ft-lora"
    rc = main(
        [
            "finetune",
            "--model",
            "tiny-llama",
            "--data",
            str(amnesia_dir),
            "--out",
            str(out),
            "--lora",
            "--lora-r",
            "4",
            "--notes-epochs",
            "0",
            "--qa-epochs",
            "1",
            "--tiny-vocab-size",
            "600",
            "--disable_tqdm",
            "true",
        ]
    )
    assert rc == 0
    assert (out / "model.safetensors").is_file() and not (out / "adapter_config.json").exists()
    assert _json.loads((out / "config.json").read_text())["model_type"] == "llama"


def test_load_in_4bit_without_bitsandbytes_names_the_extra(amnesia_dir, tmp_path, capsys, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "bitsandbytes" else find_spec(name, *a)
    )
    rc = main(
        [
            "unlearn",
            "--method",
            "npo",
            "--load-in-4bit",
            "--model",
            "smollm2-135m",
            "--data",
            str(amnesia_dir),
            "--forget",
            "forget_10",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2 and "medunlearn[qlora]" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_load_in_4bit_with_tiny_llama_says_to_quantise_a_saved_folder(amnesia_dir, tmp_path, capsys):
    rc = main(
        [
            "finetune",
            "--model",
            "tiny-llama",
            "--load-in-4bit",
            "--data",
            str(amnesia_dir),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2 and "pass the saved folder as --model" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("bitsandbytes") is None, reason="bitsandbytes (medunlearn[qlora]) absent"
)
def test_qlora_finetune_and_unlearn_train_adapters_on_4bit_weights(finetuned_dir, amnesia_dir, tmp_path):
    from bitsandbytes.nn import Linear4bit
    from safetensors.torch import load_file

    from medunlearn.models import load_model_and_tokenizer

    common = ["--data", str(amnesia_dir), "--load-in-4bit", "--lora-r", "4", "--disable_tqdm", "true"]
    tuned = tmp_path / "qlora-ft"
    assert (
        main(
            [
                "finetune",
                "--model",
                str(finetuned_dir),
                "--out",
                str(tuned),
                "--notes-epochs",
                "0",
                "--qa-epochs",
                "1",
                *common,
            ]
        )
        == 0
    )
    unlearned = tmp_path / "qlora-npo"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # NPO runs a no-grad reference pass before training: it must not leave the 4-bit layers without a
        # backward.
        assert (
            main(
                [
                    "unlearn",
                    "--method",
                    "npo",
                    "--model",
                    str(finetuned_dir),
                    "--forget",
                    "forget_10",
                    "--out",
                    str(unlearned),
                    "--max_steps",
                    "2",
                    "--learning_rate",
                    "1e-3",
                    *common,
                ]
            )
            == 0
        )
    assert not [w for w in caught if "autograd kernel was not registered" in str(w.message)]
    for out in (tuned, unlearned):
        # Only the adapter is written (a 4-bit base is not merged into), and it was trained: LoRA's B starts
        # at 0.
        assert (out / "adapter_config.json").is_file() and not (out / "model.safetensors").exists()
        adapter = load_file(out / "adapter_model.safetensors")
        lora_b = [name for name in adapter if "lora_B" in name]
        assert lora_b and any(adapter[name].abs().max() > 0 for name in lora_b)
    assert "LoRA adapter" in (unlearned / "README.md").read_text()
    model, _ = load_model_and_tokenizer(str(unlearned), quantization_config=four_bit_quantization_config())
    four_bit = [module for module in model.modules() if isinstance(module, Linear4bit)]
    assert four_bit and not any(module.support_avx512bf16_for_cpu for module in four_bit)


@pytest.mark.slow
def test_empty_forget_config_is_a_clear_error(finetuned_dir, amnesia_dir, tmp_path, capsys, monkeypatch):
    real = sources.load_split

    def empty_forget(data, config, split="train"):
        rows = real(data, config, split)
        return rows.select([]) if "forget" in config else rows

    monkeypatch.setattr(sources, "load_split", empty_forget)
    rc = main(
        [
            "unlearn",
            "--method",
            "simnpo",
            "--model",
            str(finetuned_dir),
            "--data",
            str(amnesia_dir),
            "--forget",
            "forget_10",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "forget set has no rows" in err


def test_unknown_forget_config_names_it(amnesia_dir, tmp_path, capsys):
    rc = main(
        [
            "unlearn",
            "--method",
            "grad_ascent",
            "--model",
            "smollm2-135m",
            "--data",
            str(amnesia_dir),
            "--forget",
            "forget_99",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "forget_99" in err and "Traceback" not in err
