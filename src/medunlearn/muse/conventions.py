"""How the MUSE metrics generate and score: medunlearn's defaults and the reference's (``open-unlearning``).

The definitions (prompts, generation lengths, stop strings, ROUGE-L F1, Min-40%, the PrivLeak formula) are
the benchmark's and the same in both presets; they live in :mod:`medunlearn.metrics.verbatim_memorization`,
:mod:`medunlearn.metrics.knowledge_memorization` and :mod:`medunlearn.metrics.privleak`. The presets differ
only where the reference has a quirk:

================================  ============================  ==========================================
convention                        medunlearn                    open-unlearning [ref, at d3d7cf9]
================================  ============================  ==========================================
last completion token scored      yes (no EOS in MUSE texts)    no: ``src/evals/metrics/utils.py:129-131,
  (extraction strength, Min-K%)                                 173-175`` drop the last labelled token
extraction strength, last token   0                             >= 1/|y|: ``memorization.py:237-253``
  wrong                                                         stops its loop at k = |y| - 1
Min-K% token count                ceil(k·T)                     max(1, floor(k·T)): ``mia/min_k.py:24``
PrivLeak denominator              exact                         + 1e-10: ``privacy.py:52``
PrivLeak without a retain model   not reported                  retain AUC 0.5: ``privacy.py:43-49``,
                                                                ``configs/eval/muse_metrics/privleak.yaml:17``
ROUGE ground truth                the row's ``gt`` / answer     decoded labels minus decoded prompt:
                                                                ``src/evals/metrics/utils.py:271-281``
decoded texts' spaces cleaned     no (the tokenizer's decode)   yes, ``clean_up_tokenization_spaces=True``
  (`` .`` -> ``.``, `` n't`` ...)                               (``utils.py:271-277, 300-304``) under its
                                                                pinned transformers 4.45.1
                                                                (``requirements.txt:2``)
================================  ============================  ==========================================

(All reference paths are in OpenUnlearning at commit d3d7cf9, under ``src/evals/metrics/`` unless given.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from medunlearn.errors import InputError
from medunlearn.metrics.knowledge_memorization import KNOWMEM_MAX_NEW_TOKENS, KNOWMEM_STOP_STRINGS
from medunlearn.metrics.privleak import MIN_K, REFERENCE_RETAIN_AUC
from medunlearn.metrics.verbatim_memorization import VERBMEM_MAX_NEW_TOKENS

# The reference's token limits per row (open-unlearning@d3d7cf9 configs/data/datasets/): 512 tokens of prompt
# and answer (MUSE_forget_knowmem.yaml:14), 2048 completion tokens (MUSE_forget_verbmem.yaml:10,
# MUSE_MIA.yaml:11,21).
KNOWMEM_MAX_LENGTH = 512
COMPLETION_MAX_LENGTH = 2048


@dataclass(frozen=True)
class MuseConventions:
    """Generation and scoring conventions of a MUSE run (see the module's table).

    Args:
        name: preset name, recorded with the results.
        knowmem_max_new_tokens, verbmem_max_new_tokens: greedy generation lengths (32 and 128 in both).
        knowmem_stop_strings: knowmem answers are cut at the first of these.
        min_k: the Min-K% fraction (0.4).
        drop_last_token: extraction strength and Min-K% skip each completion's last token.
        es_floor_at_one_token: extraction strength is at least 1/|y|.
        min_k_count: ``"ceil"`` or ``"floor"`` (the reference's ``max(1, floor(k·T))``).
        privleak_epsilon: added to PrivLeak's denominator.
        default_retain_auc: the retain AUC PrivLeak uses when no retain model was scored (None: no PrivLeak).
        reference_ground_truth: ROUGE against decoded labels minus decoded prompt, as the reference.
        clean_up_decodes: the generations get transformers' tokenization-space clean-up, as the reference
            decodes them (:func:`medunlearn.muse.rendering.clean_up_spaces`; its ground truths always do).
    """

    name: str = "medunlearn"
    knowmem_max_new_tokens: int = KNOWMEM_MAX_NEW_TOKENS
    verbmem_max_new_tokens: int = VERBMEM_MAX_NEW_TOKENS
    knowmem_stop_strings: tuple[str, ...] = KNOWMEM_STOP_STRINGS
    min_k: float = MIN_K
    drop_last_token: bool = False
    es_floor_at_one_token: bool = False
    min_k_count: str = "ceil"
    privleak_epsilon: float = 0.0
    default_retain_auc: float | None = None
    reference_ground_truth: bool = False
    clean_up_decodes: bool = False

    def __post_init__(self):
        if self.min_k_count not in ("ceil", "floor"):
            raise InputError(f"min_k_count must be 'ceil' or 'floor', got {self.min_k_count!r}")
        if self.knowmem_max_new_tokens < 1 or self.verbmem_max_new_tokens < 1:
            raise InputError("max new tokens must be at least 1")
        if not 0.0 < self.min_k <= 1.0:
            raise InputError(f"min_k must be in (0, 1], got {self.min_k}")

    def to_dict(self) -> dict:
        values = asdict(self)
        values["knowmem_stop_strings"] = list(self.knowmem_stop_strings)
        return values

    @classmethod
    def from_dict(cls, values: dict) -> MuseConventions:
        """The conventions :meth:`to_dict` wrote (an evaluation folder's ``run.json``)."""
        values = dict(values)
        if "knowmem_stop_strings" in values:
            values["knowmem_stop_strings"] = tuple(values["knowmem_stop_strings"])
        return cls(**values)  # a bad record: TypeError or InputError, named by chat.recorded_conventions


MUSE_PRESETS: dict[str, MuseConventions] = {
    "medunlearn": MuseConventions(),
    "open-unlearning": MuseConventions(
        name="open-unlearning",
        drop_last_token=True,
        es_floor_at_one_token=True,
        min_k_count="floor",
        privleak_epsilon=1e-10,
        default_retain_auc=REFERENCE_RETAIN_AUC,
        reference_ground_truth=True,
        clean_up_decodes=True,
    ),
}


def muse_preset(name: str, **changes) -> MuseConventions:
    """A preset by name, with some fields changed (``None`` values ignored, so CLI defaults pass through)."""
    if name not in MUSE_PRESETS:
        raise InputError(f"unknown MUSE preset {name!r}; known: {', '.join(sorted(MUSE_PRESETS))}")
    return replace(MUSE_PRESETS[name], **{k: v for k, v in changes.items() if v is not None})


__all__ = ["COMPLETION_MAX_LENGTH", "KNOWMEM_MAX_LENGTH", "MUSE_PRESETS", "MuseConventions", "muse_preset"]
