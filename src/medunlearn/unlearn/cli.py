"""``medunlearn unlearn``: run an unlearning method on a model with an AMNESIA forget config.

Options of the method's config (learning rate, β, layer, …) come from a recipe YAML (``--config``) and/or the
command line (``--learning_rate 1e-5``), as with TRL's ``TrlParser``: command line over recipe over paper default.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.methods import METHODS, resolve_method

EPILOG = """example (a tiny end-to-end run on CPU):
  medunlearn amnesia build --out /tmp/amnesia --patients 40 --seed 0
  medunlearn finetune --model tiny-llama --data /tmp/amnesia --out /tmp/ft --num_train_epochs 1
  medunlearn unlearn --method GradDiff --model /tmp/ft --data /tmp/amnesia --forget forget_10 --out /tmp/gd \\
      --config recipes/grad_diff.yaml --max_steps 5

  medunlearn unlearn --list                     # the methods, one line each
  medunlearn unlearn --method npo --help-method # every option of the method's config

Any field of the method's config can be given as --field value (recipe values are overridden).
Retain config: derived from the forget config (forget_10 -> retain_90) unless --retain is given."""


class _OverridableParser(argparse.ArgumentParser):
    """Keeps unknown ``--field value`` pairs in ``args.overrides`` for the method's config parser."""

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        namespace.overrides = extras
        return namespace


def build_parser(prog: str = "medunlearn unlearn") -> argparse.ArgumentParser:
    parser = _OverridableParser(
        prog=prog,
        description="Run an unlearning method (GradDiff, KL-Min, NPO, SimNPO, RMU, …) on a model and save the "
        "unlearned model (safetensors, or the LoRA adapter) with a model card.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--list", action="store_true", help="list the methods and exit")
    parser.add_argument("--method", help="method stem or paper spelling (grad_diff, GradDiff, KL-Min, …)")
    parser.add_argument("--config", type=Path, help="recipe YAML (recipes/<method>.yaml); may set `method:`")
    parser.add_argument("--model", help="checkpoint folder, Hub id, or smollm2-135m")
    parser.add_argument("--data", help="AMNESIA folder (or Hub id) readable by datasets.load_dataset")
    parser.add_argument("--forget", help="forget config, e.g. forget_10 or disease_cancer_forget_5")
    parser.add_argument("--retain", help="retain config (default: derived from --forget)")
    parser.add_argument("--out", type=Path, help="output folder for the unlearned model")
    parser.add_argument("--lora", action="store_true", help="train a LoRA adapter instead of all weights")
    parser.add_argument("--lora-r", type=int, default=16, help="LoRA rank (default 16)")
    parser.add_argument("--lora-alpha", type=int, default=32, help="LoRA alpha (default 32)")
    parser.add_argument(
        "--load-in-4bit",
        action="store_true",
        help="QLoRA: load the model in 4-bit NF4 and train a LoRA adapter (bitsandbytes: the qlora extra)",
    )
    parser.add_argument(
        "--help-method", action="store_true", help="print the method config's options and exit"
    )
    parser.add_argument(
        "--benchmark", choices=("amnesia", "tofu"), default="amnesia",
        help="tofu: --data is a TOFU-format folder or Hub id (--forget forget10 -> retain90)",
    )
    return parser


def lora_config_from_args(args):
    """The LoRA adapter of ``--lora`` / ``--load-in-4bit`` (rank ``--lora-r``, alpha ``--lora-alpha``, every linear
    layer), or ``None`` for full fine-tuning. Shared by ``medunlearn finetune`` and ``medunlearn unlearn``."""
    if not (args.lora or args.load_in_4bit):
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
    )


def derive_retain_config(forget: str) -> str:
    """``forget_10`` → ``retain_90``; ``disease_cancer_forget_5`` → ``disease_cancer_retain_95``; TOFU's
    ``forget10`` → ``retain90``."""
    tofu = re.fullmatch(r"forget(\d\d)", forget)
    if tofu:
        return f"retain{100 - int(tofu.group(1))}"
    match = re.fullmatch(r"(.*?)forget_(\d+)", forget)
    if not match:
        raise UnlearningInputError(
            f"cannot derive a retain config from forget config {forget!r}; pass --retain"
        )
    return f"{match.group(1)}retain_{100 - int(match.group(2))}"


