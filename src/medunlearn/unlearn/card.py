"""The model card (README.md with YAML metadata) written beside every unlearned model."""

from __future__ import annotations

import json
from pathlib import Path

BENCHMARK_NAMES = {"amnesia": "AMNESIA", "tofu": "TOFU"}
TRAINING_FIELDS = (
    "learning_rate",
    "num_train_epochs",
    "max_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "weight_decay",
    "seed",
)


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


def write_model_card(
    out: Path,
    *,
    base_model: str,
    method,
    config,
    data_args,
    retain: str | None,
    forget_rows,
    peft: bool,
    conventions=None,
) -> Path:
    """README.md: base model, method (a method-table entry), hyperparameters, forget config, data version."""
    benchmark = BENCHMARK_NAMES[data_args.benchmark]
    conventions = conventions if conventions is not None else getattr(data_args, "conventions", None)
    conventions_json = json.dumps(conventions.to_dict() if conventions is not None else None, indent=2)
    preset_name = conventions.name if conventions is not None else "medunlearn"
    preset_option = "" if preset_name == "medunlearn" else f" --preset {preset_name}"
    training = {key: getattr(config, key) for key in TRAINING_FIELDS}
    front = [
        "---",
        f"base_model: {base_model}" if "/" in base_model and not Path(base_model).exists() else "",
        f"library_name: {'peft' if peft else 'transformers'}",
        f"tags: [medunlearn, machine-unlearning, {data_args.benchmark}, {method.stem}]",
        "---",
    ]
    body = f"""
# Unlearned model: {method.config_class.removesuffix("Config")} on {benchmark} `{data_args.forget}`

Produced by `medunlearn unlearn`.

| | |
|---|---|
| base model | `{base_model}` |
| method | `{method.stem}` ({method.summary}) |
| benchmark | {benchmark} |
| forget config | `{data_args.forget}` |
| retain config | `{retain or "-"}` |
| data | `{data_args.data}` ({dataset_version(data_args.data, forget_rows)}) |
| weights | {"LoRA adapter" if peft else "full model"}, safetensors |

## Method hyperparameters

```json
{json.dumps(config.method_hyperparameters(), indent=2, default=str)}
```

## Training

```json
{json.dumps(training, indent=2, default=str)}
```

## Conventions

Examples were rendered with the `{preset_name}` conventions (also in `conventions.json` beside the weights);
evaluate with the same ones, or the evaluation warns that the prompts differ from training.

```json
{conventions_json}
```

The model was trained to forget the {"patients" if data_args.benchmark == "amnesia" else "authors"} of
`{data_args.forget}`. Evaluate it with
`medunlearn evaluate --model {out} --data {data_args.data} --forget {data_args.forget}{
        " --benchmark tofu" if data_args.benchmark == "tofu" else ""
    }{preset_option}`.
"""
    path = out / "README.md"
    path.write_text("\n".join(line for line in front if line) + "\n" + body)
    return path
