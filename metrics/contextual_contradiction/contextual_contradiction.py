"""BioDivergence contextual-contradiction scores (conflict type, axes, confounder, reconciliation, evidence),
as an ``evaluate`` module."""

import datasets
import evaluate

# Imported as a module, not a class: evaluate takes the first Metric class in this file's namespace.
from medunlearn.metrics import evaluate_base
from medunlearn.metrics.contextual_contradiction import check_inputs, contextual_contradiction

_CITATION = """\
@misc{biodivergence2026,
  title  = {BioDivergence: contextual contradictions in biomedical abstracts},
  note   = {arXiv:2606.11208. The score formulas are not given in the paper; these are medunlearn's.},
  year   = {2026}
}
"""

_DESCRIPTION = """\
Scores a BioDivergence system on the four primary outputs of a claim pair and, apart, on the scoped evidence
spans: conflict-type accuracy, macro-F1 over the classes present in the references and per-class F1;
contextual-contradiction F1 (binary F1 of that class); divergence-axis micro- and macro-F1 (multi-label over
13 axes); dominant-confounder accuracy; reconciliation ROUGE-L F1; evidence-span token F1 and exact match.
A prediction is a record or a model's raw JSON text, parsed strictly; text that does not parse counts as
wrong on every output and is never dropped. The formulas are ours (medunlearn); see the metric card.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `dict` or `list` of `str`): per pair, a record with `conflict_type` (class id),
        `axes` (list of axis ids, `[]` for none) and optionally `dominant_confounder` (axis id or "none", the
        default), `reconciliation`, `evidence_a`, `evidence_b` (strings, default ""); or the model's raw
        JSON answer as a string (all records or all strings, not a mix).
    references (`list` of `dict`): the gold records, same keys. Bad input (a missing required key,
        `axes=None`, an unknown label, empty lists, a mix of records and strings) raises
        `ContradictionInputError` (a `ValueError`) naming the argument, index and field.
Returns:
    accuracy (`float`): conflict-type accuracy, in [0, 1].
    macro_f1 (`float`): mean per-class F1 over the classes present in the references.
    contextual_contradiction_f1 (`float`): F1 of the contextual_contradiction class.
    per_class_f1 (`dict`): F1 per class present in the references or the predictions.
    axis_micro_f1 (`float`), axis_macro_f1 (`float`): divergence-axis F1, pooled over cells / averaged over
        the axes present in the references.
    confounder_accuracy (`float`): dominant-confounder accuracy ("none" matches "none").
    reconciliation_rougeL (`float`): mean ROUGE-L F1 of the reconciliation texts.
    evidence_f1 (`float`), evidence_exact_match (`float`): evidence-span token F1 and exact match.
    num_unparseable (`int`): string predictions that did not parse (scored as wrong).
    num_examples (`int`): pairs scored.
Examples:
    >>> import medunlearn
    >>> metric = medunlearn.load_metric("contextual_contradiction")
    >>> gold = {"conflict_type": "contextual_contradiction", "axes": ["population", "geography"],
    ...         "dominant_confounder": "population", "reconciliation": "different age groups",
    ...         "evidence_a": "drug A lowers mortality in adults", "evidence_b": "drug A fails in children"}
    >>> other = {"conflict_type": "no_conflict", "axes": [], "dominant_confounder": "none",
    ...          "reconciliation": "they agree", "evidence_a": "x rises", "evidence_b": "x rises too"}
    >>> predicted = dict(gold, axes=["population"], reconciliation="different age groups studied")
    >>> result = metric.compute(predictions=[predicted, other], references=[gold, other])
    >>> result["accuracy"], result["macro_f1"], round(result["axis_micro_f1"], 4), result["axis_macro_f1"]
    (1.0, 1.0, 0.6667, 0.5)
    >>> round(result["reconciliation_rougeL"], 4)  # (6/7 + 1) / 2
    0.9286

    Raw model text is parsed strictly; what does not parse is wrong, never dropped:

    >>> raw = ['{"conflict_type": "contextual_contradiction", "axes": ["population"], '
    ...        '"dominant_confounder": "population", "reconciliation": "different age groups"}',
    ...        'I think they agree.']
    >>> result = metric.compute(predictions=raw, references=[gold, other])
    >>> result["accuracy"], result["contextual_contradiction_f1"], result["num_unparseable"]
    (0.5, 1.0, 1)
"""

_RECORD = {
    "conflict_type": datasets.Value("string"),
    "axes": datasets.Sequence(datasets.Value("string")),
    "dominant_confounder": datasets.Value("string"),
    "reconciliation": datasets.Value("string"),
    "evidence_a": datasets.Value("string"),
    "evidence_b": datasets.Value("string"),
}


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ContextualContradiction(evaluate_base.CheckedMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features({"predictions": dict(_RECORD), "references": dict(_RECORD)}),
                datasets.Features({"predictions": datasets.Value("string"), "references": dict(_RECORD)}),
            ],
            reference_urls=["https://arxiv.org/abs/2606.11208"],
        )

    def _check_inputs(self, predictions, references):
        # Before evaluate infers features from the first item: a missing optional key, `axes=None`, an empty
        # list or records mixed with strings get a ContradictionInputError naming the index and field.
        return check_inputs(predictions, references, allow_mixed=False)

    def _compute(self, predictions, references):
        return contextual_contradiction(list(predictions), list(references))
