import codecs
import json
import re

import pytest

from medunlearn.cli import main


def _run(*argv):
    return main(["biodivergence", *(str(a) for a in argv)])


@pytest.fixture(scope="module")
def cli_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "bd"
    assert _run("build", "--synthetic", "--pairs", 400, "--seed", 1, "--out", out) == 0
    return out


def test_build_audit_eval_round_trip(cli_folder, tmp_path, capsys):
    assert _run("audit", cli_folder) == 0
    assert "audit passed" in capsys.readouterr().out
    out = tmp_path / "eval"
    assert _run("eval", "--baseline", "majority", "--data", cli_folder, "--out", out) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    lines = (out / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == metrics["scores"]["num_examples"] > 0
    # the predictions file scores to the same table
    assert (
        _run(
            "eval",
            "--predictions",
            out / "predictions.jsonl",
            "--data",
            cli_folder,
            "--out",
            tmp_path / "again",
        )
        == 0
    )
    again = json.loads((tmp_path / "again" / "metrics.json").read_text())
    assert again["scores"] == metrics["scores"]


def test_predictions_with_missing_and_raw_rows(cli_folder, tmp_path, capsys):
    from medunlearn.biodivergence.audit import read_hub_folder

    test = read_hub_folder(cli_folder)["v1.0"]["test"]
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"pair_id": test["pair_id"].iloc[0], "prediction": "not json"}) + "\n")
    assert _run("eval", "--predictions", path, "--data", cli_folder, "--out", tmp_path / "o") == 0
    assert "count as wrong" in capsys.readouterr().out
    scores = json.loads((tmp_path / "o" / "metrics.json").read_text())["scores"]
    assert scores["num_examples"] == len(test) and scores["accuracy"] == 0.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"pair_id": "nope", "prediction": "x"}\n', "line 1: pair_id 'nope' is not in the gold split"),
        ("not json\n", "line 1: invalid JSON at column 1"),
        ('{"pair_id": "p", "confidence": NaN}\n', "line 1, field 'confidence': NaN is not a JSON number"),
        # a key given twice: json keeps the last value without a word
        (
            '\n{"pair_id": "q", "prediction": "x", "prediction": "y"}\n',
            "line 2, field 'prediction': the key is given twice",
        ),
        ('["pair_id"]\n', "line 1: expected a JSON object, got a list"),
        ('{"prediction": "x"}\n', "line 1: needs a `pair_id` field"),
        ("", "holds no prediction"),  # an empty file would score 0.0 as if it were a result
        ("\n\n", "holds no prediction"),
    ],
)
def test_bad_predictions_file_names_the_line(cli_folder, tmp_path, capsys, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    assert _run("eval", "--predictions", path, "--data", cli_folder, "--out", tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("encode", "message"),
    [
        (lambda text: text.encode("utf-16"), None),  # a byte-order mark: read, the same scores
        (lambda text: text.encode("utf-32"), None),
        (lambda text: codecs.BOM_UTF8 + text.encode(), None),
        (lambda text: text.replace('"', '"é', 1).encode("latin-1"), r"bad.jsonl, line 1: is not UTF-8 text"),
        (lambda text: text.encode("utf-16-le"), r"bad.jsonl, line 1: holds NUL characters"),
    ],
)
def test_a_predictions_file_in_another_encoding_is_decoded_or_named(
    cli_folder, tmp_path, capsys, encode, message
):
    out = tmp_path / "eval"
    assert _run("eval", "--baseline", "lexical", "--data", cli_folder, "--out", out) == 0
    path = tmp_path / "bad.jsonl"
    path.write_bytes(encode((out / "predictions.jsonl").read_text(encoding="utf-8")))
    code = _run("eval", "--predictions", path, "--data", cli_folder, "--out", tmp_path / "again")
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if message is None:
        assert code == 0
        scores = [json.loads((o / "metrics.json").read_text())["scores"] for o in (out, tmp_path / "again")]
        assert scores[0] == scores[1]
    else:
        assert code == 2 and re.search(message, err), err
        assert not (tmp_path / "again").exists()


def test_bad_pool_is_reported_without_traceback(tmp_path, capsys, pair_factory):
    path = tmp_path / "pool.jsonl"
    path.write_text(json.dumps(pair_factory("p0", "1", "2") | {"conflict_type": "contradiction"}) + "\n")
    assert _run("build", "--pool", path, "--out", tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert "pool.jsonl: row 1, field `conflict_type`: unknown label" in err and "Traceback" not in err
    assert _run("build", "--pool", tmp_path / "absent.jsonl", "--out", tmp_path / "o") == 2
    assert _run("audit", tmp_path) == 2


def test_audit_exit_code_on_violation(cli_folder, tmp_path, capsys):
    import shutil

    import pandas as pd

    folder = tmp_path / "bad"
    shutil.copytree(cli_folder, folder)
    dev = pd.read_parquet(folder / "v1.0" / "dev.parquet")
    train = pd.read_parquet(folder / "v1.0" / "train.parquet")
    pd.concat([train, dev.iloc[:1]]).to_parquet(folder / "v1.0" / "train.parquet", index=False)
    assert _run("audit", folder) == 1
    assert "audit FAILED: v1.0: no pair_id in two splits" in capsys.readouterr().err


def test_help_has_a_working_example(capsys):
    from medunlearn.cli import subcommand_parser

    parser = subcommand_parser("biodivergence")
    assert "medunlearn biodivergence build --synthetic" in parser.epilog
    assert parser.description
