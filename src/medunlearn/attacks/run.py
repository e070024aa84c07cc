"""``run_attacks``: every attack on one or more unlearned models, into one attack folder (docs/attacks.md).

``medunlearn attack`` only parses its options into :class:`AttackArguments` and calls :func:`run_attacks`; the
study runner and notebooks call it the same way::

    from medunlearn.attacks import AttackArguments, run_attacks

    run_attacks(AttackArguments(["ckpt/grad_diff"], "ckpt/finetuned", "amnesia", "forget_10", "attacks/gd"))

An attack folder::

    attacks.json               every attack row, the probe and membership sections, one summary per method
    attacks.md                 the Markdown table: attack rows, then AFE / MU / worst-case recovery per method
    attacks.png                AFE against worst-case recovery, one point per method
    <method>/model_card.md     the model-card section of each method
    <method>/evaluations/      evaluation folders (docs/evaluation.md): unlearned (the full-precision
                               model, with the before and retain models), relearn-k{k},
                               quantize-{scheme}, paraphrase (membership reads unlearned:
                               the forget patients' seen vs holdout QA)
    shared/                    outputs of the models every method shares (the before and retain models),
                               run once and reused by the next method

Everything is checked before anything is written: a missing model, before model, data folder or forget config
is an error naming it, and the folder is not created.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from medunlearn.attacks.quantization import QUANTIZATIONS
from medunlearn.attacks.reference import Reference, holdout_probe_row, per_example, role_per_example
from medunlearn.attacks.relearning import AttackInputError, RelearnConfig
from medunlearn.attacks.summary import (
    RECOVERED_SHARE_FORMULA,
    markdown_table,
    model_card_section,
    public_rows,
    robustness_summary,
    write_robustness_plot,
)
from medunlearn.attacks.table import (
    ATTACK_DESCRIPTIONS,
    ATTACKS,
    SIMILARITY_ATTACKS,
    AttackName,
    Target,
    forget_afe_and_mu,
    selected_attacks,
)
from medunlearn.config_names import folder_configs, forget_configs
from medunlearn.errors import MissingInputError
from medunlearn.evaluation.runner import RunnerConfig
from medunlearn.metrics.bootstrap import BootstrapConfig
from medunlearn.models import check_model_name
from medunlearn.utils.files import check_output_folder, finite_or_none, relocate_records, staged_folder

if TYPE_CHECKING:
    import pandas as pd

# pandas and the evaluation pipeline are imported by the functions that run attacks: `medunlearn attack
# --help` reads this module's AttackArguments and must not pay for them.


@dataclass
class AttackArguments:
    """What to attack and how.

    Parameters:
        models (`list[str]`):
            Unlearned model folders (full weights or a LoRA adapter); each is one method of the summary.
        before (`str`):
            The model before unlearning (the fine-tuned model): the reference of every recovered share.
        data (`str`):
            The AMNESIA folder the models were unlearned on.
        forget_config (`str`):
            The forget config that was unlearned (`forget_10`, `disease_cancer_forget_10`).
        out_dir (`str`):
            The attack folder to write (must not exist unless `overwrite`).
        retain_model (`str` or `None`, *optional*, defaults to `None`):
            A model never trained on the forget patients: privleak and the reference membership attack.
        attacks (`tuple[str, ...]`, *optional*, defaults to every attack of `ATTACKS`):
            Which attacks to run.
        relearn (`RelearnConfig`, *optional*):
            Steps, data, share and learning rate of the relearning attack.
        quantizations (`tuple[str, ...]`, *optional*, defaults to `("8bit", "nf4")`):
            The quantization schemes.
        names (`list[str]` or `None`, *optional*, defaults to `None`):
            One display name per model (default: the folder names).
        seed (`int`, *optional*, defaults to `0`):
            Seeds the retained-patient samples, the paraphrases and the probe; the relearning attack has
            its own `relearn.seed` (`medunlearn attack --seed` sets both).
        max_retain_patients (`int` or `None`, *optional*, defaults to `100`):
            Seeded sample of retained patients per population.
        runner (`RunnerConfig`, *optional*):
            Batch size, generation length, progress bars of every evaluation.
        overwrite (`bool`, *optional*, defaults to `False`):
            Replace an existing `out_dir`.
        bootstrap (`BootstrapConfig`, *optional*):
            Resamples, level and seed of the patient bootstrap of every recovered share and of the worst case
            (docs/attacks.md, "Intervals and the worst case").
        write_card (`bool`, *optional*, defaults to `False`):
            Also put each method's robustness section into its model's own card (`README.md` in the model
            folder), replacing the section an earlier run wrote (`medunlearn attack --write-card`; the study's
            attack stage sets it). Off by default: an attack never changes its input unless asked.
    """

    models: list[str]
    before: str | None
    data: str
    forget_config: str
    out_dir: str
    retain_model: str | None = None
    attacks: tuple[AttackName, ...] = ATTACKS
    relearn: RelearnConfig = field(default_factory=RelearnConfig)
    quantizations: tuple[str, ...] = tuple(QUANTIZATIONS)
    names: list[str] | None = None
    seed: int = 0
    max_retain_patients: int | None = 100
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    overwrite: bool = False
    write_card: bool = False
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)

    def __post_init__(self):
        if isinstance(self.models, (str, Path)):
            self.models = [str(self.models)]
        self.attacks = tuple(self.attacks)


def _require_model(path: str | None, flag: str, purpose: str) -> None:
    if not path:
        raise AttackInputError(f"{flag} is required: {purpose}")
    check_model_name(str(path), flag)
    if not Path(path).exists():  # online a Hub id passes check_model_name; attacks need the folder
        raise MissingInputError(f"{flag} {path}: no such model folder")


def method_names(args: AttackArguments) -> list[str]:
    """The display name of each model: ``args.names`` or the folder names, made unique."""
    names = list(args.names) if args.names else [Path(m).name for m in args.models]
    if len(names) != len(args.models):
        raise AttackInputError(f"{len(names)} --name value(s) for {len(args.models)} --model value(s)")
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return unique


def validate_attack_arguments(args: AttackArguments) -> pd.DataFrame:
    """Check everything an attack run needs, writing nothing; returns the populations table.

    Raises an error naming the option at fault: no ``--model``, no or a missing ``--before`` model, a missing
    ``--retain-model``, an unknown attack or quantization, a missing data folder or forget config, an
    existing ``--out`` without ``--overwrite``.
    """
    from medunlearn.evaluation.populations import PopulationConfig, load_populations

    attacks = selected_attacks(args.attacks)
    bad_schemes = [s for s in args.quantizations if s not in QUANTIZATIONS]
    if bad_schemes:
        raise AttackInputError(
            f"unknown quantization(s) {', '.join(bad_schemes)}; choose from {', '.join(QUANTIZATIONS)}"
        )
    if not args.models:
        raise AttackInputError("--model is required: the unlearned model(s) to attack")
    for model in args.models:
        _require_model(model, "--model", "the unlearned model to attack")
    _require_model(
        args.before,
        "--before",
        "every recovered share compares against the model before unlearning (the fine-tuned model)",
    )
    if args.retain_model:
        _require_model(args.retain_model, "--retain-model", "")
    method_names(args)
    check_output_folder(
        args.out_dir,
        overwrite=args.overwrite,
        inputs={"--model": list(args.models), "--before": args.before, "--data": args.data}
        | {"--retain-model": args.retain_model},
    )
    if not Path(args.data).is_dir():
        raise MissingInputError(f"--data {args.data}: no such AMNESIA folder")
    configs = folder_configs(args.data)
    if configs and args.forget_config not in configs:
        raise AttackInputError(
            f"--forget-config {args.forget_config}: {args.data} has no such config (its forget configs: "
            f"{', '.join(forget_configs(configs)) or 'none'})"
        )
    # Reads the forget config, its retain config and the notes: a missing config fails here, named.
    examples = load_populations(
        args.data,
        args.forget_config,
        PopulationConfig(max_retain_patients=args.max_retain_patients, seed=args.seed),
    )
    # The attacks' own data (read only): too few forget QA to relearn a share of, no retained patient of the
    # forget diseases, no member or non-member example fail here, before the folder exists.
    for attack in attacks:
        if attack.check_data is not None:
            attack.check_data(examples, args)
    return examples


# ---------------------------------------------------------------------------------------------------------
# The attacks of one model


def attack_model(
    model_path: str,
    name: str,
    examples: pd.DataFrame,
    args: AttackArguments,
    method_dir: Path,
    log: Callable[[str], None] = lambda line: None,
    shared_dir: Path | None = None,
    cache: dict | None = None,
) -> dict:
    """Every attack of ``args.attacks`` on one unlearned model, in the attack table's order; returns its
    rows, sections and summary.

    ``shared_dir`` holds the outputs of the models every method shares (before, retain), run once;
    ``cache`` keeps results about them between methods."""
    from medunlearn.evaluation.pipeline import evaluate_unlearning

    shared_dir = shared_dir or method_dir / "shared"
    eval_root = method_dir / "evaluations"
    reference_dir = eval_root / "unlearned"
    log(f"{name}: evaluating the full-precision unlearned model (and the before model)")
    summary = evaluate_unlearning(
        model_path,
        args.data,
        args.forget_config,
        reference_dir,
        before=args.before,
        retain_model=args.retain_model,
        before_outputs=shared_dir / "before",
        examples=examples,
        name=name,
        runner_config=args.runner,
        overwrite=True,
    )
    unlearned_table = per_example(reference_dir)
    reference = Reference(
        before=role_per_example(reference_dir, "before").set_index("example_id")["similarity"],
        unlearned=unlearned_table.set_index("example_id")["similarity"],
        patients=unlearned_table.set_index("example_id")["patient_id"].astype(str),
    )
    target = Target(
        model_path,
        name,
        examples,
        args,
        eval_root,
        reference,
        unlearned_table,
        {} if cache is None else cache,
        log,
    )
    rows: list[dict] = []
    sections: dict = {}
    for attack in selected_attacks(args.attacks):
        outcome = attack.run(target)
        rows += outcome.rows
        if outcome.section is not None:
            sections[attack.name] = outcome.section
    for row in rows:
        row["method"] = name
    afe, mu = forget_afe_and_mu(summary, unlearned_table)
    robustness = robustness_summary(name, rows, afe, mu, args.bootstrap)  # adds each row's interval
    rows = public_rows(rows)
    card = model_card_section(robustness, rows)
    (method_dir / "model_card.md").write_text(card)
    return {"method": name, "model": model_path, "rows": rows, "sections": sections, "summary": robustness}


def run_attacks(args: AttackArguments, log: Callable[[str], None] = lambda line: None) -> dict:
    """Every attack on every model of ``args``; writes the attack folder (module docstring) and returns
    the content of ``attacks.json``."""
    examples = validate_attack_arguments(args)
    if args.write_card:
        for model in args.models:
            if not os.access(model, os.W_OK):
                raise AttackInputError(f"--write-card: {model} is not writable (its README.md is the card)")
    # Built beside --out and swapped in whole when done: a failed run leaves an existing --out as it was.
    with staged_folder(args.out_dir, overwrite=args.overwrite) as out:
        payload = _attack_into(out, args, examples, log)
        relocate_records(out, args.out_dir, out.rglob("run.json"))  # the evaluations name their outputs
    out = Path(args.out_dir)
    if args.write_card:  # last: a failed run leaves every card as it was
        from medunlearn.unlearn.card import replace_card_section

        for method in payload["methods"]:
            card = (out / method["method"] / "model_card.md").read_text()
            payload.setdefault("cards", []).append(
                str(replace_card_section(method["model"], "robustness", card))
            )
    return payload


def _attack_into(out: Path, args: AttackArguments, examples, log) -> dict:
    """:func:`run_attacks`' work, written into ``out`` (the staging folder of ``--out``); returns the
    payload of ``attacks.json``."""
    methods, cache = [], {}
    for model_path, name in zip(args.models, method_names(args)):
        methods.append(attack_model(model_path, name, examples, args, out / name, log, out / "shared", cache))
    rows = [row for method in methods for row in method["rows"]]
    summaries = [method["summary"] for method in methods]
    (out / "attacks.md").write_text(
        f"# Attacks on {args.forget_config}\n\nBefore model: {args.before}\n\n"
        + markdown_table(rows, summaries)
        + "".join(f"\n{line}" for line in section_lines(methods))
        + "\n"
    )
    plot = write_robustness_plot(summaries, out / "attacks.png")
    payload = {
        "forget_config": args.forget_config,
        "data": str(args.data),
        "before": args.before,
        "retain_model": args.retain_model,
        "attacks": list(args.attacks),
        "descriptions": {a: ATTACK_DESCRIPTIONS[a] for a in args.attacks},
        "seed": args.seed,
        "rows": rows,
        "summaries": summaries,
        "methods": [{k: m[k] for k in ("method", "model", "sections")} for m in methods],
        "plot": None if plot is None else plot.name,
        "formula": RECOVERED_SHARE_FORMULA,
        "bootstrap": {**asdict(args.bootstrap), "clusters": "patients"},
    }
    (out / "attacks.json").write_text(json.dumps(finite_or_none(payload), indent=2, default=str))
    return payload


def _share_text(value) -> str:
    return "undefined" if value is None else f"{value:.2f}"


def probe_line(method: str, probe: dict) -> str:
    """The probe section in one line: accuracies of the before, unlearned (and retain) models, the
    text-only baseline, and the shares above chance and above the baseline."""
    if "skipped" in probe:
        return f"- {method}: disease probe skipped ({probe['skipped']})"
    retain = f", retain model {probe['retain']['accuracy']:.3f}" if "retain" in probe else ""
    return (
        f"- {method}: disease probe accuracy before {probe['before']['accuracy']:.3f}, after "
        f"{probe['unlearned']['accuracy']:.3f}{retain}; text-only baseline "
        f"{probe['text_only']['accuracy']:.3f}; "
        f"chance {probe['unlearned']['chance']:.3f}. Read against {probe['baseline']}: retained share above "
        f"baseline {_share_text(probe['retained_above_baseline_share'])} (above chance "
        f"{_share_text(probe['retained_above_chance_share'])}); {probe['scope']}, n={probe['n']}, "
        f"{probe['inputs']}"
    )


def membership_line(method: str, membership: dict) -> str:
    """The membership section in one line: its two populations, the AUC per score of the before →
    unlearned models, the retain model's baseline and the reference attack."""
    after, before = membership["unlearned"]["auc"], membership["before"]["auc"]
    text = ", ".join(f"{k} {before[k]:.3f}→{after[k]:.3f}" for k in after)
    if "retain" in membership:
        retain = membership["retain"]["auc"]
        text += "; retain model (never saw them) " + ", ".join(f"{k} {retain[k]:.3f}" for k in retain)
    reference = membership["unlearned"].get("reference_auc")
    if reference is not None:
        text += f"; reference attack (retain model) {reference:.3f}"
    return (
        f"- {method}: membership AUC, members = {membership['members']}, non-members = "
        f"{membership['nonmembers']} ({membership['n_members']} vs {membership['n_nonmembers']} QA of "
        f"{membership['patients']} patients; AUC null sd {membership['null_sd']:.3f}), before→after "
        f"unlearning: {text}"
    )


def section_lines(methods: Sequence[dict]) -> list[str]:
    """One Markdown bullet per probe and membership section of each method."""
    lines = []
    for method in methods:
        probe = method["sections"].get("probe")
        if probe:
            lines.append(probe_line(method["method"], probe))
        membership = method["sections"].get("membership")
        if membership:
            lines.append(membership_line(method["method"], membership))
    return lines


__all__ = [
    "ATTACKS",
    "ATTACK_DESCRIPTIONS",
    "SIMILARITY_ATTACKS",
    "AttackArguments",
    "Reference",
    "holdout_probe_row",
    "run_attacks",
    "section_lines",
    "validate_attack_arguments",
]
