import doctest

import medunlearn.data_loading
from medunlearn.amnesia import build_amnesia_folder
from medunlearn.data_loading import load_split


def test_doctests():
    assert doctest.testmod(medunlearn.data_loading).failed == 0


def test_commands_read_a_rebuilt_folder_not_the_cache_of_its_name(tmp_path):
    """datasets caches local folders by name: rebuilding in place must still give the new rows."""
    folder = build_amnesia_folder(tmp_path / "amnesia", patients=20, seed=0)
    assert load_split(str(folder), "notes").num_rows == 20
    build_amnesia_folder(folder, patients=30, seed=0, overwrite=True)
    assert load_split(str(folder), "notes").num_rows == 30


def test_a_readme_glob_that_matches_another_splits_file_is_named_by_its_line(tmp_path):
    """Before: `train`'s ``data/forget_10/*.parquet`` also read ``holdout``'s file, its rows counted twice
    without a word."""
    import pytest

    from medunlearn.errors import FileContentError

    folder = build_amnesia_folder(tmp_path / "amnesia", patients=20, seed=0)
    readme = folder / "README.md"
    train = "data/forget_10/train-00000-of-00001.parquet"
    text = readme.read_text()
    readme.write_text(text.replace(train, "data/forget_10/*.parquet"))
    line = text[: text.index(train)].count("\n") + 1
    message = (
        rf"README.md, line {line}: config 'forget_10' split 'train' path 'data/forget_10/\*.parquet' matches "
        r"data/forget_10/holdout-00000-of-00001.parquet, which split 'holdout' reads too "
        r"\('data/forget_10/holdout-00000-of-00001.parquet', line \d+\): each data file belongs to one split"
    )
    with pytest.raises(FileContentError, match=message):
        load_split(folder, "forget_10", "train")
    readme.write_text(text.replace(train, "data/forget_10/train-*.parquet"))  # a glob of its own files only
    assert load_split(folder, "forget_10", "train").num_rows > 0
