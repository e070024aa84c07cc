"""The attack table: the one place that maps an attack's name to what it runs, its description and the data
it needs (docs/attacks.md).

Each attack is an :class:`AttackSpec`: ``run(target)`` attacks one unlearned model (a :class:`Target`: the
model, its examples and the ``unlearned`` evaluation every recovered share compares against) and returns its
rows and, for the attacks that have one, its section of ``attacks.json``; ``check_data`` (when set) fails on
data the attack cannot use, before the attack folder exists. The table's order is the order attacks run in
and rows are listed in, whatever the order of ``--attacks``. A new attack = one module, one entry here, one
test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from medunlearn.attacks.quantization import quantization_attack
from medunlearn.attacks.reference import Reference, holdout_probe_row, per_example, role_per_example
from medunlearn.attacks.relearning import AttackInputError, relearning_attack, relearning_sets

if TYPE_CHECKING:
    import pandas as pd

    from medunlearn.attacks.run import AttackArguments

# The attacks' own modules, pandas and the evaluation modules (which import it) are imported by the functions
# that use them: `medunlearn attack --help` reads ATTACK_DESCRIPTIONS and must not pay for them.

AttackName = Literal["relearn", "quantize", "paraphrase", "holdout", "probe", "membership"]


@dataclass
class Target:
    """One unlearned model under attack, and what every attack reads about it."""

    model_path: str
    name: str  # the method's display name
    examples: pd.DataFrame  # the populations (validate_attack_arguments)
    args: AttackArguments
    eval_root: Path  # <method>/evaluations: one evaluation folder per attack variant
    reference: Reference  # the before and full-precision unlearned similarities
    unlearned: pd.DataFrame  # the full-precision model's per-example table (the ``unlearned`` evaluation)
    cache: dict = field(default_factory=dict)  # results about the shared models, kept between methods
    log: Callable[[str], None] = lambda line: None

    @property
    def reference_dir(self) -> Path:
        """The ``unlearned`` evaluation: the full-precision model, with the before (and retain) models."""
        return self.eval_root / "unlearned"


@dataclass
class AttackOutcome:
    rows: list[dict] = field(default_factory=list)
    section: dict | None = None  # this attack's entry of the method's ``sections`` (None: it has none)


@dataclass(frozen=True)
class AttackSpec:
    name: AttackName
    description: str  # one line: ``medunlearn attack --help`` and attacks.json's ``descriptions``
    run: Callable[[Target], AttackOutcome]
    scores_similarity: bool  # its rows are recovered shares of the answers' similarity
    check_data: Callable[[pd.DataFrame, AttackArguments], None] | None = None


def retained_mu(table: pd.DataFrame) -> float | None:
    """MU of the retained populations of a per-example table (None without any)."""
    from medunlearn.evaluation.populations import RETAIN_POPULATIONS
    from medunlearn.metrics.model_utility import model_utility

    retained = table[table["population"].isin(RETAIN_POPULATIONS)]
    if retained.empty:
        return None
    return model_utility(retained["similarity"].to_numpy(), retained["qa_type"].tolist())["model_utility"]


def forget_afe_and_mu(summary: dict, table: pd.DataFrame) -> tuple[float | None, float | None]:
    """AFE of the forget patients' seen QA (from the evaluation summary) and MU of the retained patients."""
    from medunlearn.evaluation.populations import FORGET_SEEN

    afe = summary.get("populations", {}).get(FORGET_SEEN, {}).get("all", {}).get("answer_forgetting")
    return afe, retained_mu(table)


# ---------------------------------------------------------------------------------------------------------
# The attacks (each: one unlearned model in, rows and a section out)


def _relearn(target: Target) -> AttackOutcome:
    args, config = target.args, target.args.relearn
    train_rows, scored = relearning_sets(target.examples, config, args.data, args.forget_config)
    target.log(
        f"{target.name}: relearning on {config.data} ({len(train_rows)} QA), steps {list(config.steps)}"
    )
    results = relearning_attack(
        target.model_path,
        train_rows,
        scored,
        target.eval_root,
        config,
        runner_config=args.runner,
        name=target.name,
        progress=args.runner.progress,
    )
    rows = []
    for result in results:
        variant = f"k={result['steps']}"
        rows += target.reference.rows("relearn", variant, per_example(result["eval_dir"]), result["eval_dir"])
    section = {
        **asdict(config),
        "relearned_qa": len(train_rows),
        "relearned_qa_ids": train_rows["qa_id"].astype(str).tolist(),
        "scored_examples": len(scored),
    }
    return AttackOutcome(rows, section)


def _check_relearn_data(examples: pd.DataFrame, args: AttackArguments) -> None:
    relearning_sets(examples, args.relearn, args.data, args.forget_config)


def _quantize(target: Target) -> AttackOutcome:
    args = target.args
    target.log(f"{target.name}: quantized evaluation ({', '.join(args.quantizations)})")
    outcome, schemes = AttackOutcome(), {}
    for result in quantization_attack(
        target.model_path,
        target.examples,
        target.eval_root,
        args.quantizations,
        runner_config=args.runner,
        name=target.name,
    ):
        table = per_example(result["eval_dir"])
        outcome.rows += target.reference.rows("quantize", result["scheme"], table, result["eval_dir"])
        schemes[result["scheme"]] = {"mu": retained_mu(table)}
    outcome.section = schemes or None
    return outcome


