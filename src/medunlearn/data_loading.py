"""Reading benchmark folders through ``datasets``, fresh every time.

``datasets`` caches a local folder under its folder *name* and config name, not its contents: a folder rebuilt
in place, or a second folder with the same name elsewhere, is silently read from the first one's cache. Every
medunlearn command reads local folders through :func:`load_config`, which uses a private, throw-away cache and
in-memory tables (re-reading parquet is cheap). Hub ids go through the normal cache.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The config-name grammar lives in medunlearn.config_names; re-exported here, where callers have found it.
from medunlearn.config_names import ConfigNameError as ConfigNameError
from medunlearn.config_names import retain_config_for as retain_config_for
from medunlearn.errors import InputError, MissingInputError


@contextmanager
def quiet_datasets() -> Iterator[None]:
    """Silence ``datasets``' per-file progress bars (our commands show one bar for the whole task)."""
    import datasets

    were_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if were_enabled:
            datasets.enable_progress_bars()


def load_config(data: str | os.PathLike, config: str, split: str | None = None):
    """``datasets.load_dataset(data, config, split=split)``, reading a local folder's current files.

    >>> import tempfile
    >>> from medunlearn.amnesia import build_amnesia_folder
    >>> root = tempfile.mkdtemp()
    >>> small = build_amnesia_folder(f"{root}/a/amnesia", patients=20, seed=0)
    >>> large = build_amnesia_folder(f"{root}/b/amnesia", patients=40, seed=0)
    >>> load_config(small, "notes", "train").num_rows, load_config(large, "notes", "train").num_rows
    (20, 40)
    """
    import datasets

    with quiet_datasets():
        if Path(data).is_dir():
            with tempfile.TemporaryDirectory(prefix="medunlearn-data-") as cache_dir:
                return datasets.load_dataset(
                    str(data), config, split=split, cache_dir=cache_dir, keep_in_memory=True
                )
        return datasets.load_dataset(str(data), config, split=split)


def load_split(data: str | os.PathLike, config: str, split: str = "train"):
    """One split of a benchmark folder or Hub id, with errors that name the folder and the config."""
    if not (Path(data).exists() or "/" in str(data)):
        raise MissingInputError(f"data folder {data} does not exist")
    try:
        return load_config(data, config, split)
    except (ValueError, FileNotFoundError) as error:  # datasets names the configs, or the missing data file
        raise InputError(f"{data}: cannot load config {config!r}: {error}") from error
