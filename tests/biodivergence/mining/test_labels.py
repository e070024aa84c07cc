"""Silver labels of mined pairs: heuristic rules and confidence, the LLM labeller through medunlearn.llm, and
labels always valid under the ontology whatever the model answers."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medunlearn.biodivergence.mining.labels import (
    LABEL_COLUMNS,
    LabelConfig,
    LabellingIncompleteError,
    heuristic_confidence,
    heuristic_labels,
    label_prompt,
    label_requests,
    label_schema,
    llm_labels,
    pool_rows,
    repair_llm_label,
    silver_labels,
)
from medunlearn.biodivergence.schema import normalise_pool
from medunlearn.llm import BulkChat
from medunlearn.ontology.biodivergence import AXIS_IDS, CONFLICT_TYPE_IDS, NO_CONFOUNDER, UnknownLabelError

_spec = importlib.util.spec_from_file_location("fake_llm", Path(__file__).with_name("fake_llm.py"))
fake_llm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_llm)

SUBJECTS = ["Vancomycin", "Metformin", "Statin therapy", "Aspirin", "Radiotherapy", "BRCA1 testing"]
FAMILIES = ["", "population", "geography,period", "dose", "assay,design", "population,geography,design"]


def signal_pairs(n: int = 36) -> pd.DataFrame:
    """Pairs covering every combination of the signals the heuristic reads."""
    rows = []
    combos = itertools.product([0, 1], [0, 1], FAMILIES, [False, True])
    for i, (reversed_, negated, families, hedged) in enumerate(itertools.islice(itertools.cycle(combos), n)):
        subject = SUBJECTS[i % len(SUBJECTS)]
        verb_b = "decreased" if reversed_ else "increased"
        rows.append(
            {
                "pair_id": f"{i}:0|{i + 100}:0",
                "text_a": f"{subject} increased survival in children in Spain ({i}).",
                "text_b": f"{subject} {'may have ' if hedged else ''}{verb_b} survival in adults ({i}).",
                "article_a": str(i),
                "article_b": str(i + 100),
                "domain": "oncology" if i % 2 else "cardiovascular",
                "polarity_reversal": reversed_,
                "negation_mismatch": negated,
                "entity_mismatch": (i % 4) / 4,
                "context_cues": len([f for f in families.split(",") if f]),
                "context_families": families,
                "similarity": 0.5 + (i % 5) / 10,
                "rank": i + 1,
            }
        )
    return pd.DataFrame(rows)


def assert_valid_labels(labels: pd.DataFrame, pairs: pd.DataFrame) -> None:
    """Every label passes the pool schema; spans are substrings of their claims; confidence in [0, 1]."""
    assert list(labels.columns) == list(LABEL_COLUMNS)
    normalise_pool(pool_rows(pairs, labels), "labels under test")
    texts = pairs.set_index("pair_id")
    for label in labels.itertuples():
        assert label.conflict_type in CONFLICT_TYPE_IDS
        assert set(label.axes) <= set(AXIS_IDS) and len(set(label.axes)) == len(label.axes)
        assert label.dominant_confounder == NO_CONFOUNDER or label.dominant_confounder in label.axes
        assert label.evidence_a in texts.at[label.pair_id, "text_a"]
        assert label.evidence_b in texts.at[label.pair_id, "text_b"]
        assert 0.0 <= label.confidence <= 1.0


def test_heuristic_confidence_by_hand():
    # reversed, one negation, 3 families (capped at 2), S = 0.9, hedge, E = 0.5:
    # 0.45 + 0.10 + 0.15 + 0.09 - 0.20 - 0.05 = 0.54
    assert heuristic_confidence([1], [1], [3], [0.9], [1], [0.5]).tolist() == [0.54]
    # not reversed, S = 1.2 (clipped to 1), one family: 0.20 + 0.30 - 0.05 = 0.45
    assert heuristic_confidence([0], [0], [1], [1.2], [0], [0.0]).tolist() == [0.45]
    # never outside [0, 1]
    extremes = heuristic_confidence([0, 1], [1, 1], [9, 9], [-1, 5], [1, 0], [1, 0])
    assert ((extremes >= 0) & (extremes <= 1)).all()


def test_no_conflict_confidence_rests_on_agreeing_stances_not_on_a_shared_topic():
    # not reversed, S = 0.6, no negation, no context difference:
    # stances agree: 0.20 + 0.30 * 0.6 + 0.15 = 0.53; they do not: 0.20 + 0.18 = 0.38
    assert heuristic_confidence([0, 0], [0, 0], [0, 0], [0.6, 0.6], [0, 0], [0.0, 0.0], [1, 0]).tolist() == [
        0.53,
        0.38,
    ]
    # "no conflict" includes claims about different questions: an entity mismatch does not lower it
    assert heuristic_confidence([0], [0], [0], [0.6], [0], [1.0], [1]).tolist() == [0.53]
    # a reversal is unchanged: 0.45 + 0.10 * 0.6 - 0.10 * 1.0 = 0.41
    assert heuristic_confidence([1], [0], [0], [0.6], [0], [1.0], [1]).tolist() == [0.41]


def test_opposite_stances_are_a_contradiction_only_about_one_question():
    pairs = pd.DataFrame(
        {
            "pair_id": ["same", "different", "nulls"],
            "text_a": ["Statins reduced mortality.", "Statins reduced mortality.", "X did not differ."],
            "text_b": [
                "Statins did not reduce mortality.",
                "Colchicine did not change gout flares.",
                "No significant difference was found.",
            ],
            "polarity_reversal": [1, 1, 0],
            "negation_mismatch": [1, 1, 0],
            "entity_mismatch": [0.0, 1.0, 0.0],
            "shared_entities": [1, 0, 0],
            "context_families": ["", "", ""],
            "similarity": [0.9, 0.6, 0.6],
        }
    )
    labels = heuristic_labels(pairs).set_index("pair_id")
    assert labels.at["same", "conflict_type"] == "direct_contradiction"
    assert labels.at["different", "conflict_type"] == "no_conflict"  # opposite, but about different things
    # two null findings read from the texts agree: 0.20 + 0.30 * 0.6 + 0.15 = 0.53
    assert labels.at["nulls", "conflict_type"] == "no_conflict" and labels.at["nulls", "confidence"] == 0.53


def test_heuristic_labels_follow_the_shared_rules_and_are_valid():
    pairs = signal_pairs()
    labels = heuristic_labels(pairs)
    assert_valid_labels(labels, pairs)
    assert (labels["label_source"] == "heuristic").all()
    by_pair = {row["pair_id"]: row for row in labels.to_dict("records")}
    for pair in pairs.itertuples():
        label = by_pair[pair.pair_id]
        hedged = "may have" in pair.text_b and pair.polarity_reversal == 1
        if hedged:
            assert label["conflict_type"] == "insufficient_evidence"
        elif pair.polarity_reversal and pair.context_families:
            assert label["conflict_type"] == "contextual_contradiction"
            assert label["dominant_confounder"] == label["axes"][0] != NO_CONFOUNDER
        elif pair.polarity_reversal:
            assert label["conflict_type"] == "direct_contradiction" and label["axes"] == []
        else:
            assert label["conflict_type"] == "no_conflict"
        assert label["evidence_a"] == pair.text_a  # the v1.0 claim-verbatim rule
    # the families map to the ontology's axes
    row = by_pair[pairs.loc[pairs["context_families"] == "geography,period", "pair_id"].iloc[0]]
    assert row["axes"] == ["geography", "time_period"]


def test_schema_is_the_ontology_and_a_valid_json_schema():
    from medunlearn.llm.schema import check_schema

    schema = label_schema()
    check_schema(schema, where="label schema")
    properties = schema["properties"]
    assert properties["conflict_type"]["enum"] == list(CONFLICT_TYPE_IDS)
    assert properties["axes"]["items"]["enum"] == list(AXIS_IDS)
    assert properties["dominant_confounder"]["enum"] == [*AXIS_IDS, NO_CONFOUNDER]
    assert set(schema["required"]) == set(properties)


def test_requests_carry_the_prompt_version_and_the_claims(tmp_path):
    pairs = signal_pairs(3)
    prompt = label_prompt()
    assert prompt.version == "biodivergence-silver-label-v1" and prompt.source == "builtin"
    requests = label_requests(pairs, prompt, LabelConfig(max_tokens=200, seed=4))
    assert [r.prompt_version for r in requests] == [prompt.version] * 3
    assert requests[0].json_schema == label_schema() and requests[0].seed == 4
    assert fake_llm.claims_of(requests[1]) == (pairs.at[1, "text_a"], pairs.at[1, "text_b"])
    custom = tmp_path / "prompt.yaml"
    custom.write_text("version: mine-v2\nsystem: Label.\nuser: 'A: {claim_a} B: {claim_b}'\n")
    assert label_requests(pairs, label_prompt(custom), LabelConfig())[0].prompt_version == "mine-v2"
    from medunlearn.llm.prompts import PromptError

    (tmp_path / "bad.yaml").write_text("version: x\nsystem: s\nuser: '{nothing_like_this}'\n")
    with pytest.raises(PromptError, match=r"bad.yaml, field 'user': cannot fill"):
        label_requests(pairs, label_prompt(tmp_path / "bad.yaml"), LabelConfig())
    with pytest.raises(PromptError, match="no such prompt file"):
        label_prompt(tmp_path / "absent.yaml")


def test_repairs_make_every_answer_a_valid_label():
    claim_a, claim_b = "Lower risk was seen in Spain.", "Higher risk was seen in Peru."
    label, repairs = repair_llm_label(
        {
            "conflict_type": "contextual_contradiction",
            "axes": ["population", "population"],
            "dominant_confounder": "geography",
            "reconciliation": " Different\n countries. ",
            "evidence_a": "lower  RISK",
            "evidence_b": "",
        },
        claim_a,
        claim_b,
    )
    assert label == {
        "conflict_type": "contextual_contradiction",
        "axes": ["population", "geography"],
        "dominant_confounder": "geography",
        "reconciliation": "Different countries.",
        "evidence_a": "Lower risk",
        "evidence_b": claim_b,
    }
    assert repairs == [
        "duplicate axes dropped",
        "dominant_confounder added to axes",
        "evidence_a matched ignoring case and spaces",
        "evidence_b empty: the claim itself",
    ]
    label, repairs = repair_llm_label(
        {
            "conflict_type": "contextual_contradiction",
            "axes": [],
            "dominant_confounder": "none",
            "reconciliation": "r",
            "evidence_a": "risk was seen",
            "evidence_b": "risk",
        },
        claim_a,
        claim_b,
    )
    assert label["axes"] == ["unknown_latent_factor"] and label["evidence_a"] == "risk was seen"
    assert repairs == ["contextual contradiction without axes: unknown_latent_factor"]
    with pytest.raises(UnknownLabelError):
        repair_llm_label({"conflict_type": "maybe", "axes": []}, claim_a, claim_b)


def test_llm_labels_from_a_garbage_model_are_valid_and_failures_are_counted(tmp_path):
    pairs = signal_pairs()
    chat = BulkChat(
        fake_llm.ScriptedBackend(fake_llm.garbage_answer), cache=tmp_path / "c.sqlite", show_progress=False
    )
    labels, report = llm_labels(pairs, chat, label_prompt(), LabelConfig())
    assert_valid_labels(labels, pairs)
    assert (labels["label_source"] == "llm").all()
    assert report["requests"] == len(pairs) == report["labelled"] + report["failed"]
    assert report["failed"] > 0 and report["labelled"] > 0
    assert sum(report["failures"].values()) == report["failed"]
    assert report["repairs"]["evidence_b not in claim b"] > 0
    # confidence: 0.9 minus 0.1 per retry and per repair, at least 0.5
    assert labels["confidence"].between(0.5, 0.9).all()
    repaired = labels["repairs"].map(len) > 0
    assert (labels.loc[repaired, "confidence"] < 0.9).all()
    assert report["prompt"]["version"] == "biodivergence-silver-label-v1"
    assert report["prompt_tokens"] > 0


def test_silver_labels_keep_both_sources_and_the_paper_threshold_is_reported(tmp_path):
    pairs = signal_pairs()
    chat = BulkChat(fake_llm.ScriptedBackend(fake_llm.garbage_answer), show_progress=False)
    labels, report = silver_labels(pairs, LabelConfig(llm_pairs_per_domain=5), chat=chat)
    assert_valid_labels(labels, pairs)
    counts = labels["label_source"].value_counts()
    assert counts["heuristic"] == len(pairs)
    assert report["llm"]["requests"] == 10  # the 5 best-ranked pairs of each of the two domains
    assert counts.get("llm", 0) == report["llm"]["labelled"]
    heuristic = labels[labels["label_source"] == "heuristic"]
    assert report["heuristic"]["at_or_above_min_confidence"] == int((heuristic["confidence"] >= 0.45).sum())
    assert labels[["pair_id", "label_source"]].equals(
        labels[["pair_id", "label_source"]].sort_values(["pair_id", "label_source"]).reset_index(drop=True)
    )
    # one pool row per label: the split builder keeps a pair's LLM copy (dev/test only LLM-labelled)
    from medunlearn.biodivergence.splits import build_splits

    pool = pool_rows(pairs, labels)
    assert len(pool) == len(labels)
    configs, stats = build_splits(pool)
    assert stats.duplicate_rows_removed == counts.get("llm", 0)
    for split in ("dev", "test"):
        assert (configs["v1.0"][split]["label_source"] == "llm").all()
    assert (configs["v1.0"]["train"]["confidence"] >= 0.45).all()


def test_no_answer_from_the_server_stops_the_stage_and_a_rerun_resumes_from_the_cache(tmp_path):
    pairs = signal_pairs(12)
    cache = tmp_path / "llm.sqlite"
    dying = fake_llm.ScriptedBackend(fake_llm.garbage_answer, fail_after=5)
    with pytest.raises(LabellingIncompleteError, match="7 of 12 label requests got no answer"):
        llm_labels(pairs, BulkChat(dying, cache=cache, show_progress=False), label_prompt(), LabelConfig())
    healthy = fake_llm.ScriptedBackend(fake_llm.garbage_answer)
    resumed_chat = BulkChat(healthy, cache=cache, show_progress=False)
    resumed, _ = llm_labels(pairs, resumed_chat, label_prompt(), LabelConfig())
    assert resumed_chat.stats.cache_hits == 5 and healthy.requests_seen == 7
    fresh, _ = llm_labels(
        pairs,
        BulkChat(fake_llm.ScriptedBackend(fake_llm.garbage_answer), show_progress=False),
        label_prompt(),
        LabelConfig(),
    )
    pd.testing.assert_frame_equal(resumed, fresh)


@pytest.mark.slow  # a tiny random Llama decoding under xgrammar's schema mask: a few seconds
def test_a_tiny_transformers_model_gives_valid_labels(tiny_model, tiny_tokenizer):
    from medunlearn.llm.transformers_backend import TransformersBackend, TransformersConfig

    backend = TransformersBackend(
        tiny_model, tiny_tokenizer, model_id="tiny-label-test", config=TransformersConfig(batch_size=4)
    )
    pairs = signal_pairs(4)
    labels, report = llm_labels(
        pairs, BulkChat(backend, show_progress=False), label_prompt(), LabelConfig(max_tokens=96)
    )
    assert report["requests"] == 4 and report["labelled"] + report["failed"] == 4
    assert_valid_labels(labels, pairs)
    assert np.isin(labels["conflict_type"], CONFLICT_TYPE_IDS).all()
