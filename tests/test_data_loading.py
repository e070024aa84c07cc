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
