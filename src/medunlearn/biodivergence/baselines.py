"""BioDivergence baselines: ``majority``, ``lexical`` (TF-IDF + logistic regression), ``zero-shot`` (any
causal LM asked for the JSON of the four outputs, parsed strictly by the metric) and ``finetuned`` (an encoder
fine-tuned with three heads, :mod:`medunlearn.biodivergence.finetuned`).

Every baseline has ``fit(train_frame)`` and ``predict(frame) -> list`` (records, or raw text for the
zero-shot model); :func:`fit_baseline` also hands the dev split to those that early-stop on it. The evidence
span of every baseline is the claim itself (the v1.0 claim-verbatim rule).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from medunlearn.errors import InputError
from medunlearn.generation import generate_texts
from medunlearn.models import load_model
from medunlearn.ontology.biodivergence import AXIS_IDS, CONFLICT_TYPES, DIVERGENCE_AXES, NO_CONFOUNDER


def pair_text(frame: pd.DataFrame) -> pd.Series:
    """The text a lexical model sees: both claims, marked so that word order across the pair is kept."""
    return "claim a: " + frame["claim_a"] + " claim b: " + frame["claim_b"]


def _records(frame: pd.DataFrame, conflict, axes, confounder, reconciliation) -> list[dict]:
    return [
        {
            "conflict_type": c,
            "axes": list(a),
            "dominant_confounder": d,
            "reconciliation": r,
            "evidence_a": ea,
            "evidence_b": eb,
        }
        for c, a, d, r, ea, eb in zip(
            conflict, axes, confounder, reconciliation, frame["claim_a"], frame["claim_b"]
        )
    ]


class MajorityBaseline:
    """The most frequent class, confounder and reconciliation of train; the axes that at least half of the
    train pairs carry (ours)."""

    name = "majority"

    def fit(self, train: pd.DataFrame) -> MajorityBaseline:
        self.conflict_type = train["conflict_type"].mode().iloc[0]
        share = train["axes"].explode().value_counts() / max(len(train), 1)
        self.axes = [axis for axis in AXIS_IDS if share.get(axis, 0.0) >= 0.5]
        self.confounder = train["dominant_confounder"].mode().iloc[0]
        self.reconciliation = train["reconciliation"].mode().iloc[0]
        return self

    def predict(self, frame: pd.DataFrame) -> list[dict]:
        n = len(frame)
        return _records(
            frame, [self.conflict_type] * n, [self.axes] * n, [self.confounder] * n, [self.reconciliation] * n
        )


@dataclass
class LexicalBaselineConfig:
    """TF-IDF of the pair text (word 1–2-grams, sublinear tf) and L2 logistic regressions (ours)."""

    ngram_range: tuple[int, int] = (1, 2)
    min_df: int = 1
    max_features: int = 50_000
    C: float = 4.0
    seed: int = 0


class LexicalBaseline:
    """TF-IDF + logistic regression for the class, one-vs-rest for the axes and the confounder; the
    reconciliation of the most similar train pair (cosine over TF-IDF), i.e. a retrieval baseline."""

    name = "lexical"

    def __init__(self, config: LexicalBaselineConfig | None = None):
        self.config = config or LexicalBaselineConfig()

    def _classifier(self, labels):
        from sklearn.dummy import DummyClassifier
        from sklearn.linear_model import LogisticRegression

        if len(set(labels)) < 2:  # one class in train: logistic regression cannot fit, predict it
            return DummyClassifier(strategy="most_frequent").fit(np.zeros((len(labels), 1)), labels), True
        model = LogisticRegression(C=self.config.C, max_iter=2000, random_state=self.config.seed)
        return model, False

    def fit(self, train: pd.DataFrame) -> LexicalBaseline:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.multiclass import OneVsRestClassifier
        from sklearn.preprocessing import MultiLabelBinarizer

        self.vectorizer = TfidfVectorizer(
            ngram_range=self.config.ngram_range,
            min_df=self.config.min_df,
            max_features=self.config.max_features,
            sublinear_tf=True,
        )
        features = self.vectorizer.fit_transform(pair_text(train))
        self.train_features = features
        self.train_reconciliation = train["reconciliation"].to_numpy(object)
        self.models = {}
        for column in ("conflict_type", "dominant_confounder"):
            labels = train[column].to_numpy(object)
            model, constant = self._classifier(labels)
            self.models[column] = (model if constant else model.fit(features, labels), constant)
        self.binarizer = MultiLabelBinarizer(classes=list(AXIS_IDS))
        targets = self.binarizer.fit_transform(train["axes"])
        seen = targets.any(axis=0) & ~targets.all(axis=0)
        self.axis_constant = targets[0] if len(targets) else np.zeros(len(AXIS_IDS), int)
        self.axis_columns = np.flatnonzero(seen)
        self.axis_model = None
        if self.axis_columns.size:
            from sklearn.linear_model import LogisticRegression

            self.axis_model = OneVsRestClassifier(
                LogisticRegression(C=self.config.C, max_iter=2000, random_state=self.config.seed)
            ).fit(features, targets[:, self.axis_columns])
        return self

    def _predict_column(self, column: str, features) -> np.ndarray:
        model, constant = self.models[column]
        return model.predict(np.zeros((features.shape[0], 1)) if constant else features)

    def predict(self, frame: pd.DataFrame) -> list[dict]:
        features = self.vectorizer.transform(pair_text(frame))
        conflict = self._predict_column("conflict_type", features)
        confounder = self._predict_column("dominant_confounder", features)
        indicator = np.tile(self.axis_constant, (len(frame), 1))
        if self.axis_model is not None:
            indicator[:, self.axis_columns] = np.asarray(self.axis_model.predict(features)).reshape(
                len(frame), -1
            )
        axis_names = np.array(AXIS_IDS, dtype=object)
        axes = [list(axis_names[row.astype(bool)]) for row in indicator]
        # The confounder must be one of the predicted axes; otherwise predict none.
        confounder = [c if c in a else NO_CONFOUNDER for c, a in zip(confounder, axes)]
        nearest = np.asarray((features @ self.train_features.T).argmax(axis=1)).ravel()
        reconciliation = self.train_reconciliation[nearest]
        return _records(frame, conflict, axes, confounder, reconciliation)


PROMPT_INSTRUCTIONS = (
    "You compare two claims from biomedical abstracts and explain why they may disagree.\n"
    "Answer with one JSON object and nothing else, with the keys:\n"
    '  "conflict_type": one of ' + ", ".join(label.id for label in CONFLICT_TYPES) + "\n"
    '  "axes": a list of the context axes on which the two studies differ, from '
    + ", ".join(label.id for label in DIVERGENCE_AXES)
    + "\n"
    '  "dominant_confounder": the axis that best explains the disagreement, or "none"\n'
    '  "reconciliation": one sentence explaining how both claims can hold\n'
)


def zero_shot_prompt(claim_a: str, claim_b: str) -> list[dict]:
    """Chat messages asking for the four outputs as JSON."""
    return [
        {"role": "system", "content": PROMPT_INSTRUCTIONS},
        {"role": "user", "content": f"Claim A: {claim_a}\nClaim B: {claim_b}\nJSON:"},
    ]


@dataclass
class ZeroShotConfig:
    """Greedy decoding, batched with left padding (ours).

    response_prefix: text placed at the start of the model's answer (assistant prefill) and prepended to
    what it generates, so small models start the JSON object instead of echoing the claims.
    """

    max_new_tokens: int = 160
    batch_size: int = 8
    max_prompt_tokens: int = 1024
    response_prefix: str = '{"conflict_type": "'


class ZeroShotBaseline:
    """Prompt a causal LM for the JSON of the four outputs; returns its raw text (the metric parses it)."""

    name = "zero-shot"

    def __init__(self, model, tokenizer, config: ZeroShotConfig | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.config = config or ZeroShotConfig()

    def fit(self, train: pd.DataFrame) -> ZeroShotBaseline:  # nothing to learn
        return self

    def prompts(self, frame: pd.DataFrame) -> list[str]:
        conversations = [zero_shot_prompt(a, b) for a, b in zip(frame["claim_a"], frame["claim_b"])]
        prefix = self.config.response_prefix
        if getattr(self.tokenizer, "chat_template", None):
            return [
                self.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) + prefix
                for c in conversations
            ]
        return [c[0]["content"] + "\n" + c[1]["content"] + "\n" + prefix for c in conversations]

    def predict(self, frame: pd.DataFrame) -> list[str]:

        outputs = generate_texts(
            self.model,
            self.tokenizer,
            self.prompts(frame),
            max_new_tokens=self.config.max_new_tokens,
            batch_size=self.config.batch_size,
            max_prompt_tokens=self.config.max_prompt_tokens,
        )
        return [self.config.response_prefix + text for text in outputs]


BASELINES = ("majority", "lexical", "zero-shot", "finetuned")
USES_DEV = ("finetuned",)  # baselines whose fit(train, dev) early-stops on dev


def make_baseline(name: str, *, model: str | None = None, device: str | None = None, **kwargs):
    """A baseline by name; ``zero-shot`` loads ``model`` (a local path or a name the model loader knows) on
    ``device`` (default: CUDA when available); ``finetuned`` fine-tunes the encoder ``model`` (a local folder
    or Hub id; default the offline all-MiniLM-L6-v2) with ``config`` (a ``FinetunedConfig``)."""
    if name == "finetuned":
        from dataclasses import replace

        from medunlearn.biodivergence.finetuned import FinetunedBaseline, FinetunedConfig

        config = kwargs.get("config") or FinetunedConfig()
        return FinetunedBaseline(replace(config, model=model) if model else config)
    if name == "majority":
        return MajorityBaseline()
    if name == "lexical":
        return LexicalBaseline(**kwargs)
    if name == "zero-shot":
        import torch

        loaded_model, tokenizer = load_model(model or "smollm2-135m")
        loaded_model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        return ZeroShotBaseline(loaded_model, tokenizer, **kwargs)
    raise InputError(f"unknown baseline {name!r}; choose one of {', '.join(BASELINES)}")


def fit_baseline(baseline, splits: dict):
    """``baseline`` fit on ``splits["train"]``, and on ``splits["dev"]`` too when it early-stops on dev."""
    if baseline.name in USES_DEV:
        return baseline.fit(splits["train"], splits.get("dev"))
    return baseline.fit(splits["train"])


def prediction_rows(frame: pd.DataFrame, predictions: list) -> list[dict]:
    """Rows of a predictions file: pair_id plus the record, or pair_id plus the raw ``prediction`` text."""
    rows = []
    for pair_id, prediction in zip(frame["pair_id"], predictions):
        rows.append(
            {"pair_id": pair_id, **prediction}
            if isinstance(prediction, dict)
            else {"pair_id": pair_id, "prediction": prediction}
        )
    return rows


def write_predictions(rows: list[dict], path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


def label_counts(frame: pd.DataFrame) -> dict:
    return dict(Counter(frame["conflict_type"]))
