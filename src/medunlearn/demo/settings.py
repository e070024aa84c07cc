"""The demo's settings: sizes and steps of a run (``FULL``, ``QUICK``), and the context every stage shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from medunlearn.errors import MedunlearnError
from medunlearn.evaluation.notes_settings import NotesMemorizationConfig
from medunlearn.metrics.bootstrap import BootstrapConfig

DemoMethod = Literal["grad_diff", "kl_min", "simnpo", "rmu"]

# The paper's four methods (method-table stems) and how they are shown.
RANDOM_METHODS: tuple[DemoMethod, ...] = ("grad_diff", "kl_min", "simnpo", "rmu")
DISPLAY_NAMES: dict[DemoMethod, str] = {
    "grad_diff": "GradDiff",
    "kl_min": "KL-Min",
    "simnpo": "SimNPO",
    "rmu": "RMU",
}
RANDOM_FORGET = "forget_10"
DISEASE_FORGET = "disease_cancer_forget_10"
BEFORE_NAME = "fine-tuned (no unlearning)"


@dataclass
class DemoSettings:
    """Sizes and steps of one demo run (ours; chosen so the model memorises the cohort within the time
    budget)."""

    patients: int = 100
    hidden_size: int = 128
    num_hidden_layers: int = 2
    vocab_size: int = 2048
    # 30 epochs of notes pretraining: with 1 the model reproduced almost none of a note's wording (verbmem
    # 0.014), so the notes run had nothing to forget; with 30 it reproduced 0.074 after QA SFT and the
    # notes unlearning took it to 0.012 (Δ -0.062 [-0.109, -0.021]), at about 90 s more on an idle CPU.
    notes_epochs: float = 30.0
    qa_epochs: float = 12.0
    finetune_learning_rate: float = 3e-3
    finetune_batch_size: int = 16
    # Per method: the forget-loss methods move a memorised answer with 5e-4; SimNPO's length-normalised loss
    # and RMU's activation steering need a larger step to move a model this small.
    unlearn_learning_rates: dict[DemoMethod, float] = field(
        default_factory=lambda: {"grad_diff": 5e-4, "kl_min": 5e-4, "simnpo": 2e-3, "rmu": 2e-3}
    )
    unlearn_max_steps: int | None = None  # None: the method config's epochs (5)
    disease_methods: tuple[DemoMethod, ...] = ("grad_diff", "simnpo")
    max_new_tokens: int = 32
    max_retain_patients: int | None = 100
    biodivergence_pairs: int = 2000
    # The fine-tuned BioDivergence baseline (MiniLM, claims only, 128 tokens): 1 epoch keeps the demo's
    # runtime down (docs/biodivergence.md, "What the fine-tuned baseline costs on a CPU"); 0 skips it. At one
    # epoch it may not have learned the task: the demo says so when it predicts one conflict type throughout.
    biodivergence_finetuned_epochs: int = 1
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)
    # The notes run (demo/notes.py): this method unlearns the disease-level forget patients' notes
    # (--forget-on notes), scored by notes memorization (None: no notes run). Shorter cuts than the default
    # 32 → 64 words: the notes are about 115 words, and the greedy continuation is the evaluation's cost.
    notes_method: DemoMethod | None = "grad_diff"
    notes_memorization: NotesMemorizationConfig = field(
        default_factory=lambda: NotesMemorizationConfig(prefix_words=16, continuation_words=32)
    )


FULL = DemoSettings()
QUICK = DemoSettings(
    patients=40,
    hidden_size=64,
    vocab_size=600,
    notes_epochs=1.0,  # the quick demo only shows the pipeline works
    qa_epochs=8.0,
    finetune_learning_rate=5e-3,
    unlearn_max_steps=2,
    disease_methods=("grad_diff",),
    max_new_tokens=8,
    max_retain_patients=10,
    biodivergence_pairs=400,
    biodivergence_finetuned_epochs=0,  # MiniLM fine-tuning takes minutes on a CPU: not in the quick demo
)


class DemoError(MedunlearnError, ValueError):
    """A demo option the run cannot honour (the message says which)."""


@dataclass(frozen=True)
class DemoContext:
    """What every stage of one demo run shares: its settings, its seed (the cohort, the splits, the models)
    and whether to show progress bars."""

    settings: DemoSettings
    seed: int
    progress: bool


__all__ = [
    "BEFORE_NAME",
    "DISEASE_FORGET",
    "DISPLAY_NAMES",
    "FULL",
    "QUICK",
    "RANDOM_FORGET",
    "RANDOM_METHODS",
    "DemoContext",
    "DemoError",
    "DemoMethod",
    "DemoSettings",
]
