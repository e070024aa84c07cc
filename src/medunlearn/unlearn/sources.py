r"""What an unlearning run forgets and retains: the forget and retain corpora of each benchmark.

* **AMNESIA** (``forget_on``, ``medunlearn unlearn --forget-on``):

  - ``qa`` (the default): the forget config's seen QA (its ``train`` split) and the retain config's;
  - ``notes`` [ours]: the forget patients' notes themselves, each the document fine-tuning's notes stage read
    (``title + "\n" + note``, :func:`medunlearn.amnesia.note_sets.note_document`), as raw text; retain: the
    retain config's patients' notes. A forget patient is any patient of the forget config (``train`` or
    ``holdout`` split);
  - ``both`` [ours]: the union, one corpus: the forget patients' note chunks and their seen QA rows (loss on
    the answer); retain: the retained patients' note chunks and seen QA rows. Each example keeps its own
    labels, so under ``loss_averaging="sequence"`` a note chunk and a QA answer weigh the same.

* **TOFU**: the forget and retain configs' QA, as ``qa``.
* **MUSE** (a MUSE-format folder, docs/muse.md): raw text; forget ``raw/forget`` or a fold ``scal/forget_k``
  / ``sust/forget_k``; retain ``raw/retain1``, the reference's (open-unlearning@d3d7cf9
  ``configs/experiment/unlearn/muse/default.yaml:13`` ``retain_split: retain1``, read as ``raw``
  by ``configs/data/datasets/MUSE_retain.yaml:6-7``; its ``scalability.yaml:13`` and
  ``sustainabilty.yaml:13`` keep it), or ``raw/retain2``.

Text corpora train with ``data_format="text"`` (``medunlearn.unlearn.text``). ``both`` mixes formats, so its
two parts are tokenised here (:func:`training_sets`) and reach the trainer as ready rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from medunlearn.amnesia.note_sets import config_patient_ids, notes_of_patients
from medunlearn.config_names import MUSE_FOLDS
from medunlearn.data_loading import (
    check_no_question_in_both,
    check_no_repeated_question,
    check_text_fields,
    load_split,
    split_source,
)
from medunlearn.unlearn.errors import UnlearningInputError

ForgetOn = Literal["qa", "notes", "both"]
FORGET_ON = ("qa", "notes", "both")
MUSE_CORPORA: dict[str, tuple[tuple[str, str], ...]] = {
    "forget": (
        ("raw", "forget"),
        *((fold_set, fold) for fold_set in ("scal", "sust") for fold in MUSE_FOLDS),
    ),
    "retain": (("raw", "retain1"), ("raw", "retain2")),
}
MUSE_DEFAULTS = {"forget": "raw/forget", "retain": "raw/retain1"}


@dataclass
class UnlearningCorpus:
    """The loaded forget and retain sets of a run: ``datasets.Dataset`` parts (one, or notes then QA for
    ``both``), their names, and the format they train in."""

    forget: list
    retain: list | None
    forget_name: str
    retain_name: str | None
    data_format: Literal["qa", "text"]
    source: str = "--forget-on qa"
    description: dict[str, str] = field(default_factory=dict)


def corpus_format(benchmark: str, forget_on: str = "qa") -> Literal["qa", "text"]:
    """The ``data_format`` a benchmark's corpus trains in: ``text`` for MUSE and for AMNESIA notes."""
    return "text" if benchmark == "muse" or forget_on != "qa" else "qa"


def check_forget_on(benchmark: str, forget_on: str) -> None:
    """``forget_on`` must be one of :data:`FORGET_ON`, and other than ``qa`` only on AMNESIA (the one with
    notes)."""
    if forget_on not in FORGET_ON:
        raise UnlearningInputError(f"forget_on must be one of {', '.join(FORGET_ON)}, got {forget_on!r}")
    if forget_on != "qa" and benchmark != "amnesia":
        raise UnlearningInputError(
            f"--forget-on {forget_on}: only AMNESIA folders have notes (--benchmark {benchmark})"
        )


def muse_split(choice: str | None, role: str) -> tuple[str, str]:
    """``(config, split)`` of a MUSE corpus named ``choice`` (``forget``, ``raw/forget``, ``scal/forget_2``,
    ``retain1``, …; ``None``: the default) for ``role`` (``forget`` or ``retain``)."""
    name = choice or MUSE_DEFAULTS[role]
    config, _, split = name.rpartition("/")
    wanted = (config or "raw", split)
    if wanted not in MUSE_CORPORA[role]:
        known = ", ".join(f"{c}/{s}" for c, s in MUSE_CORPORA[role])
        raise UnlearningInputError(
            f"--benchmark muse --{role} {choice!r}: not a {role} corpus; one of {known}"
        )
    return wanted


def _muse_corpus(data: str, choice: str | None, role: str):
    config, split = muse_split(choice, role)
    return load_split(data, config, split), f"{config}/{split}"


