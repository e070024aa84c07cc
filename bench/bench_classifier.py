"""The rule-based disease classifier on hand-labelled real notes (issue 23): accuracy of the classified notes
and skip rate on the frozen test half, the tuning half, the 50 notes of issue 11 and the second reader's 120,
and the skip rate on all 600 notes of the shared sample. On the frozen half also how far a second, blind
reading of its notes agrees with the first, and the classifier's accuracy on the notes both readings agree on.

    python bench/bench_classifier.py [--shared-data ../shared/data] [--by-rule] [--errors]

``--by-rule`` prints right / decided per deciding principle, and ``--errors`` lists the misclassified and
skipped notes, of the open sets (the tuning half, the 50 notes of issue 11, the second reader's 120) only:
the frozen half is reported as figures, never note by note (docs/benchmarks/amnesia.md, "Disease
classifier").
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("hand_labels", ROOT / "tests" / "amnesia" / "hand_labels.py")
hand_labels = importlib.util.module_from_spec(_spec)
sys.modules["hand_labels"] = hand_labels  # dataclasses look their module up there
_spec.loader.exec_module(hand_labels)


def print_by_rule(analyses, labels) -> None:
    """Right / decided per principle (the ``rule`` before any ", first named"), on the open sets only; a skip
    is right where the note is labelled "none" (eye, ear, skin: no category fits)."""
    from collections import Counter

    decided, right = Counter(), Counter()
    for analysis, label in zip(analyses, labels):
        if label.half == "frozen":
            continue
        rule = analysis.rule.split(",")[0] if analysis.category is not None else "(skipped)"
        decided[rule] += 1
        right[rule] += (analysis.category or "none") == label.label  # a skip is right on a "none" note
    print("| principle (open sets: tuning half, issue-11 50, second reader's 120) | right / decided |")
    print("|---|---|")
    for rule, count in decided.most_common():
        print(f"| {rule} | {right[rule]}/{count} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared-data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--errors", action="store_true", help="list errors of the open sets")
    parser.add_argument(
        "--by-rule", action="store_true", help="accuracy per deciding principle on the open sets"
    )
    args = parser.parse_args()
    from medunlearn.ontology.vocabulary import default_vocabulary

    rows = hand_labels.read_sample(args.shared_data)
    labels = hand_labels.all_labels()
    start = time.perf_counter()
    analyses = hand_labels.classify(labels, rows)
    for half, name in (
        ("frozen", "frozen half (the test set)"),
        ("tune", "tuning half"),
        ("v1", "issue-11 50"),
        ("tune3", "second reader's 120"),
    ):
        chosen = [(a.category, label) for a, label in zip(analyses, labels) if label.half == half]
        result = hand_labels.figures([p for p, _ in chosen], [label for _, label in chosen])
        print(result.line(name))
        if half == "frozen":
            agreement = hand_labels.reader_agreement(
                [p for p, _ in chosen], [label for _, label in chosen], hand_labels.second_reading()
            )
            print("  " + agreement.line("a second blind reading of the frozen half"))
    everything = default_vocabulary().analyse_records(
        [hand_labels.line_breaks(r["title"]) for r in rows.values()],
        [hand_labels.line_breaks(r["patient"]) for r in rows.values()],
    )
    skipped = sum(a.category is None for a in everything)
    print(f"all {len(everything)} notes: skipped {skipped} ({skipped / len(everything):.1%})")
    print(f"{time.perf_counter() - start:.1f} s")
    if args.by_rule:
        print_by_rule(analyses, labels)
    if args.errors:
        for analysis, label in zip(analyses, labels):
            if label.half != "frozen" and analysis.category != label.label:
                title = rows[label.patient_uid]["title"][:90]
                print(
                    f"[{label.half}] {label.patient_uid}: {analysis.category} ({analysis.rule}, "
                    f"{analysis.confidence}) != {label.label} | {title}"
                )


if __name__ == "__main__":
    main()
