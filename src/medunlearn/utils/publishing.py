"""What publishing to the Hub may upload, checked in one place for datasets and models.

A publish uploads the files its layout names, never "whatever is in the folder" (a ``.env``, a link to
``/etc``): the caller lists the files, :func:`checked_files` refuses any that is not a regular file inside the
folder, and :func:`upload_files` commits exactly those (docs/cli.md, "Publishing").
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from medunlearn.errors import InputError, MedunlearnError

# A folder given as an input, named as missing or as a file: the readers' check (kept importable from here).
from medunlearn.utils.user_files import existing_folder as existing_folder


class PublishError(MedunlearnError, RuntimeError):
    """The upload itself failed (network, authentication, permissions); the message names the repository."""


def check_repo_id(repo_id: str, flag: str = "--repo") -> str:
    """``repo_id`` when it is a Hub repository id (``owner/name``; ``huggingface_hub``'s own validator), else
    an :class:`~medunlearn.errors.InputError` naming ``flag``.

    >>> check_repo_id("my-org/amnesia")
    'my-org/amnesia'
    >>> check_repo_id("../../etc")
    Traceback (most recent call last):
    ...
    medunlearn.errors.InputError: --repo '../../etc' is not a Hub repository id (owner/name): ...
    """
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        if repo_id.count("/") != 1:
            raise HFValidationError("it needs exactly one '/' between owner and name")
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise InputError(f"{flag} {repo_id!r} is not a Hub repository id (owner/name): {error}") from None
    return repo_id


def file_inside(folder: Path, name: str, named_by: str) -> Path:
    """``folder / name`` when it is a regular file that stays inside ``folder`` (no absolute path, no ``..``,
    no link leading out); else an :class:`~medunlearn.errors.InputError` naming what named it."""
    path = folder / name
    root = folder.resolve()
    if Path(name).is_absolute() or ".." in Path(name).parts or root not in path.resolve().parents:
        raise InputError(f"{named_by}: {name!r} leads outside {folder}; publishing never uploads it")
    if not path.is_file():
        raise InputError(f"{named_by}: {name!r} is not a file in {folder}")
    return path


def checked_files(folder: Path, names: Iterable[tuple[str, str]]) -> list[str]:
    """The ``(name, what named it)`` pairs' names, sorted, each checked by :func:`file_inside`."""
    return sorted({name for name, named_by in names if file_inside(folder, name, named_by)})


def upload_files(
    folder: Path,
    files: list[str],
    repo_id: str,
    *,
    repo_type: str,
    private: bool,
    message: str,
    token: str | None = None,
) -> None:
    """Create ``repo_id`` if needed and commit exactly ``files`` (paths relative to ``folder``) to it."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(token=token)  # None: HF_TOKEN or the local login
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder / name)) for name in files]
    try:
        api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
        api.create_commit(repo_id, operations, repo_type=repo_type, commit_message=message)
    except (HfHubHTTPError, OSError) as error:  # network / auth / permission: a clear line, not a traceback
        raise PublishError(f"upload to {repo_id} failed: {error}") from error
