"""The BioDivergence column lists have one home, ``biodivergence/schema.py``: a pool row, a label table
(mining stage 6) and the LLM labeller's JSON schema all name a label's fields from ``LABEL_FIELDS``."""

from __future__ import annotations

from medunlearn.biodivergence import schema
from medunlearn.biodivergence.mining import heuristic, labels


def test_the_label_fields_are_written_once():
    fields = schema.LABEL_FIELDS
    assert fields == (
        "conflict_type",
        "axes",
        "dominant_confounder",
        "reconciliation",
        "evidence_a",
        "evidence_b",
    )
    # The LLM's schema asks for exactly these, in this order.
    llm = labels.label_schema()
    assert llm["required"] == list(fields) and list(llm["properties"]) == list(fields)
    # A label table and a pool row hold them in the same order.
    assert heuristic.LABEL_COLUMNS is labels.LABEL_COLUMNS is schema.LABEL_COLUMNS
    for columns in (schema.LABEL_COLUMNS, schema.PAIR_COLUMNS):
        assert tuple(c for c in columns if c in fields) == fields


def test_the_column_lists_keep_their_values():
    assert schema.PAIR_COLUMNS == (
        "pair_id", "domain", "claim_a", "claim_b", "article_a", "article_b", "abstract_a", "abstract_b",
        "conflict_type", "axes", "dominant_confounder", "reconciliation", "evidence_a", "evidence_b",
        "label_source", "confidence",
    )  # fmt: skip
    assert schema.STRING_COLUMNS == tuple(c for c in schema.PAIR_COLUMNS if c not in ("axes", "confidence"))
    assert schema.LABEL_COLUMNS == (
        "pair_id", "label_source", "conflict_type", "axes", "dominant_confounder", "reconciliation",
        "evidence_a", "evidence_b", "confidence", "repairs",
    )  # fmt: skip
