"""BioDivergence scores of the four primary outputs (and the scoped evidence spans), as numpy.

Definitions (ours; the paper names the scores without formulas; docs/benchmarks/biodivergence.md):

- conflict type: ``accuracy`` = mean 1[pred = gold]; per class c, F1_c = 2·TP_c / (2·TP_c + FP_c + FN_c)
  (0 when the class is neither predicted nor gold); ``macro_f1`` = mean F1_c over the classes present in the
  references; ``contextual_contradiction_f1`` = F1 of that class.
- axes (multi-label over the 13 axes): ``axis_micro_f1`` = 2·ΣTP / (2·ΣTP + ΣFP + ΣFN) over all
  (pair, axis) cells; ``axis_macro_f1`` = mean per-axis F1 over the axes present in the references.
- ``confounder_accuracy`` = mean 1[pred confounder = gold confounder] ("none" matches "none").
- ``reconciliation_rougeL`` = mean ROUGE-L F1 of the reconciliation texts.
- evidence spans: text lower-cased, punctuation dropped, split on word characters; token F1 =
  2·|pred ∩ gold| / (|pred| + |gold|) with multiset intersection (1 when both are empty); exact match =
  1[normalised pred = normalised gold]; ``evidence_f1`` / ``evidence_exact_match`` average both claims of
  every pair.

A prediction may be a record (dict) or a model's raw text. Text is parsed strictly by
:func:`parse_prediction`; text that does not parse counts as wrong on every output (no class, no axes, no
confounder, empty texts), never dropped. Dict predictions and references with an unknown label, a missing
``conflict_type`` or ``axes``, ``axes=None`` or empty inputs raise :class:`ContradictionInputError` (a
``ValueError``) naming the argument, index and field. Records and strings may be mixed here (a predictions
file can hold both); the ``evaluate`` module, whose features are typed, takes one kind per call.
"""

from __future__ import annotations

import json
import re

import numpy as np

from medunlearn.errors import InputError
from medunlearn.metrics.rouge import rouge_l
from medunlearn.metrics.validation import check_same_length, check_sequence
from medunlearn.ontology.biodivergence import (
    AXIS_IDS,
    CONFLICT_TYPE_IDS,
    CONTEXTUAL_CONTRADICTION,
    NO_CONFOUNDER,
)

OUTPUT_KEYS = ("conflict_type", "axes", "dominant_confounder", "reconciliation")
SPAN_KEYS = ("evidence_a", "evidence_b")
_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


def parse_prediction(text: str) -> dict | None:
    """Strictly parse a model's JSON answer; ``None`` when it is not exactly one valid record.

    Accepted: one JSON object (optionally inside a single `` ```json `` fence) with ``conflict_type`` (a class
    id), ``axes`` (a list of axis ids), ``dominant_confounder`` (an axis id, "none" or null) and
    ``reconciliation`` (a string); ``evidence_a`` / ``evidence_b`` are optional strings.

    >>> parse_prediction('{"conflict_type": "no_conflict", "axes": [], "dominant_confounder": null, '
    ...                  '"reconciliation": "They agree."}')["dominant_confounder"]
    'none'
    >>> parse_prediction('The answer is {"conflict_type": "no_conflict"}') is None
    True
    """
    if not isinstance(text, str):
        return None
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        record = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(record, dict) or any(key not in record for key in OUTPUT_KEYS):
        return None
    conflict, axes, confounder = record["conflict_type"], record["axes"], record["dominant_confounder"]
    confounder = NO_CONFOUNDER if confounder in (None, "") else confounder
    if conflict not in CONFLICT_TYPE_IDS or not isinstance(axes, list):
        return None
    if any(axis not in AXIS_IDS for axis in axes) or confounder not in (*AXIS_IDS, NO_CONFOUNDER):
        return None
    spans = [record.get(key, "") for key in SPAN_KEYS]
    if not isinstance(record["reconciliation"], str) or not all(isinstance(span, str) for span in spans):
        return None
    return {
        "conflict_type": conflict,
        "axes": list(axes),
        "dominant_confounder": confounder,
        "reconciliation": record["reconciliation"],
        "evidence_a": spans[0],
        "evidence_b": spans[1],
    }


