"""The hidden-state probe of the disease category, its baselines and its section of an attack report
(docs/attacks.md, "Probing").

A linear probe on hidden states [ours, after Lynch et al. arXiv 2402.16835]: mean-pooled hidden states of the
forget patients' questions, rendered as the chat prompts the model sees before answering (never their
answers, which often name the diagnosis: :func:`probe_inputs`), a logistic regression for their disease
category, accuracy by patient-grouped stratified k-fold cross-validation (:func:`hidden_state_probe`).

Questions name tests and findings, so the disease can be read off the question text by a model that never
saw the patients. The probe is therefore reported beside a **baseline** on the same rows and folds
(:func:`probe_section`): the same probe on the retain model (trained without the forget patients) when one
is given, otherwise a text-only classifier of the questions (:func:`text_only_probe`). What unlearning left is
read above that baseline [ours]:

    retained share above baseline = (acc_unlearned − acc_baseline) / (acc_before − acc_baseline)

undefined (``None``) when the before model's lead over the baseline is within sampling noise [ours]:

    acc_before − acc_baseline < 2 · sqrt(2 · p̄ · (1 − p̄) / n),   p̄ = (acc_before + acc_baseline) / 2

twice the binomial standard deviation of a difference of two accuracies on n questions
(:func:`above_baseline_noise`); then the probe found no memory of the patients to retain in the first place,
and the ratio of two noisy differences would be noise (|share| > 1 in 40% of no-memory simulations with the
older 1 / n threshold).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from medunlearn.errors import InputError
from medunlearn.evaluation.populations import FORGET_POPULATIONS


def probe_inputs(
    examples: pd.DataFrame, populations: Sequence[str] | None = FORGET_POPULATIONS, tokenizer=None
) -> tuple[list[str], list[str], list[str]]:
    """``(texts, labels, groups)`` for :func:`hidden_state_probe` from an examples table: the questions of the
    rows of ``populations`` (the forget patients' seen and holdout QA by default; ``None``: every row, for a
    table already filtered), their ``disease`` and their ``patient_id``. The answers are never read: they
    often name the diagnosis, and a probe of them would read the disease off the input, not off what the
    model retained.

    With ``tokenizer`` the questions are rendered as the model's chat prompts (what it sees before answering;
    probe them with ``add_special_tokens=False``, the template adds its own). A disease-level forget set holds
    one disease only: add a retained population (``retain_out_of_disease``) to give the probe two classes.
    """
    for column in ("question", "disease", "patient_id", *(() if populations is None else ("population",))):
        if column not in examples:
            raise InputError(f"the examples lack column {column!r}")
    if populations is None:
        rows = examples
        if rows.empty:
            raise InputError("the examples hold no rows to probe")
    else:
        rows = examples[examples["population"].isin(list(populations))]
        if rows.empty:
            raise InputError(f"the examples hold no rows of population(s) {', '.join(populations)}")
    texts = rows["question"].astype(str).tolist()
    if tokenizer is not None:
        from medunlearn.chat import render_prompts

        texts = render_prompts(tokenizer, texts)
    return texts, rows["disease"].astype(str).tolist(), rows["patient_id"].astype(str).tolist()


def hidden_state_features(
    model,
    tokenizer,
    texts: Sequence[str],
    layer: int = -1,
    batch_size: int = 16,
    max_length: int | None = 512,
    add_special_tokens: bool = True,
) -> np.ndarray:
    """Mean-pooled hidden states of ``texts`` at ``layer`` (``hidden_states[layer]``: 0 = embeddings, -1 =
    the last layer), one ``float32`` row per text, in order.

    Texts are tokenised as they are (with the tokenizer's special tokens unless ``add_special_tokens`` is
    False, for texts a chat template rendered), cut at ``max_length`` tokens, batched by length and padded
    on the right, so a text's real tokens see the same positions as alone; pads are left out of the mean
    through the attention mask. The model is put in eval mode and restored.
    """
    import torch

    from medunlearn.generation import model_device, pad_batch

    texts = [str(text) for text in texts]
    if not texts:
        raise InputError("no texts to probe")
    if batch_size < 1:
        raise InputError(f"`batch_size` must be at least 1, got {batch_size}")
    n_states = model.config.num_hidden_layers + 1
    if not -n_states <= layer < n_states:
        raise InputError(
            f"`layer` {layer} out of range: the model has {n_states} hidden states (0 = embeddings)"
        )
    ids = tokenizer(
        texts, add_special_tokens=add_special_tokens, truncation=max_length is not None, max_length=max_length
    )
    ids = ids["input_ids"]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    order = np.argsort([-len(sequence) for sequence in ids], kind="stable")
    features = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    device = model_device(model)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                index = order[start : start + batch_size]
                input_ids, attention_mask = pad_batch([ids[i] for i in index], pad_id, "right")
                output = model(
                    input_ids=input_ids.to(device),
                    attention_mask=attention_mask.to(device),
                    output_hidden_states=True,
                )
                states = output.hidden_states[layer].float()
                weights = attention_mask.to(device=device, dtype=states.dtype)[:, :, None]
                pooled = (states * weights).sum(1) / weights.sum(1).clamp_min(1.0)
                features[index] = pooled.cpu().numpy()
    finally:
        model.train(was_training)
    return features


def _splits(labels: np.ndarray, groups, seed: int, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The cross-validation folds of :func:`probe_accuracy`: they depend on the labels, groups, seed and
    ``folds`` only, so every probe of the same rows (hidden states, text-only) is tested on the same folds."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    classes, counts = np.unique(labels, return_counts=True)
    if len(classes) < 2:
        raise InputError(f"the probe needs at least two classes, got {list(classes)}")
    if groups is not None:
        if len(groups) != len(labels):
            raise InputError(f"{len(groups)} group(s) for {len(labels)} label(s)")
        label_of_group = pd.Series(labels).groupby(groups).agg(lambda values: values.iloc[0])
        counts = label_of_group.value_counts().reindex(classes, fill_value=0).to_numpy()
    k = int(min(folds, counts.min()))
    if k < 2:
        unit = "group" if groups is not None else "row"
        raise InputError(
            f"every class needs at least 2 {unit}s for cross-validation (fewest: {counts.min()})"
        )
    if groups is None:
        return list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(labels, labels))
    splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    return list(splitter.split(labels, labels, groups))


def cross_validated_accuracy(
    inputs, labels, make_classifier, groups=None, seed: int = 0, folds: int = 5
) -> dict:
    """Accuracy of ``make_classifier()`` (a fresh scikit-learn classifier per fold) predicting ``labels``
    from ``inputs`` (rows: a feature matrix, or an array of texts), by the folds of :func:`_splits`; every
    row is predicted once, by the classifier of the fold that held it out. Returns what
    :func:`probe_accuracy` documents."""
    labels = np.asarray([str(label) for label in labels], dtype=object)
    if groups is not None:
        groups = np.asarray([str(group) for group in groups], dtype=object)
    splits = _splits(labels, groups, seed, folds)
    predicted = np.empty(len(labels), dtype=object)
    fold_accuracy = []
    for train, test in splits:
        if len(np.unique(labels[train])) < 2:  # a fold whose training part holds one class predicts it
            predicted[test] = labels[train][0]
        else:
            classifier = make_classifier()
            classifier.fit(inputs[train], labels[train])
            predicted[test] = classifier.predict(inputs[test])
        fold_accuracy.append(float(np.mean(predicted[test] == labels[test])))
    accuracy = float(np.mean(predicted == labels))
    chance = float(np.unique(labels, return_counts=True)[1].max() / len(labels))
    return {
        "accuracy": accuracy,
        "chance": chance,
        "above_chance": accuracy - chance,
        "fold_accuracy": fold_accuracy,
        "fold_test_indices": [test.tolist() for _, test in splits],
        "folds": len(splits),
        "n": int(len(labels)),
        "classes": [str(c) for c in np.unique(labels)],
    }


def probe_accuracy(features, labels, groups=None, seed: int = 0, folds: int = 5) -> dict:
    """Cross-validated accuracy of a logistic-regression probe of ``labels`` from ``features``.

    The probe is ``StandardScaler`` + ``LogisticRegression`` (scikit-learn, L2, ``max_iter=2000``). Folds are
    ``StratifiedKFold`` (shuffled by ``seed``) or, with ``groups`` (e.g. the patient of each text),
    ``StratifiedGroupKFold``, so no group is in both the training and the test part of a fold. ``folds`` is
    lowered to what the data allow (the smallest class's count of rows, or of groups). Every row is predicted
    once, by the probe of the fold that held it out.

    Returns ``accuracy`` (share of rows predicted right), ``chance`` (the majority class's share of all
    rows), ``above_chance`` (their difference), ``fold_accuracy`` (per fold), ``fold_test_indices`` (the rows
    each fold tested), ``folds``, ``n``, ``classes``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 2 or len(features) != len(labels):
        raise InputError(f"{len(labels)} label(s) for a feature matrix of shape {features.shape}")
    return cross_validated_accuracy(
        features,
        labels,
        lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed)),
        groups,
        seed,
        folds,
    )


