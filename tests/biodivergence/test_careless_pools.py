"""Careless pools and abstracts: each is refused with exit 2, a message naming the file, the row and the field
(or what mining found), no traceback, and no output folder; the ids a pool may give as integers are read as
text in the pool and the mining paths alike."""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pandas as pd
import pytest

from medunlearn.biodivergence.pools import read_pool
from medunlearn.cli import main


def _run(*argv) -> int:
    return main(["biodivergence", *(str(a) for a in argv)])


def _rows(make) -> list[dict]:
    return [make("p0", "1", "2"), make("p1", "3", "4"), make("p2", "5", "6")]


def _write(path, rows: list[dict]) -> None:
    if path.suffix == ".parquet":
        pd.DataFrame(rows).to_parquet(path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _refused(capsys, argv, tmp_path, message: str, out) -> str:
    """Run ``argv``, assert the refusal (exit 2, ``message`` matched, no traceback, ``out`` absent and no
    staging folder beside it) and return the error text."""
    before = sorted(p.name for p in tmp_path.iterdir())
    assert _run(*argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(message, err), err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != out.name + "-mining") == before
    return err


def _set(row: int, **fields):
    def change(rows):
        rows[row] |= fields
        return rows

    return change


def _self_pair(text: str, article: str = "3"):
    return _set(1, article_a=article, article_b="3", claim_a="Drug X lowers mortality.", claim_b=text)


def _parquet_column(name: str, values):
    def change(rows):
        frame = pd.DataFrame(rows)
        frame[name] = values
        return frame.to_dict("records")

    return change


POOL_CASES = [
    # a number field is a real number: not JSON true, not the string "0.9"
    ("conf_bool", ".jsonl", _set(1, confidence=True), r"row 2, field `confidence`: must be a number"),
    ("conf_false", ".jsonl", _set(2, confidence=False), r"row 3, field `confidence`: must be a number"),
    ("conf_str", ".jsonl", _set(1, confidence="0.9"), r"row 2, field `confidence`: must be a number"),
    # a parquet column of the wrong type is named with the row of its first value
    (
        "conf_str_column",
        ".parquet",
        _parquet_column("confidence", ["0.9", "0.8", "0.7"]),
        r"row 1, field `confidence`: the parquet column holds text values; the pool schema wants a number",
    ),
    (
        "conf_bool_column",
        ".parquet",
        _parquet_column("confidence", [True, True, False]),
        r"row 1, field `confidence`: the parquet column holds bool values",
    ),
    (
        "conf_late_str_column",
        ".parquet",
        _parquet_column("confidence", [None, "0.8", "0.7"]),
        r"row 2, field `confidence`: the parquet column holds text values",
    ),
    (
        "axes_str_column",
        ".parquet",
        _parquet_column("axes", ["population", "population", "population"]),
        r"row 1, field `axes`: the parquet column holds text values; the pool schema wants a list",
    ),
    (
        "article_float_column",
        ".parquet",
        _parquet_column("article_b", [2.0, 4.0, 6.0]),
        r"row 1, field `article_b`: the parquet column holds number values; the pool schema wants text",
    ),
    # an id is text or an integer, never a float or a boolean
    (
        "article_float",
        ".jsonl",
        _set(1, article_a=3.0),
        r"row 2, field `article_a`: must be a string or an int",
    ),
    (
        "article_bool",
        ".jsonl",
        _set(1, article_b=True),
        r"row 2, field `article_b`: must be a string or an int",
    ),
    ("pair_id_float", ".jsonl", _set(2, pair_id=1.5), r"row 3, field `pair_id`: must be a string or an int"),
    # one claim paired with itself, even written with other case, spaces or a final stop
    (
        "self_pair",
        ".jsonl",
        _self_pair("Drug X lowers mortality."),
        r"row 2, field `claim_b`: repeats claim_a",
    ),
    ("self_pair_case", ".jsonl", _self_pair("drug x  lowers MORTALITY"), r"row 2, field `claim_b`: repeats"),
    (
        "self_pair_int_id",
        ".jsonl",
        _self_pair("Drug X lowers mortality", 3),
        r"row 2, field `claim_b`: repeats",
    ),
    # two different pairs under one pair_id: one would vanish in the split builder's dedupe
    (
        "pair_id_two_pairs",
        ".jsonl",
        _set(2, pair_id="p1"),
        r"row 3, field `pair_id`: row 2 has this pair_id too, but the two rows are different pairs \(they "
        r"differ in claim_a, claim_b, article_a, article_b\)",
    ),
    (
        "pair_id_two_pairs_parquet",
        ".parquet",
        _set(2, pair_id="p0"),
        r"row 3, field `pair_id`: row 1 has this pair_id too, but the two rows are different pairs",
    ),
    (
        "pair_id_other_domain",
        ".jsonl",
        lambda rows: [*rows, rows[0] | {"domain": "genomics", "label_source": "heuristic"}],
        r"row 4, field `pair_id`: row 1 has this pair_id too, .*\(they differ in domain\)",
    ),
    # no rows: refused alike whatever the format
    ("zero_rows", ".parquet", lambda rows: rows[:0], r"the pool has no rows"),
    ("empty", ".jsonl", lambda rows: [], r"the pool has no rows"),
]


@pytest.mark.parametrize(("name", "suffix", "change", "message"), POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_a_careless_pool_is_refused_by_file_row_and_field(
    tmp_path, capsys, pair_factory, name, suffix, change, message
):
    path = tmp_path / f"{name}{suffix}"
    if name == "zero_rows":  # a parquet file with the schema's columns and no row
        pd.DataFrame(_rows(pair_factory)).iloc[:0].to_parquet(path)
    else:
        _write(path, change(_rows(pair_factory)))
    out = tmp_path / "out"
    _refused(
        capsys, ["build", "--pool", path, "--out", out], tmp_path, re.escape(str(path)) + ": " + message, out
    )


@pytest.mark.parametrize(
    ("suffix", "where"),
    [(".jsonl", "line 2, field 'confidence'"), (".json", "line 3, field 'confidence'")],
)
def test_a_pool_row_giving_a_key_twice_is_refused_by_line_and_key(
    tmp_path, capsys, pair_factory, suffix, where
):
    """JSON keeps the last value of a key given twice without a word: the row's first confidence was lost."""
    lines = [json.dumps(row) for row in _rows(pair_factory)]
    lines[1] = lines[1].replace("{", '{"confidence": 0.1, ', 1)
    path = tmp_path / f"pool{suffix}"
    path.write_text("\n".join(lines) + "\n" if suffix == ".jsonl" else "[\n" + ",\n".join(lines) + "\n]\n")
    out = tmp_path / "out"
    message = re.escape(f"{path}, {where}: the key is given twice (first at {where.split(',')[0]})")
    _refused(capsys, ["build", "--pool", path, "--out", out], tmp_path, message, out)


def test_an_empty_json_list_is_refused_like_an_empty_jsonl(tmp_path, capsys):
    path = tmp_path / "empty.json"
    path.write_text("[]")
    out = tmp_path / "out"
    _refused(
        capsys, ["build", "--pool", path, "--out", out], tmp_path, r"empty.json: the pool has no rows", out
    )


def test_integer_ids_are_their_digits_in_every_pool_format(tmp_path, pair_factory):
    rows = _rows(pair_factory)
    rows[0] |= {"article_a": 31000304, "pair_id": 7}
    rows[1] |= {"article_b": None}  # beside a missing id, an integer id stays an integer (not 31000304.0)
    jsonl = tmp_path / "pool.jsonl"
    _write(jsonl, rows)
    with pytest.raises(ValueError, match=r"row 2, field `article_b`: the value is missing"):
        read_pool(jsonl)
    rows[1] |= {"article_b": "4"}
    _write(jsonl, rows)
    pool = read_pool(jsonl)
    assert pool.loc[0, ["pair_id", "article_a"]].tolist() == ["7", "31000304"]
    parquet = tmp_path / "pool.parquet"
    frame = pd.DataFrame(_rows(pair_factory))
    frame["article_a"] = np.array([31000304, 3, 5], dtype=np.int64)
    frame.to_parquet(parquet)
    assert read_pool(parquet)["article_a"].tolist() == ["31000304", "3", "5"]


def test_the_same_sentence_from_two_articles_and_whole_number_confidences_are_kept(tmp_path, pair_factory):
    """Two abstracts may state the same sentence: a genuine (easy) pair, unlike a claim paired with itself."""
    rows = _rows(pair_factory)
    rows[1] |= {"claim_a": "Drug X lowers mortality.", "claim_b": "Drug X lowers mortality.", "confidence": 1}
    rows[2] |= {"confidence": 0}
    path = tmp_path / "pool.jsonl"
    _write(path, rows)
    pool = read_pool(path)
    assert pool["confidence"].tolist() == [0.9, 1.0, 0.0]
    assert pool.loc[1, "claim_a"] == pool.loc[1, "claim_b"]


def test_copies_of_one_pair_under_one_pair_id_keep_the_llm_copy(tmp_path, capsys, pair_factory):
    """The documented dedupe stays: copies of one pair (other labels, other label source) share a pair_id and
    the split builder keeps the LLM-labelled one."""
    rows = _rows(pair_factory)
    copy = rows[1] | {"label_source": "heuristic", "conflict_type": "no_conflict", "axes": []}
    rows = [rows[0], copy, rows[1], rows[2], rows[1] | {"confidence": 0.5}]
    copy["dominant_confounder"] = "none"
    path = tmp_path / "copies.jsonl"
    _write(path, rows)
    pool = read_pool(path)
    assert pool["pair_id"].tolist() == ["p0", "p1", "p1", "p2", "p1"]
    from medunlearn.biodivergence.splits import clean_pool

    cleaned, counts = clean_pool(pool)
    assert counts["duplicate_rows_removed"] == 2
    kept = cleaned.set_index("pair_id").loc["p1"]
    assert (kept["label_source"], kept["confidence"]) == ("llm", 0.9)


# ----------------------------------------------------------------------------------------------------------
# Mining: ids as in a pool, and mining that finds no pair says why


def _hashed_embeddings(texts, model=None, batch_size=64, show_progress=False):
    """A bag of hashed words (instant, offline): claims sharing no word are far apart."""
    vectors = np.zeros((len(texts), 256), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 256] += 1.0
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


@pytest.fixture()
def fast_embeddings(monkeypatch):
    import medunlearn.biodivergence.mining.embed as embed

    monkeypatch.setattr(embed, "embed_texts", _hashed_embeddings)


METFORMIN = "In conclusion, metformin was associated with decreased mortality in elderly adults in Spain."
TAMOXIFEN = "Overall, tamoxifen reduced recurrence among Kenyan women treated surgically for breast cancer."
CISPLATIN = "Cisplatin increased overall survival in children with lung cancer compared with placebo."
STATINS = "Statins lowered LDL cholesterol in diabetic patients from Norway."
VACCINE = "Vaccination reduced influenza hospitalisation among nursing home residents in Japan."
SMOKING = "Smoking cessation improved lung function in middle-aged factory workers."
NO_CLAIM = "We describe the design of a registry."


def _abstracts(*records) -> list[dict]:
    return [{"pmid": pmid, "title": "t", "abstract": text, **extra} for pmid, text, extra in records]


MINE_CASES = [
    (
        "duplicate_pmid",
        _abstracts(("1", METFORMIN, {}), ("1", TAMOXIFEN, {})),
        r"1 abstract, 1 claim, no candidate pair found: the claims come from 1 article",
    ),
    (
        "one_with_claims",
        _abstracts(("1", METFORMIN, {}), ("2", NO_CLAIM, {})),
        r"2 abstracts, 1 claim, no candidate pair found: the claims come from 1 article",
    ),
    (
        "no_claim",
        _abstracts(("1", NO_CLAIM, {}), ("2", "This protocol lists the study visits.", {})),
        r"2 abstracts, 0 claims, no candidate pair found: no claim was extracted",
    ),
    (
        "two_domains",
        _abstracts(("1", METFORMIN, {"domain": "cardiology"}), ("2", TAMOXIFEN, {"domain": "oncology"})),
        r"2 abstracts, 2 claims, no candidate pair found: the claims' 2 articles fall in 2 domains, one "
        r"article each",
    ),
    (
        "outside_window",
        _abstracts(("1", METFORMIN, {"domain": "cardiology"}), ("2", TAMOXIFEN, {"domain": "cardiology"})),
        r"2 abstracts, 2 claims, no candidate pair found: no claim pair of two articles has a similarity "
        r"within \[0\.5, 0\.98\]",
    ),
]


@pytest.mark.parametrize(("name", "records", "message"), MINE_CASES, ids=[c[0] for c in MINE_CASES])
def test_mining_without_a_pair_says_what_it_found_and_why(
    tmp_path, capsys, fast_embeddings, name, records, message
):
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "mined"
    assert _run("mine", "--abstracts", path, "--out", out) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "lack the column" not in err
    assert re.search(re.escape(str(path)) + ": " + message, err), err
    # The folder is resumable by design: the stages before the pairs are kept (and said so), nothing after.
    assert "the same command resumes from them" in err
    assert sorted(json.loads((out / "stages.json").read_text())) == ["abstracts", "claims", "domains"]
    assert not (out / "pairs.jsonl").exists()


def test_a_build_from_abstracts_without_a_pair_writes_no_dataset(tmp_path, capsys, fast_embeddings):
    """Six abstracts, each of its own domain, with an LLM labeller that is never reached."""
    texts = [METFORMIN, TAMOXIFEN, CISPLATIN, STATINS, VACCINE, SMOKING]
    records = _abstracts(*((str(i), text, {"domain": f"d{i}"}) for i, text in enumerate(texts)))
    path = tmp_path / "six.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "bd"
    argv = ["build", "--abstracts", path, "--labeller", "openai:m@http://127.0.0.1:9/v1", "--out", out]
    message = r"six.jsonl: 6 abstracts, 6 claims, no candidate pair found: the claims' 6 articles fall in 6"
    _refused(capsys, argv, tmp_path, message, out)
    assert not (tmp_path / "bd-mining" / "pairs.jsonl").exists()


@pytest.mark.parametrize(("pmid", "kept"), [(5, "5"), (1.5, None), (5.0, None), (True, None)])
def test_a_pmid_is_text_or_an_integer_as_in_a_pool(tmp_path, pmid, kept):
    from medunlearn.biodivergence.mining.read import AbstractFormatError, read_abstracts

    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"pmid": pmid, "title": "t", "abstract": METFORMIN}) + "\n")
    if kept is not None:
        assert read_abstracts([path])["pmid"].tolist() == [kept]
        return
    with pytest.raises(
        AbstractFormatError, match=r"record 1 \(line 1\), field `pmid`: must be a string or an int"
    ):
        read_abstracts([path])