class ContradictionInputError(InputError):
    """Input the contextual_contradiction scores cannot take: the message names the argument, the index and
    the field (``references[3].axes``). A ``ValueError``, as the other metrics' input errors."""


REQUIRED_RECORD_KEYS = ("conflict_type", "axes")
OPTIONAL_RECORD_KEYS = ("dominant_confounder", "reconciliation", *SPAN_KEYS)  # "none" / "" when left out


def check_record(name: str, index: int, record) -> dict:
    """A dict input with valid labels, as a record with exactly the six keys.

    ``conflict_type`` and ``axes`` (a list, ``[]`` for none) are required; ``dominant_confounder`` (missing,
    None or "" mean "none"), ``reconciliation``, ``evidence_a`` and ``evidence_b`` (missing or None mean "")
    are optional. Anything else raises :class:`ContradictionInputError` naming ``name[index].field``.

    >>> check_record("references", 0, {"conflict_type": "no_conflict", "axes": []})["dominant_confounder"]
    'none'
    >>> check_record("references", 2, {"conflict_type": "no_conflict", "axes": None})
    Traceback (most recent call last):
    ...
    medunlearn.metrics.contextual_contradiction.ContradictionInputError: `references`[2].axes is None; \
give a list of axis ids ([] for none)
    """
    where = f"`{name}`[{index}]"
    if not isinstance(record, dict):
        raise ContradictionInputError(
            f"{where} must be a dict or, for predictions, a JSON string; got {type(record).__name__}"
        )
    for key in REQUIRED_RECORD_KEYS:
        if key not in record:
            raise ContradictionInputError(
                f"{where} has no `{key}` (required: {', '.join(REQUIRED_RECORD_KEYS)}; optional: "
                f"{', '.join(OPTIONAL_RECORD_KEYS)})"
            )
    if record["conflict_type"] not in CONFLICT_TYPE_IDS:
        raise ContradictionInputError(
            f"{where}.conflict_type {record['conflict_type']!r} is unknown; "
            f"allowed: {', '.join(CONFLICT_TYPE_IDS)}"
        )
    axes = record["axes"]
    if axes is None:
        raise ContradictionInputError(f"{where}.axes is None; give a list of axis ids ([] for none)")
    if isinstance(axes, (str, bytes, dict)) or not hasattr(axes, "__iter__"):
        raise ContradictionInputError(
            f"{where}.axes must be a list of axis ids, got {type(axes).__name__} {axes!r}"[:300]
        )
    axes = list(axes)
    unknown = [axis for axis in axes if axis not in AXIS_IDS]
    if unknown:
        raise ContradictionInputError(
            f"{where}.axes has unknown {unknown[0]!r}; allowed: {', '.join(AXIS_IDS)}"
        )
    confounder = record.get("dominant_confounder")
    confounder = NO_CONFOUNDER if confounder in (None, "") else confounder
    if confounder not in (*AXIS_IDS, NO_CONFOUNDER):
        raise ContradictionInputError(
            f"{where}.dominant_confounder {confounder!r} is unknown; "
            f"allowed: {', '.join(AXIS_IDS)}, {NO_CONFOUNDER}"
        )
    out = {"conflict_type": record["conflict_type"], "axes": axes, "dominant_confounder": confounder}
    for key in ("reconciliation", *SPAN_KEYS):
        value = record.get(key)
        value = "" if value is None else value
        if not isinstance(value, str):
            raise ContradictionInputError(f"{where}.{key} must be a string, got {type(value).__name__}")
        out[key] = value
    return out


