"""Answer forgetting effectiveness (AFE) of AMNESIA, as an ``evaluate`` module."""

import datasets
import evaluate

# Imported as a module, not a class: evaluate takes the first Metric class in this file's namespace.
from medunlearn.metrics import evaluate_base
from medunlearn.metrics.answer_forgetting import answer_forgetting
from medunlearn.metrics.similarity import answer_similarity
from medunlearn.metrics.validation import check_same_length, check_sequence

_CITATION = """\
@misc{amnesia2026,
  title  = {AMNESIA: a benchmark for medical machine unlearning},
  note   = {arXiv:2605.30599. The AFE formula is not given in the paper; this one is medunlearn's.},
  year   = {2026}
}
"""

_DESCRIPTION = """\
Answer forgetting effectiveness (AFE) on the forget patients' questions:
AFE = clip(1 - mean(s_after) / mean(s_before), 0, 1), with s the similarity of the generated answer to the
gold answer (ROUGE-L F1 by default, optionally averaged with embedding cosine), after and before unlearning;
without answers from before unlearning, AFE = clip(1 - mean(s_after), 0, 1). NaN when mean(s_before) is 0
(nothing to forget). This definition is ours (medunlearn): the AMNESIA paper names the metric without its
formula.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): answers generated after unlearning.
    references (`list` of `str`): gold answers.
    before_predictions (`list` of `str`, *optional*): answers to the same questions generated before
        unlearning.
    use_embedding (`bool`, *optional*, default False): average ROUGE-L F1 with the all-MiniLM-L6-v2 cosine.
Returns:
    answer_forgetting (`float`): AFE in [0, 1] (NaN if nothing was known before).
    mean_similarity_after (`float`), mean_similarity_before (`float` or None).
Examples:
    >>> import medunlearn
    >>> afe = medunlearn.load_metric("answer_forgetting")
    >>> result = afe.compute(
    ...     predictions=["the right artery", "no idea"],
    ...     references=["the right coronary artery", "troponin was 2.4"],
    ...     before_predictions=["the right coronary artery", "troponin was 2.4"],
    ... )
    >>> round(result["mean_similarity_after"], 4), round(result["answer_forgetting"], 4)
    (0.4286, 0.5714)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class AnswerForgetting(evaluate_base.CheckedMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            reference_urls=["https://arxiv.org/abs/2605.30599"],
        )

    def _compute(self, predictions, references, before_predictions=None, use_embedding=False):
        after = answer_similarity(predictions, references, use_embedding=use_embedding)["similarity"]
        before = None
        if before_predictions is not None:
            check_sequence("before_predictions", before_predictions)
            check_same_length(references=references, before_predictions=before_predictions)
            before = answer_similarity(before_predictions, references, use_embedding=use_embedding)[
                "similarity"
            ]
        result = answer_forgetting(after, before)
        return {
            "answer_forgetting": result["answer_forgetting"],
            "mean_similarity_after": result["mean_after"],
            "mean_similarity_before": result["mean_before"],
        }