def list_methods() -> str:
    import importlib.util

    # find_spec only: listing must not import torch and every method module.
    available = {stem for stem, spec in METHODS.items() if importlib.util.find_spec(spec.module) is not None}
    lines = []
    for stem, spec in METHODS.items():
        status = "" if stem in available else "  (not installed)"
        aliases = ", ".join(spec.aliases)
        lines.append(f"  {stem:<12} {spec.summary} [aliases: {aliases}]{status}")
    return "unlearning methods (--method accepts the name or an alias, any case):\n" + "\n".join(lines)


def read_recipe(path: Path) -> dict:
    import yaml

    if not path.is_file():
        raise FileNotFoundError(f"recipe {path} does not exist")
    recipe = yaml.safe_load(path.read_text())
    if not isinstance(recipe, dict):
        raise UnlearningInputError(f"recipe {path} must be a YAML mapping of config fields")
    return recipe


def build_method_config(config_class, recipe: dict, overrides: list[str], output_dir: str, recipe_path=None):
    """Paper defaults < recipe < command line, with TRL's parser; unknown fields are an error naming them."""
    from trl import TrlParser

    parser = TrlParser(dataclass_types=[config_class])
    if not _cuda_available():
        parser.set_defaults_with_config(use_cpu=True, bf16=False)
    unknown_in_recipe = parser.set_defaults_with_config(**recipe)
    if unknown_in_recipe:
        where = f"recipe {recipe_path}" if recipe_path else "recipe"
        raise UnlearningInputError(
            f"{where}: unknown fields for {config_class.__name__}: {unknown_in_recipe}"
        )
    config, unknown = parser.parse_args_into_dataclasses(
        args=[*overrides, "--output_dir", output_dir], return_remaining_strings=True
    )
    if unknown:
        raise UnlearningInputError(
            f"unknown options for {config_class.__name__}: {unknown} (see --help-method)"
        )
    return config


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def four_bit_quantization_config():
    """The ``quantization_config`` of ``--load-in-4bit`` (QLoRA): NF4 weights, computed in bf16 on a GPU that has
    it, else in float32. bitsandbytes runs NF4 on CUDA and on CPU (CPU tested with bitsandbytes 0.50)."""
    import importlib.util

    import torch
    from transformers import BitsAndBytesConfig

    if importlib.util.find_spec("bitsandbytes") is None:
        raise UnlearningInputError(
            "--load-in-4bit needs bitsandbytes: pip install 'medunlearn[qlora]' (or drop --load-in-4bit)"
        )
    bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=torch.bfloat16 if bf16 else torch.float32,
    )


def load_starting_model(name: str, load_in_4bit: bool = False):
    """Model + tokenizer; a LoRA checkpoint is merged so the reference (adapter disabled) is the starting model."""
    from medunlearn.models import load_model_and_tokenizer

    kwargs = {"quantization_config": four_bit_quantization_config()} if load_in_4bit else {}
    if not (Path(name).exists() or "/" in name or name in ("smollm2-135m", "tiny-llama")):
        raise FileNotFoundError(f"model {name!r} is neither a folder nor a Hub id")
    model, tokenizer = load_model_and_tokenizer(name, **kwargs)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    return model, tokenizer


def load_qa_split(data: str, config: str, split: str = "train"):
    from medunlearn.data_loading import load_config

    if not (Path(data).exists() or "/" in data):
        raise FileNotFoundError(f"data folder {data} does not exist")
    try:
        return load_config(data, config, split)
    except ValueError as error:  # datasets names the available configs in its message
        raise UnlearningInputError(f"{data}: cannot load config {config!r}: {error}") from error


def write_model_card(
    out: Path,
    *,
    base_model: str,
    method: str,
    config,
    forget: str,
    retain: str | None,
    data: str,
    data_version: str,
    peft: bool,
) -> Path:
    """README.md with YAML metadata: base model, method, hyperparameters, forget config, data version."""
    hyper = {k: v for k, v in config.method_hyperparameters().items()}
    training = {
        k: getattr(config, k)
        for k in (
            "learning_rate",
            "num_train_epochs",
            "max_steps",
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "weight_decay",
            "seed",
        )
    }
    spec = METHODS[method]
    front = [
        "---",
        f"base_model: {base_model}" if "/" in base_model and not Path(base_model).exists() else "",
        f"library_name: {'peft' if peft else 'transformers'}",
        "tags: [medunlearn, machine-unlearning, amnesia, " + method + "]",
        "---",
    ]
    body = f"""
# Unlearned model: {spec.config_class.removesuffix("Config")} on AMNESIA `{forget}`

Produced by `medunlearn unlearn`.

| | |
|---|---|
| base model | `{base_model}` |
| method | `{method}` ({spec.summary}) |
| forget config | `{forget}` |
| retain config | `{retain or "-"}` |
| data | `{data}` ({data_version}) |
| weights | {"LoRA adapter" if peft else "full model"}, safetensors |

## Method hyperparameters

```json
{json.dumps(hyper, indent=2, default=str)}
```

## Training

```json
{json.dumps(training, indent=2, default=str)}
```

The model was trained to forget the patients of `{forget}`. Evaluate it with
`medunlearn evaluate --model {out} --data {data} --forget {forget}`.
"""
    path = out / "README.md"
    path.write_text("\n".join(line for line in front if line) + "\n" + body)
    return path