def _paraphrase(target: Target) -> AttackOutcome:
    from medunlearn.attacks.probing import paraphrased_examples, template_paraphrases
    from medunlearn.evaluation.pipeline import evaluate_on_examples
    from medunlearn.evaluation.populations import FORGET_SEEN

    target.log(f"{target.name}: paraphrased forget questions")
    examples, args = target.examples, target.args
    seen = examples[examples["population"] == FORGET_SEEN]
    paraphrased = paraphrased_examples(
        examples, template_paraphrases(seen["question"].tolist(), seed=args.seed)
    )
    eval_dir = target.eval_root / "paraphrase"
    evaluate_on_examples(
        target.model_path,
        paraphrased,
        eval_dir,
        name=f"{target.name} paraphrase",
        runner_config=args.runner,
        overwrite=True,
    )
    table = per_example(eval_dir)
    return AttackOutcome(
        target.reference.rows("paraphrase", "template", table, eval_dir, "original_example_id")
    )


def _holdout(target: Target) -> AttackOutcome:
    row = holdout_probe_row(target.reference, target.examples, target.reference_dir)
    return AttackOutcome([] if row is None else [row])


def _probe(target: Target) -> AttackOutcome:
    from medunlearn.attacks.hidden_probe import probe_section

    target.log(f"{target.name}: hidden-state probe of the disease category")
    args = target.args
    section = probe_section(
        target.model_path,
        args.before,
        target.examples,
        args.seed,
        target.cache,
        retain_path=args.retain_model,
    )
    return AttackOutcome(section=section)


def _membership(target: Target) -> AttackOutcome:
    """The membership section from the ``unlearned`` evaluation's stored scores: the forget patients' seen vs
    holdout QA under the unlearned, before and (when given) retain models; nothing is run again."""
    from medunlearn.attacks.membership import membership_section
    from medunlearn.evaluation.populations import FORGET_POPULATIONS

    target.log(f"{target.name}: membership attacks")
    unlearned = target.unlearned
    tables = {
        "unlearned": unlearned[unlearned["population"].isin(FORGET_POPULATIONS)],
        "before": role_per_example(target.reference_dir, "before"),
    }
    if target.args.retain_model:
        tables["retain"] = role_per_example(target.reference_dir, "retain")
    return AttackOutcome(section=membership_section(tables))


def _check_membership_data(examples: pd.DataFrame, args: AttackArguments) -> None:
    from medunlearn.attacks.membership import member_examples, nonmember_examples

    member_examples(examples)
    nonmember_examples(examples)


ATTACK_TABLE: dict[AttackName, AttackSpec] = {
    spec.name: spec
    for spec in [
        AttackSpec(
            "relearn",
            "fine-tune k steps on related data, re-ask the forget questions not trained on",
            _relearn,
            scores_similarity=True,
            check_data=_check_relearn_data,
        ),
        AttackSpec(
            "quantize",
            "load the weights in 8-bit / 4-bit NF4 and re-ask the forget questions",
            _quantize,
            scores_similarity=True,
        ),
        AttackSpec(
            "paraphrase",
            "ask the forget patients' seen questions reworded (template paraphrases)",
            _paraphrase,
            scores_similarity=True,
        ),
        AttackSpec(
            "holdout",
            "the forget patients' unseen questions, scored as a probe",
            _holdout,
            scores_similarity=True,
        ),
        AttackSpec(
            "probe",
            "a linear probe of the disease category on hidden states of the questions (no answers), "
            "before vs after unlearning, beside a baseline that never saw the patients",
            _probe,
            scores_similarity=False,
        ),
        AttackSpec(
            "membership",
            "AUC of telling the forget patients' seen QA from their holdout QA (loss, zlib, min-k%, "
            "++), beside the before and retain models' AUC",
            _membership,
            scores_similarity=False,
            check_data=_check_membership_data,
        ),
    ]
}
ATTACKS: tuple[AttackName, ...] = tuple(ATTACK_TABLE)
ATTACK_DESCRIPTIONS = {name: spec.description for name, spec in ATTACK_TABLE.items()}
SIMILARITY_ATTACKS = tuple(name for name, spec in ATTACK_TABLE.items() if spec.scores_similarity)


def selected_attacks(names: tuple[str, ...] | list[str]) -> list[AttackSpec]:
    """The table's entries for ``names``, in the table's order; an error naming ``--attacks`` for an unknown
    name or none."""
    unknown = [name for name in names if name not in ATTACK_TABLE]
    if unknown or not names:
        raise AttackInputError(
            f"unknown attack(s) {', '.join(unknown) or '(none given)'} in --attacks; choose from "
            f"{', '.join(ATTACKS)}"
        )
    return [spec for name, spec in ATTACK_TABLE.items() if name in names]


__all__ = [
    "ATTACKS",
    "ATTACK_DESCRIPTIONS",
    "ATTACK_TABLE",
    "SIMILARITY_ATTACKS",
    "AttackName",
    "AttackOutcome",
    "AttackSpec",
    "Target",
    "forget_afe_and_mu",
    "retained_mu",
    "selected_attacks",
]
