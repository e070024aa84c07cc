import pandas as pd

from medunlearn.biodivergence.baselines import (
    LexicalBaseline,
    MajorityBaseline,
    ZeroShotBaseline,
    ZeroShotConfig,
    zero_shot_prompt,
)
from medunlearn.biodivergence.schema import normalise_pool
from medunlearn.metrics.contextual_contradiction import OUTPUT_KEYS, SPAN_KEYS, contextual_contradiction


def _frame(pair_factory, specs):
    rows = []
    for i, (claim_a, claim_b, conflict, axes, confounder) in enumerate(specs):
        rows.append(
            pair_factory(
                f"p{i}",
                str(2 * i),
                str(2 * i + 1),
                claim_a=claim_a,
                claim_b=claim_b,
                conflict_type=conflict,
                axes=axes,
                confounder=confounder,
            )
        )
    return normalise_pool(pd.DataFrame(rows))


def _gold(frame):
    return frame[list(OUTPUT_KEYS + SPAN_KEYS)].to_dict(orient="records")


def test_majority_predicts_train_modes(pair_factory):
    train = _frame(
        pair_factory,
        [
            ("a", "b", "no_conflict", [], "none"),
            ("c", "d", "no_conflict", ["population"], "none"),
            ("e", "f", "contextual_contradiction", ["population", "geography"], "population"),
        ],
    )
    predictions = MajorityBaseline().fit(train).predict(train)
    assert {p["conflict_type"] for p in predictions} == {"no_conflict"}
    assert predictions[0]["axes"] == ["population"]  # 2 of 3 pairs carry it; geography only 1 of 3
    assert predictions[0]["evidence_a"] == "a"  # evidence = the claim (claim-verbatim rule)
    assert contextual_contradiction(predictions, _gold(train))["accuracy"] == 2 / 3


def test_lexical_learns_a_lexical_signal(pair_factory):
    # the class is written in the words: "children" pairs are contextual (population), "same" pairs agree
    specs = []
    for i in range(24):
        if i % 2:
            specs.append(
                (
                    f"drug {i} lowers risk in adults",
                    f"drug {i} raises risk in children",
                    "contextual_contradiction",
                    ["population"],
                    "population",
                )
            )
        else:
            specs.append(
                (f"drug {i} lowers risk", f"drug {i} lowers risk the same way", "no_conflict", [], "none")
            )
    frame = _frame(pair_factory, specs)
    train, test = frame.iloc[:16], frame.iloc[16:].reset_index(drop=True)
    predictions = LexicalBaseline().fit(train).predict(test)
    scores = contextual_contradiction(predictions, _gold(test))
    assert (
        scores["accuracy"] == 1.0 and scores["axis_micro_f1"] == 1.0 and scores["confounder_accuracy"] == 1.0
    )
    assert scores["reconciliation_rougeL"] == 1.0  # nearest train pair carries the same reconciliation text


def test_lexical_handles_a_single_class_train(pair_factory):
    train = _frame(
        pair_factory, [("a b", "c d", "no_conflict", [], "none"), ("e f", "g h", "no_conflict", [], "none")]
    )
    predictions = LexicalBaseline().fit(train).predict(train)
    assert [p["conflict_type"] for p in predictions] == ["no_conflict", "no_conflict"]


def test_zero_shot_with_a_tiny_model_is_scored_not_dropped(pair_factory, tiny_model, tiny_tokenizer):
    frame = _frame(
        pair_factory,
        [
            (
                "Troponin was high.",
                "Troponin was normal.",
                "contextual_contradiction",
                ["population"],
                "population",
            )
        ]
        * 3,
    )
    baseline = ZeroShotBaseline(tiny_model, tiny_tokenizer, ZeroShotConfig(max_new_tokens=8, batch_size=2))
    prompts = baseline.prompts(frame)
    assert prompts[0].startswith("<|im_start|>system")
    assert prompts[0].endswith('<|im_start|>assistant\n{"conflict_type": "')  # the answer is prefilled
    outputs = baseline.fit(frame).predict(frame)
    assert len(outputs) == 3 and all(text.startswith('{"conflict_type": "') for text in outputs)
    scores = contextual_contradiction(outputs, _gold(frame))
    assert scores["num_examples"] == 3 and scores["num_unparseable"] == 3 and scores["accuracy"] == 0.0


def test_prompt_lists_every_label():
    text = zero_shot_prompt("A", "B")[0]["content"]
    assert "unresolved_scientific_controversy" in text and "unknown_latent_factor" in text and "JSON" in text
