"""What every attack row compares against: the before and full-precision unlearned models' per-example
similarities on the same questions, read from the attack's ``unlearned`` evaluation folder (docs/attacks.md,
"Recovered share").

Each row also carries its per-example similarities and patients (``_sample``, a
:class:`~medunlearn.attacks.recovery.ShareSample`, kept out of attacks.json), so that the robustness summary
can resample patients for every row at once (:mod:`medunlearn.attacks.recovery`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from medunlearn.attacks.recovery import ShareSample
from medunlearn.attacks.summary import normalised_recovered_share, recovered_share
from medunlearn.utils.user_files import read_json, read_parquet_frame

if TYPE_CHECKING:
    import pandas as pd

# pandas and the evaluation modules (which import it) are imported by the functions that use them:
# `medunlearn attack --help` imports this module through the attack table and must not pay for them.

__all__ = ["Reference", "holdout_probe_row", "per_example", "role_per_example"]


def per_example(eval_dir: str | Path) -> pd.DataFrame:
    """The evaluated model's ``per_example.parquet`` of an evaluation folder."""
    return read_parquet_frame(Path(eval_dir) / "per_example.parquet")


def role_per_example(eval_dir: str | Path, role: str = "before") -> pd.DataFrame:
    """The per-example metrics of another role of an evaluation folder (``before``, ``retain``: forget
    populations), from its stored outputs, exactly as ``score_evaluation`` computes them (it stores only the
    model's)."""
    from medunlearn.evaluation.populations import FORGET_POPULATIONS
    from medunlearn.evaluation.runner import read_answer_variants, read_outputs
    from medunlearn.evaluation.scoring import per_example_metrics

    eval_dir = Path(eval_dir)
    run_info = read_json(eval_dir / "run.json", expect=dict)
    folder = Path(run_info.get("outputs", {}).get(role, eval_dir / "outputs" / role))
    examples = read_parquet_frame(eval_dir / "examples.parquet")
    examples = examples[examples["population"].isin(FORGET_POPULATIONS)].reset_index(drop=True)
    outputs = read_outputs(folder, examples["example_id"])
    use_embedding = bool(run_info.get("similarity", {}).get("embedding", False))
    return per_example_metrics(examples, outputs, read_answer_variants(folder), use_embedding=use_embedding)


def _mean(values) -> float | None:
    import pandas as pd

    value = float(pd.Series(values, dtype="float64").mean()) if len(values) else math.nan
    return value if math.isfinite(value) else None


@dataclass
class Reference:
    """Per-example similarity of the before model and of the full-precision unlearned model, by example id;
    ``patients`` (example id -> patient id), when given, lets each row carry its sample for the bootstrap."""

    before: pd.Series
    unlearned: pd.Series
    patients: pd.Series | None = None

    def _patients_of(self, part: pd.DataFrame, ids: pd.Series):
        if "patient_id" in part:
            return part["patient_id"].astype(str).to_numpy()
        return None if self.patients is None else self.patients.loc[ids].astype(str).to_numpy()

    def rows(self, attack: str, variant: str, attacked: pd.DataFrame, eval_dir=None, id_column="example_id"):
        """One row per forget population of ``attacked`` (a per-example table): before, unlearned and attacked
        similarity on the same questions, and the recovered share."""
        from medunlearn.evaluation.populations import FORGET_POPULATIONS

        rows = []
        for population in FORGET_POPULATIONS:
            part = attacked[attacked["population"] == population]
            if part.empty:
                continue
            ids = part[id_column].astype(str)
            before, unlearned = self.before.loc[ids], self.unlearned.loc[ids]
            value = _mean(part["similarity"])
            row = {
                "attack": attack,
                "variant": variant,
                "population": population,
                "n": len(part),
                "before": _mean(before),
                "unlearned": _mean(unlearned),
                "attacked": value,
                "recovered_share": recovered_share(_mean(before), _mean(unlearned), value),
                "eval_dir": None if eval_dir is None else str(eval_dir),
            }
            patients = self._patients_of(part, ids)
            if patients is not None:
                row["_sample"] = ShareSample.plain(
                    patients, before.to_numpy(), unlearned.to_numpy(), part["similarity"].to_numpy()
                )
            rows.append(row)
        return rows


def holdout_probe_row(reference: Reference, examples: pd.DataFrame, eval_dir) -> dict | None:
    """The forget patients' holdout QA as a probe: their level of forgetting against the seen QA's, each
    normalised by the before model (:func:`~medunlearn.attacks.summary.normalised_recovered_share`).

    ``unlearned`` is the seen QA's similarity ratio (after / before) put on the holdout scale, so that the row
    reads like the others: recovered share = (attacked − unlearned) / (before − unlearned)."""
    from medunlearn.evaluation.populations import FORGET_HOLDOUT, FORGET_POPULATIONS, FORGET_SEEN

    rows = {p: examples[examples["population"] == p] for p in FORGET_POPULATIONS}
    ids = {p: rows[p]["example_id"].astype(str) for p in FORGET_POPULATIONS}
    if ids[FORGET_HOLDOUT].empty or ids[FORGET_SEEN].empty:
        return None
    seen = reference.before.loc[ids[FORGET_SEEN]], reference.unlearned.loc[ids[FORGET_SEEN]]
    holdout = reference.before.loc[ids[FORGET_HOLDOUT]], reference.unlearned.loc[ids[FORGET_HOLDOUT]]
    seen_before, seen_after = _mean(seen[0]), _mean(seen[1])
    holdout_before, holdout_after = _mean(holdout[0]), _mean(holdout[1])
    share = normalised_recovered_share(holdout_after, holdout_before, seen_after, seen_before)
    mapped = None
    if None not in (seen_before, seen_after, holdout_before) and seen_before:
        mapped = seen_after / seen_before * holdout_before
    row = {
        "attack": "holdout",
        "variant": "unseen questions",
        "population": FORGET_HOLDOUT,
        "n": len(ids[FORGET_HOLDOUT]),
        "before": holdout_before,
        "unlearned": mapped,
        "attacked": holdout_after,
        "recovered_share": share,
        "eval_dir": str(eval_dir),
        "seen_before": seen_before,
        "seen_unlearned": seen_after,
    }
    if "patient_id" in examples:
        row["_sample"] = ShareSample.normalised(
            rows[FORGET_SEEN]["patient_id"].astype(str).to_numpy(),
            seen[0].to_numpy(),
            seen[1].to_numpy(),
            rows[FORGET_HOLDOUT]["patient_id"].astype(str).to_numpy(),
            holdout[0].to_numpy(),
            holdout[1].to_numpy(),
        )
    return row