def check_inputs(predictions, references, *, allow_mixed: bool = True) -> tuple[list, list[dict]]:
    """``(predictions, references)`` checked and completed, before anything is scored.

    Both must be non-empty lists of one length; references are records; predictions are records or strings
    (raw model text, parsed later). With ``allow_mixed=False`` (the ``evaluate`` module, whose typed features
    take all records or all strings) they must be of one kind. Records come back with their optional keys
    filled (:func:`check_record`), so the module can encode them. Raises :class:`ContradictionInputError`.

    >>> check_inputs([], [])
    Traceback (most recent call last):
    ...
    medunlearn.metrics.contextual_contradiction.ContradictionInputError: `predictions` is empty: there is \
nothing to score
    """
    for name, values in (("predictions", predictions), ("references", references)):
        try:
            check_sequence(name, values, allow_empty=True)
        except ValueError as error:
            raise ContradictionInputError(str(error)) from None
        if len(values) == 0:
            raise ContradictionInputError(f"`{name}` is empty: there is nothing to score")
    try:
        check_same_length(predictions=predictions, references=references)
    except ValueError as error:
        raise ContradictionInputError(str(error)) from None
    predictions, references = list(predictions), list(references)
    strings = [isinstance(p, str) for p in predictions]
    if not allow_mixed and any(strings) and not all(strings):
        first_string, first_other = strings.index(True), strings.index(False)
        raise ContradictionInputError(
            f"`predictions` mixes raw strings (e.g. [{first_string}]) and "
            f"{type(predictions[first_other]).__name__}s (e.g. [{first_other}]); give all records or all "
            "strings"
        )
    gold = [check_record("references", i, record) for i, record in enumerate(references)]
    predictions = [
        p if is_string else check_record("predictions", i, p)
        for i, (p, is_string) in enumerate(zip(predictions, strings))
    ]
    return predictions, gold


_UNPARSEABLE = {
    "conflict_type": None,
    "axes": [],
    "dominant_confounder": None,
    "reconciliation": "",
    "evidence_a": "",
    "evidence_b": "",
}


