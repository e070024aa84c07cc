"""AMNESIA build: full-scale timing, scaling at 882 / 8,820 / 88,200 patients, and the vectorised split
construction against a per-patient Python baseline run in the same process.

    python bench/bench_amnesia_build.py [--skip-largest-export]

Prints times and ratios; asserts nothing about time (the outputs of both split builders are checked equal).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from medunlearn.amnesia.hub import write_folder
from medunlearn.amnesia.pipeline import build_contents
from medunlearn.amnesia.splits import SplitConfig, build_splits, forget_size


def naive_build_splits(notes, qa, config: SplitConfig):
    """The obvious per-patient implementation: Python lists, sets and loops (same definitions, other RNG)."""
    rng = random.Random(config.seed)
    patients = sorted(notes["patient_id"].to_pylist())
    disease_of = dict(zip(notes["patient_id"].to_pylist(), notes["disease"].to_pylist()))
    groups: dict[tuple[str, str], list[str]] = {}
    for qa_id, patient, qa_type in zip(
        qa["qa_id"].to_pylist(), qa["patient_id"].to_pylist(), qa["qa_type"].to_pylist()
    ):
        groups.setdefault((patient, qa_type), []).append(qa_id)
    holdout = set()
    for ids in groups.values():
        holdout.update(rng.sample(sorted(ids), config.holdout_per_type))
    order = patients[:]
    rng.shuffle(order)
    forget = {}
    for percentage in config.forget_percentages:
        forget[f"forget_{percentage}"] = set(order[: forget_size(percentage, len(patients))])
    for disease in config.disease_level:
        of_disease = [p for p in order if disease_of[p] == disease]
        for percentage in config.forget_percentages:
            size = forget_size(percentage, len(patients))
            if 0 < size <= len(of_disease):
                forget[f"disease_{disease}_forget_{percentage}"] = set(of_disease[:size])
    # Per config, the QA rows of forgotten and retained patients (what the export needs).
    rows = list(zip(qa["qa_id"].to_pylist(), qa["patient_id"].to_pylist()))
    for members in forget.values():
        [qa_id for qa_id, patient in rows if patient in members]
        [qa_id for qa_id, patient in rows if patient not in members]
    return holdout, forget


def timed(function, *args, repeat: int = 3, **kwargs):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best, result


def split_and_select(notes, qa, config):
    """Our split construction plus the per-config row selection the export does (vectorised)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    splits = build_splits(notes, qa, config)
    for mask in splits.forget_masks.values():
        in_forget = pc.is_in(qa["patient_id"], value_set=pa.array(splits.patient_ids[mask].astype(str)))
        qa.filter(in_forget), qa.filter(pc.invert(in_forget))
    return splits


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--skip-largest-export", action="store_true", help="do not write the 88,200-patient folder"
    )
    args = parser.parse_args()
    config = SplitConfig(seed=0)
    print(
        "splits s = build_splits alone; +select s = with each config's row selection "
        "(what the naive baseline does)"
    )
    print(
        f"{'patients':>9} {'cohort s':>9} {'splits s':>9} {'+select s':>9} {'naive s':>9} {'naive/ours':>10} "
        f"{'export s':>9} {'build+export s':>14} {'MB':>6}"
    )
    split_times = {}
    for patients in (882, 8820, 88200):
        start = time.perf_counter()
        contents = build_contents(source="synthetic", patients=patients, seed=0)
        cohort_seconds = time.perf_counter() - start
        splits_only, _ = timed(build_splits, contents.notes, contents.qa, config)
        ours, _ = timed(split_and_select, contents.notes, contents.qa, config)
        naive, (_, naive_forget) = timed(naive_build_splits, contents.notes, contents.qa, config, repeat=1)
        # Same sizes per config (the baseline draws with another RNG, so sets differ but sizes cannot).
        ours_sizes = {k: int(v.sum()) for k, v in contents.splits.forget_masks.items()}
        assert ours_sizes == {k: len(v) for k, v in naive_forget.items()}, "baseline disagrees on split sizes"
        split_times[patients] = splits_only
        export_seconds, megabytes = float("nan"), float("nan")
        if not (patients == 88200 and args.skip_largest_export):
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                folder = write_folder(contents, Path(tmp) / "amnesia", progress=False)
                export_seconds = time.perf_counter() - start
                megabytes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6
        print(
            f"{patients:>9,} {cohort_seconds:>9.2f} {splits_only:>9.3f} {ours:>9.3f} {naive:>9.3f} "
            f"{naive / ours:>9.1f}x {export_seconds:>9.2f} {cohort_seconds + export_seconds:>14.2f} "
            f"{megabytes:>6.1f}"
        )
    growth_small = split_times[8820] / split_times[882]
    growth_large = split_times[88200] / split_times[8820]
    print(
        f"split construction growth per 10x patients: {growth_small:.1f}x (882→8,820), "
        f"{growth_large:.1f}x (8,820→88,200); linear is 10x"
    )


if __name__ == "__main__":
    main()