def text_only_probe(texts: Sequence[str], labels, groups=None, seed: int = 0, folds: int = 5) -> dict:
    """The probe's text-only baseline [ours]: TF-IDF of the texts' words and word pairs + logistic regression
    (scikit-learn, fitted inside each fold), on the same folds as :func:`probe_accuracy` with the same labels,
    groups and seed. What it reads, a model with no memory of the patients can read off the questions too.
    Returns :func:`probe_accuracy`'s dict."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    texts = np.asarray([str(text) for text in texts], dtype=object)
    if len(texts) != len(labels):
        raise InputError(f"{len(texts)} text(s) for {len(labels)} label(s)")
    return cross_validated_accuracy(
        texts,
        labels,
        lambda: make_pipeline(
            TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
            LogisticRegression(max_iter=2000, random_state=seed),
        ),
        groups,
        seed,
        folds,
    )


def hidden_state_probe(
    model,
    tokenizer,
    texts: Sequence[str],
    labels: Sequence,
    seed: int = 0,
    *,
    folds: int = 5,
    groups: Sequence | None = None,
    **reading,
) -> dict:
    """How well a linear probe reads ``labels`` (the forget patients' disease category) off the model's
    hidden states of ``texts`` (their questions as chat prompts, from :func:`probe_inputs`: pass
    ``add_special_tokens=False`` for those, the template adds its own), by cross-validation (docs/attacks.md,
    "Probing").

    :func:`hidden_state_features` then :func:`probe_accuracy` (``groups``: the patient of each text, so one
    patient's texts are never split between training and test); ``reading`` are the keywords of
    :func:`hidden_state_features` (``layer``, ``batch_size``, ``max_length``, ``add_special_tokens``).
    :func:`probe_inputs` makes ``texts``, ``labels`` and ``groups`` from an examples table. Returns
    :func:`probe_accuracy`'s dict plus ``layer``. Compare ``above_chance`` before and after unlearning.
    """
    if len(texts) != len(labels):
        raise InputError(f"{len(texts)} text(s) for {len(labels)} label(s)")
    features = hidden_state_features(model, tokenizer, texts, **reading)
    result = probe_accuracy(features, labels, groups=groups, seed=seed, folds=folds)
    result["layer"] = reading.get("layer", -1)  # hidden_state_features' default: the last layer
    return result


def above_baseline_noise(before: float, baseline: float, n: int) -> float:
    """Twice the binomial standard deviation of a difference of two accuracies on ``n`` questions [ours]:
    ``2 · sqrt(2 · p̄ · (1 − p̄) / n)``, ``p̄ = (before + baseline) / 2``; at least one question's worth
    (``1 / n``). A lead of the before model over the baseline under it is within sampling noise.

    >>> round(above_baseline_noise(0.62, 0.5, 96), 3)
    0.143
    """
    mean = min(max((before + baseline) / 2, 0.0), 1.0)
    n = max(n, 1)
    return max(2 * float(np.sqrt(2 * mean * (1 - mean) / n)), 1.0 / n)


def retained_share_above_baseline(before: float, unlearned: float, baseline: float, n: int) -> float | None:
    """``(unlearned − baseline) / (before − baseline)`` of probe accuracies [ours]: the share of what the
    before model read beyond a model with no memory of the patients that the unlearned model still reads.
    ``None`` when ``before − baseline`` is under :func:`above_baseline_noise` (within sampling noise: the
    ratio would be noise).

    >>> retained_share_above_baseline(0.9, 0.75, 0.6, n=40)
    0.5
    >>> retained_share_above_baseline(0.62, 0.55, 0.5, n=96) is None  # 0.12 < 0.143: within noise
    True
    """
    if before - baseline < above_baseline_noise(before, baseline, n):
        return None
    return (unlearned - baseline) / (before - baseline)


def _undefined_reason(before: float, baseline: float, n: int) -> str | None:
    noise = above_baseline_noise(before, baseline, n)
    if before - baseline >= noise:
        return None
    return (
        f"the before model's lead over the baseline ({before - baseline:+.3f}) is under twice the sampling "
        f"noise of an accuracy difference at n={n} ({noise:.3f}): no memory above the baseline to retain"
    )


PROBE_INPUTS = "questions (chat prompts), no answers"
TEXT_ONLY_BASELINE = "text-only: TF-IDF of the questions + logistic regression, same folds"
RETAIN_BASELINE = "the same probe on the retain model (never trained on the forget patients)"
PROBE_KEYS = ("accuracy", "chance", "above_chance", "folds", "layer")


def probe_rows(examples: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The examples the hidden-state probe reads, and what they cover (``scope``).

    The forget patients' QA of the diseases with at least two forget patients, when there are two such
    diseases; otherwise (a disease-level or a small forget set) the retained patients' QA are added, so the
    probe tells the forget disease from the others. A disease with one patient is left out (patient-grouped
    cross-validation cannot test it)."""

    def probeable(rows):  # cross-validation by patient needs two patients per class, and two classes
        patients = rows.groupby("disease")["patient_id"].nunique()
        return rows[rows["disease"].isin(patients[patients >= 2].index)]

    rows, scope = probeable(examples[examples["population"].isin(FORGET_POPULATIONS)]), "forget patients"
    if rows["disease"].nunique() < 2:
        rows, scope = probeable(examples), "forget and retained patients"
    return rows, scope


def probe_texts(examples: pd.DataFrame, tokenizer=None) -> tuple[list[str], list[str], list[str], str]:
    """Texts, disease labels and patient groups of the hidden-state probe, and what they cover.

    The rows of :func:`probe_rows`; the texts are their **questions only** (:func:`probe_inputs`), rendered
    with ``tokenizer`` as the chat prompt the model sees before answering. Never the answers: they often name
    the diagnosis, and a probe of them would read the disease off the input tokens rather than off what the
    model retained."""
    rows, scope = probe_rows(examples)
    texts, labels, groups = probe_inputs(rows, populations=None, tokenizer=tokenizer)
    return texts, labels, groups, scope


def _model_probe(path, rows: pd.DataFrame, seed: int) -> dict:
    from medunlearn.models import load_model

    model, tokenizer = load_model(str(path), merge_adapter=True)
    # Rendered per model, with its own tokenizer: a saved folder (an adapter's, a re-saved tokenizer) may
    # carry another chat template, and each model is probed on exactly the prompt it sees before answering.
    texts, labels, groups = probe_inputs(rows, populations=None, tokenizer=tokenizer)
    result = hidden_state_probe(
        model, tokenizer, texts, labels, seed=seed, groups=groups, add_special_tokens=False
    )
    return {key: result[key] for key in PROBE_KEYS}


def probe_section(model_path, before_path, examples, seed: int, cache: dict, retain_path=None) -> dict:
    """The ``probe`` section of an attack report: the probe on the before, unlearned and (when given) retain
    models, the text-only baseline, and the shares above chance and above the baseline (module docstring).
    ``cache`` keeps the results of the models every method shares (before, retain, text-only)."""
    rows, scope = probe_rows(examples)
    section: dict = {"scope": scope, "n": len(rows), "inputs": PROBE_INPUTS}
    roles = {"before": before_path, "unlearned": model_path}
    if retain_path:
        roles["retain"] = retain_path
    try:
        if "probe-text-only" not in cache:
            texts, labels, groups = probe_inputs(rows, populations=None)
            result = text_only_probe(texts, labels, groups, seed=seed)
            cache["probe-text-only"] = {key: result[key] for key in PROBE_KEYS if key in result}
        section["text_only"] = cache["probe-text-only"]
        for role, path in roles.items():
            shared = role != "unlearned"  # the same model for every method: probed once
            if shared and f"probe-{role}" in cache:
                section[role] = cache[f"probe-{role}"]
                continue
            section[role] = _model_probe(path, rows, seed)
            if shared:
                cache[f"probe-{role}"] = section[role]
    except InputError as error:  # no rows, or too few patients per disease for cross-validation
        return {**section, "skipped": str(error)}
    return {**section, **probe_comparison(section)}


def probe_comparison(section: dict) -> dict:
    """The baseline a probe section is read against (the retain model's probe, else the text-only one) and
    the shares of the before model's accuracy the unlearned model keeps: above chance and above baseline."""
    baseline_role = "retain" if "retain" in section else "text_only"
    before, after = section["before"]["accuracy"], section["unlearned"]["accuracy"]
    baseline = section[baseline_role]["accuracy"]
    before_above_chance = section["before"]["above_chance"]
    return {
        "baseline": RETAIN_BASELINE if baseline_role == "retain" else TEXT_ONLY_BASELINE,
        "baseline_accuracy": baseline,
        "above_baseline": {"before": before - baseline, "unlearned": after - baseline},
        # [ours] the share of the before model's above-chance accuracy left in the hidden states
        "retained_above_chance_share": (
            section["unlearned"]["above_chance"] / before_above_chance if before_above_chance > 0 else None
        ),
        "retained_above_baseline_share": retained_share_above_baseline(before, after, baseline, section["n"]),
        "retained_above_baseline_undefined": _undefined_reason(before, baseline, section["n"]),
    }


__all__ = [
    "PROBE_INPUTS",
    "above_baseline_noise",
    "cross_validated_accuracy",
    "hidden_state_features",
    "hidden_state_probe",
    "probe_accuracy",
    "probe_comparison",
    "probe_inputs",
    "probe_rows",
    "probe_section",
    "probe_texts",
    "retained_share_above_baseline",
    "text_only_probe",
]
