"""Options several commands share, defined once."""

from __future__ import annotations

import argparse

from medunlearn.models import ModelArguments


class OverridableParser(argparse.ArgumentParser):
    """Keeps unknown ``--field value`` pairs in ``args.overrides`` for a trainer config's own parser
    (TRL's)."""

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        namespace.overrides = extras
        return namespace


def add_model_arguments(parser: argparse.ArgumentParser, model_help: str) -> None:
    """``--model`` and the adaptation flags of :class:`~medunlearn.models.ModelArguments`."""
    defaults = ModelArguments("")
    parser.add_argument("--model", help=model_help)
    parser.add_argument("--lora", action="store_true", help="train a LoRA adapter instead of all weights")
    parser.add_argument(
        "--lora-r", type=int, default=defaults.lora_r, help=f"LoRA rank (default {defaults.lora_r})"
    )
    parser.add_argument(
        "--lora-alpha",
        type=int,
        default=defaults.lora_alpha,
        help=f"LoRA alpha (default {defaults.lora_alpha})",
    )
    parser.add_argument(
        "--load-in-4bit",
        action="store_true",
        help="QLoRA: load the model in 4-bit NF4 and train a LoRA adapter (bitsandbytes: the qlora extra)",
    )


def model_arguments(args: argparse.Namespace) -> ModelArguments:
    return ModelArguments(
        args.model,
        lora=args.lora,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
        load_in_4bit=args.load_in_4bit,
        tiny_vocab_size=getattr(args, "tiny_vocab_size", ModelArguments("").tiny_vocab_size),
    )


def missing_options(args: argparse.Namespace, *flags: str) -> list[str]:
    """The ``--flags`` among ``flags`` that were not given."""
    return [flag for flag in flags if not getattr(args, flag.lstrip("-").replace("-", "_"))]


PRESET_HELP = (
    "conventions preset, one per run for finetune, unlearn and evaluate alike: system prompt, chat template "
    "or tags, EOS handling, stop strings, generation length (open-unlearning: the reference's, system prompt "
    "'You are a helpful assistant.', 200 new tokens as OpenUnlearning's configs/generation/default.yaml at "
    "d3d7cf9, loss averaging of each method as the reference)"
)


def add_conventions_arguments(parser: argparse.ArgumentParser, default: str | None = "medunlearn") -> None:
    """``--preset`` and ``--system-prompt``: the run's :class:`~medunlearn.chat.Conventions`."""
    from medunlearn.chat import PRESETS

    where = f"default {default}" if default else "default: the model's recorded conventions, else medunlearn"
    parser.add_argument("--preset", default=default, choices=sorted(PRESETS), help=f"{PRESET_HELP} ({where})")
    parser.add_argument("--system-prompt", help="override the preset's system prompt")


def conventions_from_args(args: argparse.Namespace, model=None):
    """The preset of ``--preset`` (unset: ``model``'s recorded conventions, else ``medunlearn``) with
    ``--system-prompt`` over it."""
    from medunlearn.chat import preset, read_model_conventions

    if args.preset is not None:
        conventions = preset(args.preset)
    else:
        conventions = read_model_conventions(model) or preset("medunlearn")
    return conventions.with_options(system_prompt=args.system_prompt)
