"""Bench: why the heuristic silver labeller is unsure, and what share of mined pairs gets a usable label.

Reads a mining folder written by ``medunlearn biodivergence mine`` / ``build --abstracts`` (``pairs.jsonl``
and ``labels.jsonl``, made by the code that mined it: the *before*), recomputes the divergence signals from
the claim texts and the heuristic labels with the current code (the *after*) on the same pairs, and prints:

1. how often each signal fires on the pairs (before and after), and the claims' stances (after);
2. why the before labels are unsure: the label rule's branch of every label below the 0.45 threshold;
3. the share of pairs with a usable label (heuristic confidence >= 0.45), before and after, by class;
4. with ``--samples FILE``: ``--n`` random newly labelled pairs and ``--n`` random previously labelled ones,
   as a markdown list to check by hand (seeded).

The pairs are the same on both sides (the cap per domain ranks by the signals, so a fresh build may keep a
few other pairs). Nothing is asserted and nothing is timed.

    python bench/bench_biodivergence_labels.py MINING_DIR [--samples hand_check.md --n 30 --seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from medunlearn.biodivergence.mining.heuristic import _hedged, heuristic_labels
from medunlearn.biodivergence.mining.pipeline import read_jsonl
from medunlearn.biodivergence.mining.signals import divergence_signals
from medunlearn.biodivergence.schema import MIN_CONFIDENCE

SIGNALS = ("polarity_reversal", "negation_mismatch", "context_cues", "entity_mismatch")


def firing(pairs: pd.DataFrame) -> dict[str, float]:
    """Share of pairs on which each signal fires."""
    e = pairs["entity_mismatch"].astype(float)
    hedge = _hedged(pairs["text_a"].astype(str)) | _hedged(pairs["text_b"].astype(str))
    rows = {
        "polarity reversal": (pairs["polarity_reversal"].astype(int) > 0).mean(),
        "negation on one side only": (pairs["negation_mismatch"].astype(int) > 0).mean(),
        "a context family differs": (pairs["context_cues"].astype(int) > 0).mean(),
        "a hedge on either side": hedge.mean(),
        "entity mismatch = 0": (e == 0).mean(),
        "entity mismatch in (0, 1)": ((e > 0) & (e < 1)).mean(),
        "entity mismatch = 1": (e == 1).mean(),
        "similarity >= 0.84": (pairs["similarity"].astype(float) >= 0.84).mean(),
    }
    if "shared_entities" in pairs.columns:
        rows["an entity shared"] = (pairs["shared_entities"].astype(int) > 0).mean()
    return rows


def unsure_branch(pairs: pd.DataFrame, labels: pd.DataFrame) -> pd.Series:
    """The label rule's branch of each label below the threshold (what kept it there)."""
    low = labels["confidence"].astype(float) < MIN_CONFIDENCE
    reversed_ = pairs["polarity_reversal"].astype(int) > 0
    hedge = _hedged(pairs["text_a"].astype(str)) | _hedged(pairs["text_b"].astype(str))
    similarity = pairs["similarity"].astype(float)
    branch = np.select(
        [
            reversed_ & hedge,
            reversed_,
            ~reversed_ & (pairs["negation_mismatch"].astype(int) > 0),
            ~reversed_ & (similarity < 0.84),
        ],
        [
            "reversed, hedged (insufficient evidence; -0.20)",
            "reversed, entity mismatch pulls it under",
            "not reversed, negation on one side (-0.10)",
            "not reversed, similarity < 0.84 (the only evidence of no conflict)",
        ],
        default="not reversed, context differences (-0.05 each)",
    )
    return pd.Series(branch[low.to_numpy()]).value_counts()


def share_table(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for name, labels in (("before", before), ("after", after)):
        usable = labels["confidence"].astype(float) >= MIN_CONFIDENCE
        counts = labels.loc[usable, "conflict_type"].value_counts().to_dict()
        rows.append({"labels": name, "usable": int(usable.sum()), "share": f"{usable.mean():.1%}", **counts})
    return pd.DataFrame(rows).fillna(0)


def samples(pairs, before, after, n: int, seed: int) -> str:
    was = before["confidence"].astype(float).to_numpy() >= MIN_CONFIDENCE
    now = after["confidence"].astype(float).to_numpy() >= MIN_CONFIDENCE
    rng = np.random.default_rng(seed)
    out = []
    for title, mask in (("newly labelled (after only)", now & ~was), ("previously labelled (before)", was)):
        rows = rng.choice(np.flatnonzero(mask), size=min(n, int(mask.sum())), replace=False)
        out.append(f"## {title}: {n} of {int(mask.sum())}\n")
        for k, i in enumerate(sorted(rows), 1):
            out.append(
                f"{k}. `{pairs['pair_id'].iat[i]}` S={float(pairs['similarity'].iat[i]):.2f}  \n"
                f"   A: {pairs['text_a'].iat[i]}  \n   B: {pairs['text_b'].iat[i]}  \n"
                f"   before: {before['conflict_type'].iat[i]} {float(before['confidence'].iat[i]):.3f}; "
                f"after: {after['conflict_type'].iat[i]} {float(after['confidence'].iat[i]):.3f} "
                f"(stances {pairs['stance_a'].iat[i]}/{pairs['stance_b'].iat[i]})  \n   reader: \n"
            )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mining_dir", type=Path)
    parser.add_argument("--samples", type=Path, default=None)
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    pairs = read_jsonl(args.mining_dir / "pairs.jsonl")
    before = read_jsonl(args.mining_dir / "labels.jsonl")
    before = before[before["label_source"] == "heuristic"].set_index("pair_id").loc[pairs["pair_id"]]
    before = before.reset_index()
    fresh = divergence_signals(pairs["text_a"].astype(str).tolist(), pairs["text_b"].astype(str).tolist())
    now = pairs.drop(columns=[c for c in fresh.columns if c in pairs.columns]).join(fresh)
    after = heuristic_labels(now)
    print(f"{len(pairs)} mined pairs from {args.mining_dir}\n")
    table = pd.DataFrame({"before": firing(pairs), "after": firing(now)})
    print("1. signals firing (share of pairs)\n" + table.map(lambda v: f"{v:.1%}").to_string())
    stances = pd.concat([now["stance_a"], now["stance_b"]]).value_counts(normalize=True)
    print("\nclaim stances in the pairs (after): " + ", ".join(f"{k} {v:.1%}" for k, v in stances.items()))
    print("\n2. why the before labels are unsure (labels below 0.45, by the rule's branch)")
    print(unsure_branch(pairs, before).to_string())
    print("\n3. pairs with a usable label (heuristic confidence >= 0.45), by class")
    print(share_table(before, after).to_string(index=False))
    if args.samples:
        args.samples.write_text(samples(now, before, after, args.n, args.seed))
        print(f"\nwrote {args.samples}")


if __name__ == "__main__":
    main()
