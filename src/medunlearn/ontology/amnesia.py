"""AMNESIA's label sets, as data: QA types and the 11 disease categories.

Which of these are the paper's and which are ours is written on the benchmark's docs page
(``docs/benchmarks/amnesia.md``).
"""

from __future__ import annotations

QA_TYPES = ("factual", "reasoning")

# The 11 disease categories [ours, docs/benchmarks/amnesia.md]: the paper names three (cancer,
# infection/immune, cardiovascular) and says the labels follow CDC FastStats "diseases and conditions"; the
# other eight are our choice. share = fraction of patients in the fictitious cohort (the first three are the
# paper's).
DISEASE_SHARES: dict[str, float] = {
    "cancer": 0.303,
    "infection_immune": 0.223,
    "cardiovascular": 0.162,
    "respiratory": 0.060,
    "neurological": 0.055,
    "digestive": 0.050,
    "endocrine_metabolic": 0.040,
    "kidney_urinary": 0.032,
    "musculoskeletal": 0.030,
    "mental_behavioral": 0.025,
    "maternal_child": 0.020,
}
DISEASES: tuple[str, ...] = tuple(DISEASE_SHARES)
# The diseases the paper builds disease-level forget sets for.
DISEASE_LEVEL_DEFAULT: tuple[str, ...] = ("cancer", "infection_immune", "cardiovascular")