def _qa_part(data: str, config: str):
    qa = load_split(data, config)
    source = split_source(data, config, "train")
    check_text_fields(qa, ("question", "answer"), source)  # not "None"
    check_no_repeated_question(qa, source)  # trained on twice, a QA row would weigh double in the loss
    return qa


def _notes_part(data: str, config: str):
    import datasets

    rows = notes_of_patients(data, config_patient_ids(data, config))
    columns = ("patient_id", "disease", "text")
    return datasets.Dataset.from_dict({column: [row[column] for row in rows] for column in columns})


def _amnesia_parts(data: str, config: str, forget_on: str) -> list:
    parts = []
    if forget_on in ("notes", "both"):
        parts.append(_notes_part(data, config))
    if forget_on in ("qa", "both"):
        parts.append(_qa_part(data, config))
    return parts


def load_corpus(data_args, need_retain: bool) -> UnlearningCorpus:
    """The forget (and, when ``need_retain``, retain) sets that ``data_args`` (``UnlearningDataArguments``)
    name."""
    benchmark, forget_on = data_args.benchmark, data_args.forget_on
    check_forget_on(benchmark, forget_on)
    data_format = corpus_format(benchmark, forget_on)
    if benchmark == "muse":
        forget, forget_name = _muse_corpus(data_args.data, data_args.forget, "forget")
        retain, retain_name = (None, None)
        if need_retain:
            retain, retain_name = _muse_corpus(data_args.data, data_args.retain, "retain")
        description = _describe(f"`{forget_name}`", retain_name and f"`{retain_name}`", "documents")
        retain_parts = None if retain is None else [retain]
        return UnlearningCorpus(
            [forget], retain_parts, forget_name, retain_name, data_format, "--benchmark muse", description
        )
    retain_name = data_args.retain_config() if need_retain else None
    forget = _amnesia_parts(data_args.data, data_args.forget, forget_on)
    retain = _amnesia_parts(data_args.data, retain_name, forget_on) if need_retain else None
    if retain is not None and forget_on != "notes":  # the QA parts, each the last of its list
        forget_source = split_source(data_args.data, data_args.forget, "train")
        retain_source = split_source(data_args.data, retain_name, "train")
        check_no_question_in_both(forget[-1], forget_source, retain[-1], retain_source)
    what = {"qa": "seen QA", "notes": "patients' notes", "both": "patients' notes and seen QA"}[forget_on]
    return UnlearningCorpus(
        forget,
        retain,
        data_args.forget,
        retain_name,
        data_format,
        f"--forget-on {forget_on}",
        _describe(f"`{data_args.forget}` ({what})", retain_name and f"`{retain_name}` ({what})", forget_on),
    )


def _describe(forget: str, retain: str | None, kind: str) -> dict[str, str]:
    return {"forget corpus": forget, "retain corpus": retain or "-", "unlearned on": kind}


def check_corpus_format(corpus: UnlearningCorpus, config) -> None:
    """``config.data_format`` must be the corpus's (text for MUSE and notes, qa for QA): refused by name."""
    if config.data_format != corpus.data_format:
        raise UnlearningInputError(
            f"{corpus.source} trains on data_format {corpus.data_format!r}; the config has data_format "
            f"{config.data_format!r} (drop --data_format)"
        )


def training_sets(corpus: UnlearningCorpus, tokenizer, config, conventions):
    """The ``(forget, retain)`` datasets the trainer takes: a single part as it is (the trainer tokenises it
    by ``config.data_format``); notes and QA together (``both``) tokenised here, each by its own rule, and
    joined (the trainer keeps ready rows as they are, ``medunlearn.unlearn.text``)."""
    check_corpus_format(corpus, config)
    forget = _joined(corpus.forget, tokenizer, config, conventions, "forget")
    retain = corpus.retain and _joined(corpus.retain, tokenizer, config, conventions, "retain")
    return forget, retain


def _joined(parts: list, tokenizer, config, conventions, name: str):
    if len(parts) == 1:
        return parts[0]
    import datasets

    from medunlearn.unlearn.data import tokenize_qa_dataset
    from medunlearn.unlearn.text import tokenize_text_dataset

    notes, qa = parts
    tokenised = [
        tokenize_text_dataset(notes, tokenizer, config, f"{name} notes"),
        tokenize_qa_dataset(qa, tokenizer, config, f"{name} QA", conventions),
    ]
    shared = [c for c in tokenised[0].column_names if c in tokenised[1].column_names]
    return datasets.concatenate_datasets([part.select_columns(shared) for part in tokenised])


def corpus_card_section(corpus: UnlearningCorpus, steps: int) -> str:
    """The model card's "Unlearning corpus" section: forget and retain corpora, format, steps trained."""
    rows = {**corpus.description, "data format": corpus.data_format}
    rows["unlearning steps"] = str(steps)
    table = "\n".join(f"| {key} | {value} |" for key, value in rows.items())
    return f"## Unlearning corpus\n\n| | |\n|---|---|\n{table}\n"
