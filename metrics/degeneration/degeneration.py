"""Degeneration score (DS) of AMNESIA and its components, as an ``evaluate`` module."""

import datasets
import evaluate

# Imported as a module, not a class: evaluate takes the first Metric class in this file's namespace.
from medunlearn.metrics import evaluate_base
from medunlearn.metrics.degeneration import DegenerationConfig, degeneration, vocabulary_from_texts

_CITATION = """\
@misc{amnesia2026,
  title  = {AMNESIA: a benchmark for medical machine unlearning},
  note   = {arXiv:2605.30599. The degeneration score's exact formula is not given in the paper;
            this one is medunlearn's.},
  year   = {2026}
}
"""

_DESCRIPTION = """\
Degeneration score (DS): the share of generated answers that are degenerate, i.e. empty, or repetitive (share
of repeated word n-grams >= threshold), or mostly non-words (share of tokens that are not words, or not in a
vocabulary built from reference texts, >= threshold), or of very low token entropy (normalised entropy of the
token frequencies < threshold, judged only on answers of at least `min_tokens_for_entropy` tokens). The rate
of each component is reported too. This definition is ours (medunlearn): the AMNESIA paper names the metric
without its formula. Report it next to the leakage score.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): generated answers.
    vocabulary_texts (`list` of `str`, *optional*): texts whose words make the vocabulary (e.g. the gold
        answers and questions); without it any alphabetic token of at most `max_word_length` letters is a
        word.
    ngram_size, repetition_threshold, non_word_threshold, entropy_threshold, min_tokens_for_entropy,
    max_word_length (*optional*): override the `DegenerationConfig` defaults (3, 0.5, 0.5, 0.5, 8, 30).
Returns:
    degeneration_score (`float`): DS in [0, 1].
    empty_rate, repetition_rate, non_word_rate, low_entropy_rate (`float`): share of answers over each
        threshold.
    degenerate (`list` of `bool`), repetition, non_word, token_entropy (`list` of `float`): per answer.
Examples:
    >>> import medunlearn
    >>> ds = medunlearn.load_metric("degeneration")
    >>> result = ds.compute(predictions=[
    ...     "The troponin level was 2.4 ng/mL.",
    ...     "",
    ...     "troponin troponin troponin troponin troponin",
    ... ])
    >>> round(result["degeneration_score"], 4), result["degenerate"]
    (0.6667, [False, True, True])
    >>> ds.compute(predictions=["zxq vbnm troponin"], vocabulary_texts=["The troponin was high."])["non_word"]
    [0.6666666666666666]
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Degeneration(evaluate_base.CheckedMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string")}),
            reference_urls=["https://arxiv.org/abs/2605.30599"],
        )

    # Named parameters, not **kwargs (evaluate's module convention); their defaults are DegenerationConfig's.
    def _compute(
        self,
        predictions,
        vocabulary_texts=None,
        ngram_size=DegenerationConfig.ngram_size,
        repetition_threshold=DegenerationConfig.repetition_threshold,
        non_word_threshold=DegenerationConfig.non_word_threshold,
        entropy_threshold=DegenerationConfig.entropy_threshold,
        min_tokens_for_entropy=DegenerationConfig.min_tokens_for_entropy,
        max_word_length=DegenerationConfig.max_word_length,
    ):
        config = DegenerationConfig(
            ngram_size=ngram_size,
            repetition_threshold=repetition_threshold,
            non_word_threshold=non_word_threshold,
            entropy_threshold=entropy_threshold,
            min_tokens_for_entropy=min_tokens_for_entropy,
            max_word_length=max_word_length,
        )
        vocabulary = None if vocabulary_texts is None else vocabulary_from_texts(vocabulary_texts)
        result = degeneration(predictions, vocabulary=vocabulary, config=config)
        parts = result["per_example"]
        return {
            "degeneration_score": result["degeneration_score"],
            "empty_rate": result["empty_rate"],
            "repetition_rate": result["repetition_rate"],
            "non_word_rate": result["non_word_rate"],
            "low_entropy_rate": result["low_entropy_rate"],
            "degenerate": parts["degenerate"].tolist(),
            "repetition": parts["repetition"].tolist(),
            "non_word": parts["non_word"].tolist(),
            "token_entropy": parts["token_entropy"].tolist(),
        }
