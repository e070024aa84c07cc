"""Memorisation statistics from one teacher-forced pass (Prob, exact memorisation, extraction strength, token
entropy), as an ``evaluate`` module."""

import datasets
import evaluate
import numpy as np

# Imported as a module, not a class: evaluate takes the first Metric class in this file's namespace.
from medunlearn.metrics import evaluate_base
from medunlearn.metrics.probability import (
    answer_probability,
    exact_memorization,
    extraction_strength,
    mean_token_entropy,
    pad_token_values,
)
from medunlearn.metrics.validation import check_same_length, check_sequence

_CITATION = """\
@inproceedings{tirumala2022memorization,
  title     = {Memorization Without Overfitting: Analyzing the Training Dynamics of Large Language Models},
  author    = {Tirumala, Kushal and Markosyan, Aram H. and Zettlemoyer, Luke and Aghajanyan, Armen},
  booktitle = {NeurIPS},
  year      = {2022}
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
Memorisation of gold answers under teacher forcing. Exact memorisation: share of answer tokens the model's
greedy next-token prediction gets right. Extraction strength: 1 - k/|y| with k the shortest prefix after which
the greedy predictions reproduce the rest of the answer. With per-token log-probs, TOFU's length-normalised
answer probability exp(mean log p); with per-token predictive entropies, their mean.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `int`): per answer, the model's greedy (argmax) token at each answer
        position under teacher forcing.
    references (`list` of `list` of `int`): per answer, the gold answer token ids (same lengths).
    token_logprobs (`list` of `list` of `float`, *optional*): log p of each gold answer token.
    token_entropy (`list` of `list` of `float`, *optional*): entropy (nats) of the next-token distribution.
Returns:
    exact_memorization, extraction_strength (`float`): means over answers, in [0, 1].
    answer_probability (`float`): mean Prob, only with `token_logprobs`.
    mean_token_entropy (`float`): only with `token_entropy`.
    per_example (`dict` of `list`): the per-answer values.
Examples:
    >>> import math, medunlearn
    >>> memorization = medunlearn.load_metric("memorization")
    >>> result = memorization.compute(
    ...     predictions=[[5, 9, 7, 8], [1, 2]],
    ...     references=[[4, 6, 7, 8], [1, 2]],
    ...     token_logprobs=[[math.log(0.5)] * 4, [math.log(0.25), math.log(1.0)]],
    ... )
    >>> result["per_example"]["exact_memorization"], result["per_example"]["extraction_strength"]
    ([0.5, 1.0], [0.5, 1.0])
    >>> result["per_example"]["answer_probability"]
    [0.5, 0.5]
"""


def _matches(predictions, references):
    check_sequence("predictions", predictions)
    check_sequence("references", references)
    check_same_length(predictions=predictions, references=references)
    for index, (predicted, gold) in enumerate(zip(predictions, references)):
        if predicted is None or gold is None or len(predicted) != len(gold):
            raise ValueError(
                f"`predictions`[{index}] and `references`[{index}] must be token lists of one length"
            )
        if len(gold) == 0:
            raise ValueError(f"`references`[{index}] has no answer token")
    predicted, mask = pad_token_values(predictions, fill=-1, dtype=np.int64)
    gold, _ = pad_token_values(references, fill=-2, dtype=np.int64)
    return predicted == gold, mask


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Memorization(evaluate_base.CheckedMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("int64")),
                    "references": datasets.Sequence(datasets.Value("int64")),
                }
            ),
            reference_urls=["https://arxiv.org/abs/2205.10770", "https://arxiv.org/abs/2401.06121"],
        )

    def _compute(self, predictions, references, token_logprobs=None, token_entropy=None):
        matches, mask = _matches(predictions, references)
        per_example = {
            "exact_memorization": exact_memorization(matches, mask),
            "extraction_strength": extraction_strength(matches, mask),
        }
        for name, rows, statistic in (
            ("answer_probability", token_logprobs, answer_probability),
            ("mean_token_entropy", token_entropy, mean_token_entropy),
        ):
            if rows is None:
                continue
            argument = "token_logprobs" if name == "answer_probability" else "token_entropy"
            check_sequence(argument, rows)
            values, row_mask = pad_token_values(rows)
            if values.shape[0] != mask.shape[0] or (row_mask.sum(axis=1) != mask.sum(axis=1)).any():
                raise ValueError(f"`{argument}` must have one value per answer token of `references`")
            per_example[name] = statistic(values, row_mask)
        output = {name: float(values.mean()) for name, values in per_example.items()}
        output["per_example"] = {name: values.tolist() for name, values in per_example.items()}
        return output