def _f1(tp: np.ndarray, predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
    denominator = predicted + actual
    return np.divide(2.0 * tp, denominator, out=np.zeros(np.shape(tp), np.float64), where=denominator > 0)


def _normalise_spans(texts: list[str]) -> list[str]:
    return [" ".join(re.findall(r"\w+", text.lower())) for text in texts]


def span_token_f1(predictions: list[str], references: list[str]) -> np.ndarray:
    """Token F1 per span pair with multiset overlap, from two count matrices over one vocabulary."""
    from sklearn.feature_extraction.text import CountVectorizer

    n = len(predictions)
    predicted_norm, reference_norm = _normalise_spans(predictions), _normalise_spans(references)
    if not any(predicted_norm) and not any(reference_norm):
        return np.ones(n)
    vectorizer = CountVectorizer(token_pattern=r"\S+", lowercase=False).fit(predicted_norm + reference_norm)
    predicted = vectorizer.transform(predicted_norm)
    reference = vectorizer.transform(reference_norm)
    overlap = np.asarray(predicted.minimum(reference).sum(axis=1)).ravel()
    sizes = np.asarray(predicted.sum(axis=1)).ravel() + np.asarray(reference.sum(axis=1)).ravel()
    return np.where(sizes == 0, 1.0, np.divide(2.0 * overlap, sizes, out=np.zeros(n), where=sizes > 0))


def contextual_contradiction(predictions, references) -> dict:
    """All BioDivergence scores (see the module docstring for every formula).

    >>> gold = [{"conflict_type": "contextual_contradiction", "axes": ["population", "geography"],
    ...          "dominant_confounder": "population", "reconciliation": "different populations",
    ...          "evidence_a": "drug A helps adults", "evidence_b": "drug A fails in children"},
    ...         {"conflict_type": "no_conflict", "axes": [], "dominant_confounder": "none",
    ...          "reconciliation": "they agree", "evidence_a": "x rises", "evidence_b": "x rises too"}]
    >>> pred = [dict(gold[0], axes=["population"]), "not JSON"]
    >>> scores = contextual_contradiction(pred, gold)
    >>> scores["accuracy"], scores["contextual_contradiction_f1"], round(scores["axis_micro_f1"], 4)
    (0.5, 1.0, 0.6667)
    """
    predictions, gold = check_inputs(predictions, references)
    n = len(gold)
    pred = [(parse_prediction(p) or _UNPARSEABLE) if isinstance(p, str) else p for p in predictions]
    parsed = np.array([p is not _UNPARSEABLE for p in pred])

    class_index = {name: i for i, name in enumerate(CONFLICT_TYPE_IDS)}
    n_classes = len(CONFLICT_TYPE_IDS)
    gold_class = np.array([class_index[g["conflict_type"]] for g in gold])
    pred_class = np.array([class_index.get(p["conflict_type"], -1) for p in pred])  # -1 = unparseable
    correct = pred_class == gold_class
    tp = np.bincount(gold_class[correct], minlength=n_classes)
    predicted_count = np.bincount(pred_class[pred_class >= 0], minlength=n_classes)
    gold_count = np.bincount(gold_class, minlength=n_classes)
    class_f1 = _f1(tp, predicted_count, gold_count)
    present = gold_count > 0
    shown = present | (predicted_count > 0)

    axis_index = {name: i for i, name in enumerate(AXIS_IDS)}
    gold_axes = np.zeros((n, len(AXIS_IDS)), bool)
    pred_axes = np.zeros((n, len(AXIS_IDS)), bool)
    rows = [(i, axis_index[a]) for i, g in enumerate(gold) for a in g["axes"]]
    if rows:
        gold_axes[tuple(np.array(rows).T)] = True
    rows = [(i, axis_index[a]) for i, p in enumerate(pred) for a in p["axes"]]
    if rows:
        pred_axes[tuple(np.array(rows).T)] = True
    axis_tp = (gold_axes & pred_axes).sum(axis=0)
    axis_f1 = _f1(axis_tp, pred_axes.sum(axis=0), gold_axes.sum(axis=0))
    axes_present = gold_axes.any(axis=0)
    micro = _f1(np.array(axis_tp.sum()), np.array(pred_axes.sum()), np.array(gold_axes.sum()))

    confounder_correct = np.array(
        [p["dominant_confounder"] == g["dominant_confounder"] for p, g in zip(pred, gold)]
    )
    reconciliation = rouge_l([p["reconciliation"] for p in pred], [g["reconciliation"] for g in gold])["f1"]
    predicted_spans = [p[key] for key in SPAN_KEYS for p in pred]
    gold_spans = [g[key] for key in SPAN_KEYS for g in gold]
    span_f1 = span_token_f1(predicted_spans, gold_spans)
    exact = np.array(_normalise_spans(predicted_spans)) == np.array(_normalise_spans(gold_spans))
    exact &= np.tile(parsed, len(SPAN_KEYS))  # an unparseable answer has no span, even against an empty gold
    span_f1 = np.where(np.tile(parsed, len(SPAN_KEYS)), span_f1, 0.0)

    return {
        "accuracy": float(correct.mean()),
        "macro_f1": float(class_f1[present].mean()),
        "contextual_contradiction_f1": float(class_f1[class_index[CONTEXTUAL_CONTRADICTION]]),
        "per_class_f1": {CONFLICT_TYPE_IDS[i]: float(class_f1[i]) for i in np.flatnonzero(shown)},
        "axis_micro_f1": float(micro),
        "axis_macro_f1": float(axis_f1[axes_present].mean()) if axes_present.any() else 0.0,
        "confounder_accuracy": float(confounder_correct.mean()),
        "reconciliation_rougeL": float(reconciliation.mean()),
        "evidence_f1": float(span_f1.mean()),
        "evidence_exact_match": float(exact.mean()),
        "num_unparseable": int((~parsed).sum()),
        "num_examples": n,
    }