def dataset_version(data: str, dataset) -> str:
    """The build parameters an AMNESIA folder records (``amnesia_build.json``), plus the rows' fingerprint."""
    parts = []
    build = Path(data) / "amnesia_build.json"
    if build.is_file():
        try:
            parameters = json.loads(build.read_text()).get("parameters", {})
        except json.JSONDecodeError:
            parameters = {}
        parts += [f"{key} {parameters[key]}" for key in ("source", "patients", "seed") if key in parameters]
    version = getattr(dataset.info, "version", None)
    if version and str(version) != "0.0.0":
        parts.append(f"version {version}")
    parts.append(f"fingerprint {dataset._fingerprint}")
    return ", ".join(parts)


def unlearn(args) -> Path | None:
    """Run the method; returns the output folder on the process that wrote it (None on the other launched ones)."""
    from medunlearn.unlearn.base import leave_process_group

    recipe = read_recipe(args.config) if args.config else {}
    method_name = args.method or recipe.pop("method", None)
    recipe.pop("method", None)
    if not method_name:
        raise UnlearningInputError("--method is required (or `method:` in the recipe); see --list")
    spec = resolve_method(method_name)
    config_class, trainer_class = spec.load()
    missing = [
        flag
        for flag, value in (
            ("--model", args.model),
            ("--data", args.data),
            ("--forget", args.forget),
            ("--out", args.out),
        )
        if not value
    ]
    if missing:
        raise UnlearningInputError(f"missing {', '.join(missing)}")
    config = build_method_config(config_class, recipe, args.overrides, str(args.out), args.config)

    forget = load_qa_split(args.data, args.forget)
    retain_name = None
    retain = None
    if trainer_class.uses_retain:
        retain_name = args.retain or derive_retain_config(args.forget)
        retain = load_qa_split(args.data, retain_name)
    model, tokenizer = load_starting_model(args.model, args.load_in_4bit)
    peft_config = lora_config_from_args(args)
    trainer = trainer_class(
        model, config, forget, retain, processing_class=tokenizer, peft_config=peft_config
    )
    trainer.train()
    trainer.save_model(str(args.out))  # every process takes part (sharded states), the main one writes
    writer = trainer.is_world_process_zero()
    if writer:
        write_unlearned_folder_extras(args, spec, config, tokenizer, retain_name, forget, peft_config)
    leave_process_group(trainer.accelerator)
    return args.out if writer else None


def write_unlearned_folder_extras(args, spec, config, tokenizer, retain_name, forget, peft_config) -> None:
    """The files beside the weights: tokenizer, the method's configuration as JSON, and the model card."""
    tokenizer.save_pretrained(str(args.out))
    # The Trainer pickles its arguments; the output holds only safetensors and JSON (the JSON below replaces it).
    (args.out / "training_args.bin").unlink(missing_ok=True)
    (args.out / "unlearning_config.json").write_text(config.to_json_string())
    write_model_card(
        args.out,
        base_model=args.model,
        method=spec.stem,
        config=config,
        forget=args.forget,
        retain=retain_name,
        data=args.data,
        data_version=dataset_version(args.data, forget),
        peft=peft_config is not None,
    )


def run(args) -> int:
    try:
        if args.list:
            print(list_methods())
            return 0
        if args.help_method:
            if not args.method:
                raise UnlearningInputError("--help-method needs --method")
            from trl import TrlParser

            TrlParser(dataclass_types=[resolve_method(args.method).load()[0]]).print_help()
            return 0
        out = unlearn(args)
    except (UnlearningInputError, FileNotFoundError) as error:
        print(f"medunlearn unlearn: error: {error}", file=sys.stderr)
        return 2
    if out is not None:  # under accelerate launch, only the process that wrote the folder says so
        print(f"unlearned model written to {out}")
    return 0
