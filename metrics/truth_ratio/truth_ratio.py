"""TOFU truth ratio, as an ``evaluate`` module (its per-question values feed ``forget_quality``)."""

import datasets
import evaluate

# Imported as a module, not a class: evaluate takes the first Metric class in this file's namespace.
from medunlearn.metrics import evaluate_base
from medunlearn.metrics.truth_ratio import truth_ratio, truth_ratio_score
from medunlearn.metrics.validation import as_float_array

_CITATION = """\
@article{maini2024tofu,
  title   = {TOFU: A Task of Fictitious Unlearning for LLMs},
  author  = {Maini, Pratyush and Feng, Zhili and Schwarzschild, Avi and Lipton, Zachary C. and
             Kolter, J. Zico},
  journal = {arXiv preprint arXiv:2401.06121},
  year    = {2024}
}
"""

_DESCRIPTION = """\
Truth ratio (TOFU): per question, the mean length-normalised probability of perturbed (wrong) answers divided
by that of a paraphrased correct answer. Below 1 the model prefers the correct answer. Aggregated as
mean(min(r, 1/r)) for forget sets ("closer_to_1_better") or mean(max(0, 1 - r)) for retain sets
("true_better").
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `float`): per question, the length-normalised probabilities
        exp(mean log p) of its perturbed answers (the same number for every question).
    references (`list` of `float`): per question, that of the paraphrased correct answer.
    mode (`str`, *optional*, default "closer_to_1_better"): or "true_better".
Returns:
    truth_ratio (`float`): the aggregate in [0, 1].
    per_example (`list` of `float`): the ratio per question (pass these to `forget_quality`).
Examples:
    >>> import medunlearn
    >>> tr = medunlearn.load_metric("truth_ratio")
    >>> result = tr.compute(predictions=[[0.2, 0.3], [0.4, 0.2]], references=[0.5, 0.1])
    >>> [round(ratio, 4) for ratio in result["per_example"]], round(result["truth_ratio"], 4)
    ([0.5, 3.0], 0.4167)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class TruthRatio(evaluate_base.CheckedMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("float64")),
                    "references": datasets.Value("float64"),
                }
            ),
            reference_urls=["https://arxiv.org/abs/2401.06121"],
        )

    def _compute(self, predictions, references, mode="closer_to_1_better"):
        # Checked here so that errors name this module's arguments, not the pure function's.
        perturbed = as_float_array("predictions", predictions, ndim=2)
        paraphrased = as_float_array("references", references)
        ratios = truth_ratio(paraphrased, perturbed)
        return {"truth_ratio": truth_ratio_score(ratios, mode), "per_example": ratios.tolist()}
