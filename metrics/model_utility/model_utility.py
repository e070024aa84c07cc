"""Model utility (MU) of AMNESIA, and TOFU's harmonic-mean form, as an ``evaluate`` module."""

import datasets
import evaluate

# Imported as a module, not a class: evaluate takes the first Metric class in this file's namespace.
from medunlearn.metrics import evaluate_base
from medunlearn.metrics.model_utility import harmonic_mean_utility, model_utility
from medunlearn.metrics.similarity import answer_similarity

_CITATION = """\
@misc{amnesia2026,
  title  = {AMNESIA: a benchmark for medical machine unlearning},
  note   = {arXiv:2605.30599. The MU formula is not given in the paper; this one is medunlearn's.},
  year   = {2026}
}
@article{maini2024tofu,
  title   = {TOFU: A Task of Fictitious Unlearning for LLMs},
  author  = {Maini, Pratyush and Feng, Zhili and Schwarzschild, Avi and Lipton, Zachary C. and
             Kolter, J. Zico},
  journal = {arXiv preprint arXiv:2401.06121},
  year    = {2024}
}
"""

_DESCRIPTION = """\
Model utility (MU) on the retained patients' seen questions: the mean over QA types (factual, reasoning) of
the mean similarity s between generated and gold answers (ROUGE-L F1 by default, optionally averaged with
embedding cosine), so each QA type weighs the same. This definition is ours (medunlearn): the AMNESIA paper
names the metric without its formula. Optionally also TOFU's model utility, the harmonic mean of given utility
statistics.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): generated answers.
    references (`list` of `str`): gold answers.
    qa_types (`list` of `str`, *optional*): QA type per question; without it, MU is the plain mean.
    use_embedding (`bool`, *optional*, default False): average ROUGE-L F1 with the all-MiniLM-L6-v2 cosine.
    tofu_statistics (`list` of `float`, *optional*): statistics for TOFU's harmonic-mean model utility.
Returns:
    model_utility (`float`): MU in [0, 1].
    per_type (`dict`): mean s per QA type.
    similarity (`list` of `float`): s per answer.
    harmonic_mean_utility (`float`): only with `tofu_statistics`.
Examples:
    >>> import medunlearn
    >>> mu = medunlearn.load_metric("model_utility")
    >>> result = mu.compute(
    ...     predictions=["troponin was 2.4", "a stent", "pneumonia"],
    ...     references=["troponin was 2.4", "a stent was placed", "lung cancer"],
    ...     qa_types=["factual", "factual", "reasoning"],
    ...     tofu_statistics=[0.5, 1.0],
    ... )
    >>> result["per_type"], round(result["model_utility"], 4), round(result["harmonic_mean_utility"], 4)
    ({'factual': 0.8333333333333333, 'reasoning': 0.0}, 0.4167, 0.6667)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ModelUtility(evaluate_base.CheckedMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            reference_urls=["https://arxiv.org/abs/2605.30599", "https://arxiv.org/abs/2401.06121"],
        )

    def _compute(self, predictions, references, qa_types=None, use_embedding=False, tofu_statistics=None):
        similarity = answer_similarity(predictions, references, use_embedding=use_embedding)["similarity"]
        result = model_utility(similarity, qa_types)
        output = {
            "model_utility": result["model_utility"],
            "per_type": result["per_type"],
            "similarity": similarity.tolist(),
        }
        if tofu_statistics is not None:
            output["harmonic_mean_utility"] = harmonic_mean_utility(tofu_statistics)
        return output
