"""The training half as Python functions: ``run_finetune`` and ``run_unlearning``.

They take typed arguments in TRL's style (a script-arguments dataclass, the trainer's config, and
:class:`~medunlearn.models.ModelArguments`) and return the folder they wrote. ``medunlearn finetune`` and
``medunlearn unlearn`` only parse their options into these; the demo, the study runner and notebooks call
them directly::

    from medunlearn.models import ModelArguments
    from medunlearn.unlearn import make_method_config, run_unlearning, UnlearningDataArguments

    config = make_method_config("grad_diff", "ckpt/gd", learning_rate=1e-5, max_steps=5)
    run_unlearning(config, ModelArguments("ckpt/finetuned"), UnlearningDataArguments("amnesia", "forget_10"))

Under ``accelerate launch`` every process runs the same call; the folder is returned on the process that
wrote it and ``None`` on the others.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from medunlearn.amnesia.note_sets import load_notes, note_document
from medunlearn.chat import (
    Conventions,
    require_chat_template,
    resolve_conventions,
    warn_if_conventions_differ,
    write_model_conventions,
)
from medunlearn.data_loading import check_text_fields, load_split, retain_config_for, split_source
from medunlearn.errors import MedunlearnError
from medunlearn.models import ModelArguments, load_model
from medunlearn.unlearn.card import replace_card_section, write_finetune_card, write_model_card
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.finetune_checks import STAGE_SETTINGS, check_finetune_trains
from medunlearn.unlearn.methods import METHODS, MethodSpec, resolve_method
from medunlearn.unlearn.recipe_files import check_recipe_values
from medunlearn.unlearn.recipe_files import read_recipe as read_recipe  # where callers import it
from medunlearn.unlearn.reference_recipe import (
    check_reference_requirements,
    is_reference_preset,
    reference_defaults,
)
from medunlearn.unlearn.sources import (
    MUSE_DEFAULTS,
    ForgetOn,
    check_corpus_format,
    check_forget_on,
    corpus_card_section,
    corpus_format,
    load_corpus,
    training_sets,
)
from medunlearn.utils.distributed import launched_processes, leave_process_group
from medunlearn.utils.files import check_output_folder, commit_staging, discard_staging, open_staging
from medunlearn.utils.numbers import parse_config_arguments, refuse_set_fields
from medunlearn.utils.progress import bar_without_logs

logger = logging.getLogger(__name__)

Benchmark = Literal["amnesia", "tofu", "muse"]
TINY_LLAMA_LEARNING_RATE = 1e-3  # a randomly initialised model needs a far larger step than a pretrained one


@dataclass
class UnlearningDataArguments:
    """What to forget and what to retain.

    Parameters:
        data (`str`):
            An AMNESIA folder (or Hub id) readable by `datasets.load_dataset`; with `benchmark="tofu"` a
            TOFU-format folder or Hub id; with `benchmark="muse"` a MUSE-format folder (docs/muse.md).
        forget (`str`):
            The forget config, e.g. `forget_10` or `disease_cancer_forget_5` (TOFU: `forget10`; MUSE:
            `raw/forget`, `scal/forget_2`, `sust/forget_3`, …).
        retain (`str` or `None`, *optional*, defaults to `None`):
            The retain config; `None` derives it from `forget` (`forget_10` → `retain_90`; MUSE:
            `raw/retain1`).
        benchmark (`"amnesia"`, `"tofu"` or `"muse"`, *optional*, defaults to `"amnesia"`):
            Which benchmark the folder holds (named in the model card).
        forget_on (`"qa"`, `"notes"` or `"both"`, *optional*, defaults to `"qa"`):
            AMNESIA: unlearn the patients' seen QA, their notes, or both (``medunlearn.unlearn.sources``).
        conventions (`Conventions` or `str`, *optional*, defaults to `"medunlearn"`):
            How examples are rendered (system prompt, chat template or tags, EOS after the answer): a
            `medunlearn.chat.Conventions` or a preset name (`medunlearn`, `open-unlearning`,
            `open-unlearning-llama3`). Use the conventions the model was fine-tuned with and will be
            evaluated with; they are recorded in the model card and `conventions.json`.
    """

    data: str
    forget: str
    retain: str | None = None
    benchmark: Benchmark = "amnesia"
    conventions: Conventions | str = "medunlearn"
    forget_on: ForgetOn = "qa"

    def __post_init__(self):
        self.conventions = resolve_conventions(self.conventions)
        check_forget_on(self.benchmark, self.forget_on)
        if self.retain is not None and self.retain == self.forget:  # it would train against itself
            raise UnlearningInputError(f"--retain {self.retain} is the --forget config: give another one")

    def retain_config(self) -> str:
        if self.benchmark == "muse":
            return self.retain or MUSE_DEFAULTS["retain"]
        return self.retain or retain_config_for(self.forget)


@dataclass
class FinetuneArguments:
    """The two stages of fine-tuning (AMNESIA's pipeline): notes pretraining, then completion-only QA SFT.

    Parameters:
        data (`str`):
            An AMNESIA folder (or Hub id); with `benchmark="tofu"` a TOFU-format folder (QA only).
        output_dir (`str`):
            Where the fine-tuned model is written.
        notes_epochs (`float`, *optional*, defaults to `1.0`):
            Stage 1 epochs of next-token loss over the `notes` config (0 skips the stage; TOFU has no notes).
        qa_epochs (`float`, *optional*, defaults to `3.0`):
            Stage 2 epochs over the seen QA (`full`'s `train` split), loss on the answer only.
        benchmark (`"amnesia"` or `"tofu"`, *optional*, defaults to `"amnesia"`):
            Which benchmark the folder holds (TOFU: no notes stage).
        conventions (`Conventions` or `str`, *optional*, defaults to `"medunlearn"`):
            How the QA stage renders examples (system prompt, chat template or tags): a
            `medunlearn.chat.Conventions` or a preset name. Unlearn and evaluate the model with the same
            conventions; they are written beside the weights (`conventions.json`).
    """

    data: str
    output_dir: str
    notes_epochs: float = 1.0
    qa_epochs: float = 3.0
    benchmark: Benchmark = "amnesia"
    conventions: Conventions | str = "medunlearn"

    def __post_init__(self):
        self.conventions = resolve_conventions(self.conventions)


# ---------------------------------------------------------------------------------------------------------
# Method configs: paper default < recipe < command line


def conventions_loss_averaging(config_class, conventions: Conventions | str | None) -> str | None:
    """The ``loss_averaging`` that ``conventions`` select for a method's config: its own value, or the
    method's reference choice (``config_class.reference_loss_averaging``) for ``"reference"``."""
    if conventions is None:
        return None
    choice = resolve_conventions(conventions).loss_averaging
    return config_class.reference_loss_averaging if choice == "reference" else choice


def reference_recipe_defaults(config_class, conventions, benchmark: str) -> dict[str, Any]:
    """The reference's training recipe for ``config_class`` on ``benchmark`` when ``conventions`` are a
    reference preset (``open-unlearning``), else nothing (``medunlearn.unlearn.reference_recipe``)."""
    if conventions is None or not is_reference_preset(resolve_conventions(conventions)):
        return {}
    stem = method_stem(config_class)
    return reference_defaults(stem or "", benchmark, set(config_class.__dataclass_fields__))


def build_method_config(
    config_class,
    recipe: dict,
    overrides: list[str],
    output_dir: str,
    recipe_path=None,
    conventions=None,
    benchmark: str = "amnesia",
    forget_on: str = "qa",
):
    """Paper defaults < the corpus's ``data_format`` (``text`` for MUSE and AMNESIA notes) < ``conventions``
    (their loss averaging, and under ``open-unlearning`` the reference's training recipe for ``benchmark``:
    docs/tofu.md, docs/muse.md) < recipe < command-line ``--field value`` pairs, with TRL's parser; unknown
    fields are an error naming them. On a machine without CUDA the run is put on the CPU, where ``dtype``
    ``auto`` keeps float32 unless the CPU has fast native bf16, and the open-unlearning preset makes
    ``float32`` the default (docs/scaling.md, "Precision")."""
    import torch
    from trl import TrlParser

    parser = TrlParser(dataclass_types=[config_class])
    if not torch.cuda.is_available():
        parser.set_defaults_with_config(use_cpu=True, bf16=False)
        if conventions is not None and is_reference_preset(resolve_conventions(conventions)):
            parser.set_defaults_with_config(dtype="float32")  # the parity preset pins float32 on CPU
    parser.set_defaults_with_config(data_format=corpus_format(benchmark, forget_on))
    averaging = conventions_loss_averaging(config_class, conventions)
    if averaging is not None:
        parser.set_defaults_with_config(loss_averaging=averaging)
    reference = reference_recipe_defaults(config_class, conventions, benchmark)
    parser.set_defaults_with_config(**reference)
    where = f"recipe {recipe_path}" if recipe_path else "recipe"
    check_recipe_values(parser, recipe, where)
    # Named by key before TRL sees them: its list of unused fields holds str(value), which a YAML alias
    # bomb expands without end.
    unknown_in_recipe = sorted(set(recipe) - {action.dest for action in parser._actions})
    if unknown_in_recipe:
        raise UnlearningInputError(
            f"{where}: unknown fields for {config_class.__name__}: {', '.join(unknown_in_recipe)}"
        )
    parser.set_defaults_with_config(**recipe)
    source = f"the command line or {where}" if recipe else "the command line"  # numbers checked first
    config, unknown = parse_config_arguments(parser, [*overrides, "--output_dir", str(output_dir)], source)
    if unknown:
        raise UnlearningInputError(
            f"unknown options for {config_class.__name__}: {unknown} (see --help-method)"
        )
    if reference:
        check_reference_requirements(method_stem(config_class) or "", config)
    return config


def make_method_config(
    method: str, output_dir: str | Path, conventions=None, benchmark: str = "amnesia", **fields: Any
):
    """The config of ``method`` (any name or alias of the method table) with ``fields`` over its paper
    defaults, and over what ``conventions`` (a preset name or ``Conventions``) select: the loss averaging,
    and under ``open-unlearning`` the reference's training recipe for ``benchmark`` (docs/tofu.md).

    >>> make_method_config("npo", "out", beta=0.2).beta  # doctest: +SKIP
    0.2
    >>> make_method_config("grad_diff", "out", conventions="open-unlearning").loss_averaging  # doctest: +SKIP
    'token'
    """
    config_class, _ = resolve_method(method).load()
    return build_method_config(
        config_class, dict(fields), [], str(output_dir), conventions=conventions, benchmark=benchmark
    )


def method_stem(config_class) -> str | None:
    """The method-table stem whose config class is ``config_class`` (``None`` for a class outside it)."""
    return next((stem for stem, spec in METHODS.items() if spec.config_class == config_class.__name__), None)


def method_of_config(config) -> MethodSpec:
    """The method-table entry whose config class ``config`` is an instance of."""
    for spec in METHODS.values():
        if spec.config_class == type(config).__name__:
            return spec
    raise UnlearningInputError(f"{type(config).__name__} is not the config of a method in the method table")


# ---------------------------------------------------------------------------------------------------------
# The output folder: checked before any work, trained into a staging folder, swapped in whole at the end


def check_training_output(out: str | Path, model: str, data: str, overwrite: bool) -> None:
    """Refuse, before loading anything, an output that exists (without ``overwrite``) or that is, holds or
    lies inside ``--model`` or ``--data`` (:func:`medunlearn.utils.files.check_output_folder`)."""
    check_output_folder(out, overwrite=overwrite, inputs={"--model": model, "--data": data})


def _keep_failed_checkpoints(staging: Path, out: Path) -> Path | None:
    """Move the Trainer checkpoints a failed run wrote (``checkpoint-*``, at the top of the staging folder or
    in a stage's folder) to ``OUT.checkpoints/``, replacing an earlier failed run's; ``None`` when there are
    none. The user asked for them to survive a failure; the output folder itself stays absent or unchanged."""
    found = sorted(staging.glob("checkpoint-*")) + sorted(staging.glob("*/checkpoint-*"))
    if not found:
        return None
    kept = out.with_name(out.name + ".checkpoints")
    shutil.rmtree(kept, ignore_errors=True)
    for checkpoint in found:
        target = kept / checkpoint.relative_to(staging)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(checkpoint, target)
    return kept


def train_into_staging(out: Path, overwrite: bool, train: Callable[[Path], bool], config=None) -> bool:
    """Run ``train(staging)``, with the trainer ``config`` (if given) pointed at a staging folder beside
    ``out`` meanwhile; when it returns True (the process that writes) the staging folder replaces ``out``
    whole.

    A failure removes the staging folder (a kill leaves it to the next run, which removes it); checkpoints it
    held are kept in ``OUT.checkpoints/`` and a project error's message names that place. A rerun trains from
    the start, so a killed run rerun gives the same weights.
    """
    main = launched_processes().is_main  # launched processes share the folder: one of them cleans it up
    staging = open_staging(out)
    output_dir = None if config is None else config.output_dir
    if config is not None:
        config.output_dir = str(staging)  # checkpoints and the probe's best/ land in the staged folder
    try:
        writer = train(staging)
        if writer:
            commit_staging(staging, out, overwrite=overwrite)
    except BaseException as error:
        kept = _keep_failed_checkpoints(staging, out) if main else None
        if main:
            discard_staging(staging)
        if kept is not None and isinstance(error, MedunlearnError) and str(staging) in str(error):
            error.args = (str(error).replace(str(staging), str(kept)), *error.args[1:])
        raise
    finally:
        if config is not None:
            config.output_dir = output_dir
    return writer


# ---------------------------------------------------------------------------------------------------------
# Unlearning


def run_unlearning(
    config, model_args: ModelArguments, data_args: UnlearningDataArguments, *, overwrite: bool = False
) -> Path | None:
    """Unlearn ``data_args.forget`` from ``model_args``'s model with the method whose config ``config`` is.

    Writes ``config.output_dir``: the weights (safetensors, or the LoRA adapter), the tokenizer,
    ``unlearning_config.json``, ``conventions.json`` and a model card. Returns that folder on the process
    that wrote it. Examples are rendered by ``data_args.conventions``. The folder is written whole or not at
    all; an existing non-empty one is replaced only with ``overwrite``, and never when it is (or holds, or
    lies inside) the model or the data (docs/cli.md, "Output folders").
    """
    out = Path(config.output_dir)
    check_training_output(out, model_args.model_name_or_path, data_args.data, overwrite)
    spec = method_of_config(config)
    conventions = resolve_conventions(data_args.conventions)
    warn_if_conventions_differ(model_args.model_name_or_path, conventions, "--model")
    preset_averaging = conventions_loss_averaging(type(config), conventions)
    if preset_averaging != config.loss_averaging:
        logger.warning(
            "%s.loss_averaging is %r, the %r conventions select %r: the config's value is used",
            type(config).__name__,
            config.loss_averaging,
            conventions.name,
            preset_averaging,
        )
    _, trainer_class = spec.load()
    # The probe scores retained patients, even for a method that trains on no retain set.
    corpus = load_corpus(data_args, trainer_class.uses_retain or config.eval_probe_steps is not None)
    check_corpus_format(corpus, config)
    retain_name = corpus.retain_name
    # A LoRA checkpoint is merged, so that the reference (adapter disabled) is the starting model.
    model, tokenizer = load_model(model_args, merge_adapter=True)
    forget, retain = training_sets(corpus, tokenizer, config, conventions)
    peft_config = model_args.lora_config()
    trainers = []

    def train(staging: Path) -> bool:
        trainer = trainer_class(
            model,
            config,
            forget,
            retain,
            processing_class=tokenizer,
            peft_config=peft_config,
            conventions=conventions,
        )
        trainers.append(trainer)
        bar_without_logs(trainer)
        trainer.train()
        trainer.save_model(str(staging))  # every process takes part (sharded states), the main one writes
        writer = trainer.is_world_process_zero()
        if writer:
            probe = trainer.probe_callback.record() if trainer.probe_callback is not None else None
            _write_unlearned_extras(staging, tokenizer, config, out, probe)
            write_model_conventions(staging, conventions)
            write_model_card(
                staging,
                base_model=model_args.model_name_or_path,
                method=spec,
                config=config,
                data_args=data_args,
                retain=retain_name,
                forget_rows=forget,
                peft=peft_config is not None,
                conventions=conventions,
                probe=probe,
                model_path=out,
            )
            section = corpus_card_section(corpus, trainer.state.global_step)
            replace_card_section(staging, "corpus", section)
        return writer

    writer = train_into_staging(out, overwrite, train, config)
    leave_process_group(trainers[0].accelerator)
    return out if writer else None


def _write_unlearned_extras(staging: Path, tokenizer, config, out: Path, probe: dict | None) -> None:
    """The tokenizer, ``unlearning_config.json`` (its ``output_dir`` the final folder, not the staging one)
    and ``probe.json``, beside the weights."""
    tokenizer.save_pretrained(str(staging))
    # The Trainer pickles its arguments; the output holds only safetensors and JSON (the JSON below replaces
    # it).
    (staging / "training_args.bin").unlink(missing_ok=True)
    saved = json.loads(config.to_json_string())
    saved["output_dir"] = str(out)
    (staging / "unlearning_config.json").write_text(json.dumps(saved, indent=2))
    if probe is not None:
        (staging / "probe.json").write_text(json.dumps(probe, indent=2))


# ---------------------------------------------------------------------------------------------------------
# Fine-tuning


def notes_texts(notes) -> list[str]:
    """Stage 1's documents: each patient's title and note
    (:func:`medunlearn.amnesia.note_sets.note_document`)."""
    return [note_document(title, note) for title, note in zip(notes["title"], notes["note"])]


def qa_conversations(qa, conventions: Conventions | None = None):
    """Prompt-completion conversational rows, the format for which TRL's SFT trains on completions only; the
    prompt carries the conventions' system prompt, so TRL renders exactly what evaluation renders."""
    conventions = resolve_conventions(conventions)
    return qa.map(
        lambda batch: {
            "prompt": [conventions.prompt_messages(q) for q in batch["question"]],
            "completion": [[{"role": "assistant", "content": a}] for a in batch["answer"]],
        },
        batched=True,
        remove_columns=qa.column_names,
    )


def qa_training_rows(qa, tokenizer, conventions: Conventions, max_length: int | None):
    """The QA stage's training rows: conversations (chat template rendering, TRL tokenises them) or, for tag
    rendering, which no chat template expresses, rows tokenised by ``tokenize_prompt_completion``
    (``input_ids`` and completion-only ``labels``, which TRL uses as they are)."""
    import datasets

    if conventions.chat_template:
        return qa_conversations(qa, conventions)
    from medunlearn.unlearn.data import tokenize_prompt_completion

    tokens = tokenize_prompt_completion(
        list(qa["question"]), list(qa["answer"]), tokenizer, max_length or 10**9, conventions
    )
    return datasets.Dataset.from_dict({"input_ids": tokens["input_ids"], "labels": tokens["labels"]})


def default_sft_config(
    model_args: ModelArguments,
    output_dir: str | Path,
    overrides: list[str] = (),
    dtype: str = "auto",
    parity: str | None = None,
):
    """The ``SFTConfig`` both stages start from: ours (no checkpoints, no trackers, logging every 10 steps, no
    gradient checkpointing, the CPU without CUDA, a larger step for ``tiny-llama``, ``bf16`` autocast over
    float32 weights as ``dtype`` resolves: docs/scaling.md, "Precision"; ``parity``: a parity preset's name,
    which keeps CPU runs float32 under ``auto``) < ``overrides``."""
    import torch
    from trl import SFTConfig, TrlParser

    from medunlearn.utils.precision import resolve_precision, training_bf16

    parser = TrlParser(dataclass_types=[SFTConfig])
    defaults: dict[str, Any] = {
        "output_dir": str(output_dir),
        "save_strategy": "no",
        "report_to": "none",
        "logging_steps": 10,
        # TRL defaults the deprecated `gradient_checkpointing` to True, which transformers 5 warns about;
        # unset, transformers resolves `activation_checkpointing` to False, and a user's
        # --gradient_checkpointing or --activation_checkpointing still takes effect.
        "gradient_checkpointing": None,
    }
    if model_args.is_tiny_llama:
        defaults["learning_rate"] = TINY_LLAMA_LEARNING_RATE
    if not torch.cuda.is_available():
        defaults["use_cpu"] = True
    precision = resolve_precision(dtype, "cuda" if torch.cuda.is_available() else "cpu", parity)
    defaults["bf16"] = precision.is_bf16  # TRL's own default is True, whatever the machine
    parser.set_defaults_with_config(**defaults)
    config, unknown = parse_config_arguments(parser, overrides, "the command line")  # numbers checked first
    if unknown:
        raise UnlearningInputError(f"unknown SFTConfig options: {unknown}")
    refuse_set_fields(parser, overrides, STAGE_SETTINGS, "finetune")
    if training_bf16(dtype, config.bf16, config.fp16, precision) != config.bf16:
        raise UnlearningInputError(f"--dtype {dtype} contradicts --bf16 {config.bf16}: drop one of them")
    return config


def _stage_config(template, out: Path, stage: str, epochs: float):
    config = copy.deepcopy(template)
    config.output_dir = str(out / stage)
    config.num_train_epochs = epochs
    if stage == "notes":
        config.dataset_text_field = "text"
    return config


def run_finetune(
    args: FinetuneArguments, model_args: ModelArguments, sft_config=None, *, overwrite: bool = False
) -> Path | None:
    """Both stages; returns ``args.output_dir`` on the process that wrote it (``None`` on the others).

    ``sft_config`` (an ``SFTConfig``) holds the training settings of both stages; its ``output_dir`` and
    ``num_train_epochs`` are replaced per stage (``args.notes_epochs``, ``args.qa_epochs``). ``None`` takes
    :func:`default_sft_config`. With LoRA the adapter is merged at the end (with 4-bit weights only the
    adapter is saved). The folder is written whole or not at all, as ``run_unlearning``'s (``overwrite``);
    a run that would train no step is refused before any work.
    """
    out = Path(args.output_dir)
    check_training_output(out, model_args.model_name_or_path, args.data, overwrite)
    template = sft_config if sft_config is not None else default_sft_config(model_args, out)
    notes = None if args.benchmark == "tofu" else load_notes(args.data)  # TOFU has QA only
    qa = load_split(args.data, "full")
    check_text_fields(qa, ("question", "answer"), split_source(args.data, "full", "train"))
    if len(qa) == 0:
        raise UnlearningInputError(f"{args.data}: config 'full' split 'train' has no rows")
    texts = [] if notes is None else notes_texts(notes)
    check_finetune_trains(args, template, has_notes=bool(texts))
    tokenizer_texts = texts + list(qa["question"]) + list(qa["answer"]) if model_args.is_tiny_llama else None
    model, tokenizer = load_model(model_args, texts=tokenizer_texts)
    conventions = resolve_conventions(args.conventions)
    require_chat_template(tokenizer, conventions)
    qa_rows = qa_training_rows(qa, tokenizer, conventions, template.max_length)
    trainers = []

    def train(staging: Path) -> bool:
        trainer = _train_stages(args, template, staging, model, tokenizer, texts, qa_rows, model_args)
        trainers.append(trainer)
        finished = trainer.accelerator.unwrap_model(trainer.model)
        if hasattr(finished, "merge_and_unload") and not model_args.load_in_4bit:
            finished = finished.merge_and_unload()
        writer = trainer.is_world_process_zero()  # under accelerate launch, one process writes the folder
        if writer:
            _write_finetuned_folder(staging, finished, tokenizer)
            write_model_conventions(staging, conventions)
            rows = {"notes": len(texts), "qa": len(qa_rows)}
            base = model_args.model_name_or_path
            write_finetune_card(
                staging, model_path=out, base_model=base, args=args, training=template, rows=rows
            )
        return writer

    writer = train_into_staging(out, overwrite, train)
    leave_process_group(trainers[0].accelerator)
    return out if writer else None


def _train_stages(args, template, staging: Path, model, tokenizer, texts, qa_rows, model_args):
    """Stage 1 (notes, when asked for and present) then stage 2 (QA) into ``staging``; returns the QA stage's
    trainer."""
    import datasets
    from trl import SFTTrainer

    peft_config = model_args.lora_config()
    if args.notes_epochs > 0 and texts:
        trainer = SFTTrainer(
            model=model,
            args=_stage_config(template, staging, "notes", args.notes_epochs),
            train_dataset=datasets.Dataset.from_dict({"text": texts}),
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        bar_without_logs(trainer)
        trainer.train()
        model = trainer.model
        peft_config = None  # stage 2 continues the same adapter
    trainer = SFTTrainer(
        model=model,
        args=_stage_config(template, staging, "qa", args.qa_epochs),
        train_dataset=qa_rows,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    bar_without_logs(trainer)
    trainer.train()
    return trainer


def _write_finetuned_folder(out: Path, model, tokenizer) -> None:
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    for stage in (
        "notes",
        "qa",
    ):  # the stages' Trainer output folders stay empty unless checkpoints were asked for
        stage_dir = out / stage
        if stage_dir.is_dir() and not any(stage_dir.iterdir()):
            stage_dir.rmdir()
