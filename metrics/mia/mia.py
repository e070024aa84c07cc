"""Membership-inference attacks (LOSS, zlib, Min-K%, Min-K%++) as AUCs, and privleak, as an ``evaluate``
module."""

import datasets
import evaluate
import numpy as np

# Imported as a module, not a class: evaluate takes the first Metric class in this file's namespace.
from medunlearn.metrics import evaluate_base
from medunlearn.metrics.mia import (
    loss_score,
    mia_auc,
    min_k_plus_plus_score,
    min_k_score,
    privleak,
    zlib_score,
)
from medunlearn.metrics.probability import pad_token_values
from medunlearn.metrics.validation import check_sequence

_CITATION = """\
@inproceedings{shi2025muse,
  title     = {MUSE: Machine Unlearning Six-Way Evaluation for Language Models},
  author    = {Shi, Weijia and Lee, Jaechan and Huang, Yangsibo and others},
  booktitle = {ICLR},
  year      = {2025}
}
@inproceedings{shi2024mink,
  title     = {Detecting Pretraining Data from Large Language Models},
  author    = {Shi, Weijia and Ajith, Anirudh and Xia, Mengzhou and others},
  booktitle = {ICLR},
  year      = {2024}
}
@article{zhang2024minkpp,
  title   = {Min-K%++: Improved Baseline for Detecting Pre-Training Data from Large Language Models},
  author  = {Zhang, Jingyang and Sun, Jingwei and Yeats, Eric and others},
  journal = {arXiv preprint arXiv:2404.02936},
  year    = {2024}
}
"""

_DESCRIPTION = """\
Membership inference on the forget set (members) against holdout questions (non-members). Each attack gives a
loss-like score per text (higher = less likely a member): LOSS (mean NLL), zlib (mean NLL / zlib-compressed
length), Min-K% (mean NLL of the k% least likely tokens) and Min-K%++ (minus the mean of the k% lowest
log-probs standardised by the model's next-token distribution). Each AUC (sklearn roc_auc_score) tells
non-members from members: 0.5 = indistinguishable, 1 = the forget set is fully recognisable. Given the AUCs of
a model retrained without the forget set, MUSE's privleak =
((1 - AUC) - (1 - AUC_retrained)) / (1 - AUC_retrained) * 100: 0 is ideal, negative = under-unlearning.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `float`): per text, the log-prob of each of its tokens (teacher forcing).
    references (`list` of `int`): 1 for members (forget set), 0 for non-members (holdout).
    texts (`list` of `str`, *optional*): the texts, for the zlib attack.
    vocab_mean, vocab_std (`list` of `list` of `float`, *optional*): mean and standard deviation of log p over
        the vocabulary at each token position, for Min-K%++.
    k (`float`, *optional*, default 0.4): share of tokens used by Min-K% and Min-K%++.
    retrained_auc (`dict`, *optional*): attack name -> AUC of a retrained model, for privleak.
Returns:
    loss_auc, min_k_auc (`float`); zlib_auc, min_k_plus_plus_auc (`float`) when their inputs are given;
    privleak_<attack> (`float`, percent) for each attack in `retrained_auc`.
Examples:
    >>> import medunlearn
    >>> mia = medunlearn.load_metric("mia")
    >>> result = mia.compute(
    ...     predictions=[[-0.1, -0.2], [-0.3, -0.1], [-2.0, -3.0], [-1.5, -2.5]],
    ...     references=[1, 1, 0, 0],
    ...     retrained_auc={"loss": 0.5},
    ... )
    >>> result["loss_auc"], result["min_k_auc"], result["privleak_loss"]
    (1.0, 1.0, -100.0)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Mia(evaluate_base.CheckedMetric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("float64")),
                    "references": datasets.Value("int64"),
                }
            ),
            reference_urls=["https://arxiv.org/abs/2407.06460", "https://arxiv.org/abs/2404.02936"],
        )

    def _compute(
        self, predictions, references, texts=None, vocab_mean=None, vocab_std=None, k=0.4, retrained_auc=None
    ):
        check_sequence("predictions", predictions)
        check_sequence("references", references)
        labels = np.asarray(references)
        if not np.isin(labels, (0, 1)).all():
            raise ValueError("`references` must be 1 (member) or 0 (non-member)")
        if labels.min() == labels.max():
            raise ValueError("`references` must contain both members (1) and non-members (0)")
        logprobs, mask = pad_token_values(predictions)
        if np.isnan(logprobs[mask]).any():
            raise ValueError(
                f"`predictions`[{int(np.argwhere(np.isnan(logprobs) & mask)[0, 0])}] holds a NaN log-prob"
            )
        scores = {"loss": loss_score(logprobs, mask), "min_k": min_k_score(logprobs, mask, k=k)}
        if texts is not None:
            scores["zlib"] = zlib_score(logprobs, mask, texts)
        if (vocab_mean is None) != (vocab_std is None):
            raise ValueError("`vocab_mean` and `vocab_std` must be given together")
        if vocab_mean is not None:
            mean, _ = pad_token_values(vocab_mean)
            std, _ = pad_token_values(vocab_std, fill=1.0)
            if mean.shape != logprobs.shape or std.shape != logprobs.shape:
                raise ValueError(
                    "`vocab_mean` and `vocab_std` must have one value per token of `predictions`"
                )
            scores["min_k_plus_plus"] = min_k_plus_plus_score(logprobs, mask, mean, std, k=k)
        members = labels == 1
        output = {f"{name}_auc": mia_auc(score[members], score[~members]) for name, score in scores.items()}
        for name, reference_auc in (retrained_auc or {}).items():
            if f"{name}_auc" not in output:
                raise ValueError(
                    f"`retrained_auc` names {name!r}, which was not computed; have {sorted(scores)}"
                )
            output[f"privleak_{name}"] = privleak(output[f"{name}_auc"], reference_auc)
        return output
