"""A pool or folder value named in an error is shown as the user wrote it: ``-0.5``, ``'bd-0000001'``, never
``np.float64(-0.5)`` or ``np.str_('bd-0000001')``; a value the record does not have is said to be missing, not
``nan``."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from medunlearn.biodivergence.schema import PoolFormatError, normalise_pool
from medunlearn.cli import main
from medunlearn.errors import plain, shown


def test_shown_gives_the_python_value_of_a_numpy_scalar():
    assert (shown(np.float64(-0.5)), shown(np.str_("P000007")), shown(np.int64(3))) == (
        "-0.5",
        "'P000007'",
        "3",
    )
    assert plain(np.float64(0.25)) == 0.25 and type(plain(np.float64(0.25))) is float
    assert shown(np.array([1, 2])) == "array([1, 2])"  # an array is no scalar: left as it is


def test_a_numpy_value_in_a_pool_error_is_shown_as_python(pair_factory):
    rows = [pair_factory("p0", "1", "2"), pair_factory("p1", "3", "4")]
    rows[1]["confidence"] = -0.5
    with pytest.raises(PoolFormatError) as error:
        normalise_pool(pd.DataFrame(rows), source="pool.jsonl")
    assert str(error.value) == "pool.jsonl: row 2, field `confidence`: must be a number in [0, 1] (got -0.5)"


def test_a_value_the_record_lacks_is_named_missing_not_nan(pair_factory):
    rows = [pair_factory("p0", "1", "2"), pair_factory("p1", "3", "4")]
    del rows[1]["claim_b"]
    with pytest.raises(PoolFormatError) as error:
        normalise_pool(pd.DataFrame(rows), source="pool.jsonl")
    assert str(error.value) == (
        "pool.jsonl: row 2, field `claim_b`: the value is missing (absent, null or NaN); it must be a string"
    )


def _audit_error(folder, capsys) -> str:
    assert main(["biodivergence", "audit", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "np." not in err and "Traceback" not in err, err
    return err


def test_an_audit_names_a_missing_confidence_and_shared_ids_in_plain_values(built_folder, tmp_path, capsys):
    folder = tmp_path / "folder"
    shutil.copytree(built_folder, folder)
    test = pd.read_parquet(folder / "v1.0/test.parquet")
    test.loc[0, "confidence"] = np.nan
    test.to_parquet(folder / "v1.0/test.parquet", index=False)
    err = _audit_error(folder, capsys)
    missing = "the value is missing (absent, null or NaN)"
    assert f"v1.0/test.parquet: row 1, field `confidence`: {missing}" in err, err

    shutil.copytree(built_folder, folder, dirs_exist_ok=True)
    train, test = (pd.read_parquet(folder / f"v1.0/{split}.parquet") for split in ("train", "test"))
    pd.concat([test, train.iloc[:1]]).to_parquet(folder / "v1.0/test.parquet", index=False)
    assert f"e.g. '{train['pair_id'].iloc[0]}'" in _audit_error(folder, capsys)
