"""TOFU forget quality (KS-test p-value of truth ratios), as an ``evaluate`` module."""

import datasets
import evaluate

# Imported as a module, not a class: evaluate takes the first Metric class in this file's namespace.
from medunlearn.metrics import evaluate_base
from medunlearn.metrics.forget_quality import forget_quality
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
Forget quality (TOFU): the p-value of a two-sample Kolmogorov-Smirnov test (scipy.stats.ks_2samp, two-sided)
between the truth ratios of the unlearned model and those of a model trained without the forget set, on the
same forget questions. Close to 1: the unlearned model is indistinguishable from one that never saw the data.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `float`): truth ratios of the unlearned model on the forget questions.
    references (`list` of `float`): truth ratios of the retain-only model on the same questions.
Returns:
    forget_quality (`float`): the KS p-value in [0, 1].
    ks_statistic (`float`): the KS statistic D in [0, 1].
Examples:
    >>> import medunlearn
    >>> fq = medunlearn.load_metric("forget_quality")
    >>> result = fq.compute(predictions=[0.1, 0.2, 0.3], references=[0.7, 0.8, 0.9])
    >>> result["ks_statistic"], round(result["forget_quality"], 4)  # exact p = 2 / C(6, 3)
    (1.0, 0.1)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ForgetQuality(evaluate_base.CheckedMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("float64"), "references": datasets.Value("float64")}
            ),
            reference_urls=["https://arxiv.org/abs/2401.06121"],
        )

    def _compute(self, predictions, references):
        # Checked here so that errors name this module's arguments, not the pure function's.
        return forget_quality(
            as_float_array("predictions", predictions), as_float_array("references", references)
        )
