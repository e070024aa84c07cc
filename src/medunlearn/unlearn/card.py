"""The model card (README.md with YAML metadata) written beside every unlearned model."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medunlearn.errors import FileContentError
from medunlearn.utils.files import atomic_write_text
from medunlearn.utils.user_files import read_json

BENCHMARK_NAMES = {"amnesia": "AMNESIA", "tofu": "TOFU", "muse": "MUSE"}
FORGOTTEN_UNITS = {"amnesia": "patients", "tofu": "authors", "muse": "documents"}
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
        try:  # read after training: a damaged record leaves the card's version line shorter, no more
            parameters = read_json(build, expect=dict).get("parameters", {})
        except FileContentError:
            parameters = {}
        parameters = parameters if isinstance(parameters, dict) else {}
        parts += [f"{key} {parameters[key]}" for key in ("source", "patients", "seed") if key in parameters]
    version = getattr(dataset.info, "version", None)
    if version and str(version) != "0.0.0":
        parts.append(f"version {version}")
    parts.append(f"fingerprint {dataset._fingerprint}")
    return ", ".join(parts)


@dataclass(frozen=True)
class ModelCardFacts:
    """What the card of an unlearned model states (the keywords of :func:`write_model_card`).

    ``method`` is a method-table entry, ``config`` the method's config, ``data_args`` the run's
    ``DataArguments``, ``retain`` the retain config's name, ``forget_rows`` the forget dataset (its
    fingerprint is the data version); with ``probe`` (``medunlearn.unlearn.probe.ProbeCallback.record``) the
    card says the rule, the probe and the step kept. ``model_path`` is where the model will be read from (the
    command's ``--out``) when the card is written into a staging folder; the card's commands name it."""

    base_model: str
    method: Any
    config: Any
    data_args: Any
    retain: str | None
    forget_rows: Any
    peft: bool
    conventions: Any = None
    probe: dict | None = None
    model_path: str | Path | None = None


def write_model_card(out: Path, facts: ModelCardFacts | None = None, /, **fields) -> Path:
    """README.md: base model, method (a method-table entry), hyperparameters, forget config, data version;
    the probe's rule and kept step when there was one. ``fields`` are :class:`ModelCardFacts` fields, given
    alone (``base_model=...``) or over ``facts``."""
    facts = ModelCardFacts(**fields) if facts is None else dataclasses.replace(facts, **fields)
    base_model, method, config, data_args = facts.base_model, facts.method, facts.config, facts.data_args
    peft, conventions, probe = facts.peft, facts.conventions, facts.probe
    model_path = out if facts.model_path is None else facts.model_path
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
| retain config | `{facts.retain or "-"}` |
| data | `{data_args.data}` ({dataset_version(data_args.data, facts.forget_rows)}) |
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

The model was trained to forget the {FORGOTTEN_UNITS.get(data_args.benchmark, "documents")} of
`{data_args.forget}`. Evaluate it with
`medunlearn evaluate --model {model_path} --data {data_args.data} --forget {data_args.forget}{
        "" if data_args.benchmark == "amnesia" else f" --benchmark {data_args.benchmark}"
    }{preset_option}`.
"""
    if probe is not None:
        body += probe_section(probe)
    path = out / "README.md"
    path.write_text("\n".join(line for line in front if line) + "\n" + body)
    return path


def probe_section(probe: dict) -> str:
    """The card's "Evaluation during unlearning" section: the rule, the probe's size, the step kept."""
    choice, size = probe.get("choice") or {}, probe["probe"]
    if choice.get("rule_met"):
        kept = (
            f"**step {choice['step']}** (probe AFE {choice['probe_afe']:.3f}, retain-MU drop "
            f"{choice['probe_retain_mu_drop']:.3f}); its weights are in `best/` (safetensors), the final "
            "step's in this folder"
        )
    else:
        kept = "none: no probed step stayed within the bound, so `best/` was not written (final step here)"
    lines = [
        "",
        "## Evaluation during unlearning",
        "",
        f"Rule: {probe['rule']}, with max_retain_mu_drop = {probe['max_retain_mu_drop']}.",
        "",
        f"Probe: {size['forget_patients']} forget patients ({size['forget_questions']} QA) and "
        f"{size['retain_patients']} retained patients ({size['retain_questions']} QA), scored at step 0 and "
        f"every {probe['eval_probe_steps']} steps by {probe['scoring']}, at most "
        f"{probe['probe_max_new_tokens']} new tokens.",
        "",
        f"Step kept: {kept}.",
        "",
        "| step | probe AFE | probe retain MU | retain-MU drop |",
        "|---|---|---|---|",
        *(
            f"| {r['step']} | {r['probe_afe']:.3f} | {r['probe_retain_mu']:.3f} "
            f"| {r['probe_retain_mu_drop']:.3f} |"
            for r in probe["history"]
        ),
        "",
    ]
    return "\n".join(lines)


# A section another command adds to the card (``medunlearn attack --write-card``): between these markers, so a
# later run replaces it instead of appending a second copy.
SECTION_START = "<!-- medunlearn:{name} -->"
SECTION_END = "<!-- /medunlearn:{name} -->"


def replace_card_section(model_dir: str | Path, name: str, section: str) -> Path:
    r"""Put ``section`` (Markdown) into the model card ``model_dir/README.md`` between the markers of
    ``name``, replacing a previous copy, or appended when there is none (a card is started when the folder
    has none).

    Written atomically (:func:`medunlearn.utils.files.atomic_write_text`): a killed run leaves the old card.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "README.md").write_text("# Card\n")
    >>> _ = replace_card_section(folder, "robustness", "## Robustness\n\nold\n")
    >>> _ = replace_card_section(folder, "robustness", "## Robustness\n\nnew\n")
    >>> text = (folder / "README.md").read_text()
    >>> text.count("## Robustness"), "new" in text, "old" in text, text.startswith("# Card")
    (1, True, False, True)
    """
    path = Path(model_dir) / "README.md"
    start, end = SECTION_START.format(name=name), SECTION_END.format(name=name)
    block = f"{start}\n{section.strip()}\n{end}\n"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    head, found, rest = text.partition(start)
    if found and end in rest:
        text = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + block
    return atomic_write_text(path, text)


def write_finetune_card(
    out: Path, *, model_path: str | Path, base_model: str, args, training, rows: dict[str, int]
) -> Path:
    """README.md of a fine-tuned folder: what it was fine-tuned from, on what, how, and the next commands.

    ``args`` is the run's ``FinetuneArguments``, ``training`` its ``SFTConfig`` (the fields of
    ``TRAINING_FIELDS`` are shown), ``rows`` the number of training rows of each stage; ``model_path`` is
    where the model will be read from (``out`` may be the staging folder it is written into).
    """
    benchmark = BENCHMARK_NAMES[args.benchmark]
    conventions = getattr(args.conventions, "name", args.conventions)
    # Each stage trains its own epochs (the template's num_train_epochs is TrainingArguments' default).
    epochs = f"{args.notes_epochs} (stage 1, notes), {args.qa_epochs} (stage 2, QA)"
    settings = "\n".join(
        f"| {key} | {epochs if key == 'num_train_epochs' else getattr(training, key, None)} |"
        for key in TRAINING_FIELDS
    )
    front = "\n".join(
        [
            "---",
            f"base_model: {base_model}" if "/" in base_model and not Path(base_model).exists() else "",
            "library_name: transformers",
            f"tags: [medunlearn, fine-tuned, {args.benchmark}]",
            "---",
        ]
    )
    body = f"""
# Fine-tuned model: {benchmark} `{args.data}`

Produced by `medunlearn finetune`: the starting model of an unlearning run (it has seen every patient or
author of the folder, forget sets included).

| | |
|---|---|
| base model | `{base_model}` |
| data | `{args.data}` ({benchmark}) |
| stage 1: notes | {args.notes_epochs} epochs over {rows.get("notes", 0)} notes |
| stage 2: QA | {args.qa_epochs} epochs over {rows.get("qa", 0)} QA rows (completion only) |
| conventions | `{conventions}` (`conventions.json`) |

## Training settings (both stages)

| setting | value |
|---|---|
{settings}

## Next

`medunlearn unlearn --model {model_path} --data {args.data} --forget FORGET --method METHOD --out OUT`, then
`medunlearn evaluate --model OUT --before {model_path} --data {args.data} --forget FORGET --out EVAL`.
"""
    path = Path(out) / "README.md"
    atomic_write_text(path, "\n".join(line for line in front.splitlines() if line) + "\n" + body)
    return path
