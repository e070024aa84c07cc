"""Publishing a model folder to the Hub: the checks before any upload, then ``huggingface_hub``'s upload."""

from __future__ import annotations

from pathlib import Path

from medunlearn.errors import MedunlearnError, MissingInputError
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.utils.digest import DIGEST_FILE

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl")
# Never uploaded: the weights-digest cache the evaluation writes beside a model folder (a local cache keyed by
# file modification times, meaningless on the Hub).
UPLOAD_IGNORE_PATTERNS = (DIGEST_FILE,)


class PublishError(MedunlearnError, RuntimeError):
    """The upload itself failed (network, authentication, permissions); the message names the repository."""


def files_to_publish(folder: Path) -> list[Path]:
    """The folder's files, after checking it has a model card and safetensors weights only."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingInputError(f"model folder {folder} does not exist")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not (folder / "README.md").is_file():
        raise UnlearningInputError(f"{folder} has no README.md model card (written by `medunlearn unlearn`)")
    pickled = [p for p in files if p.suffix in PICKLE_SUFFIXES]
    if pickled:
        raise UnlearningInputError(
            f"{folder}: refusing pickled files {[str(p.relative_to(folder)) for p in pickled]}"
        )
    if not any(p.suffix == ".safetensors" for p in files):
        raise UnlearningInputError(f"{folder} holds no .safetensors weights")
    return files


def publish_model(
    folder: str | Path, repo_id: str, *, private: bool = False, dry_run: bool = False
) -> list[Path]:
    """Check ``folder`` and upload it to the model repository ``repo_id`` (nothing with ``dry_run``); returns
    the files. The token comes from ``HF_TOKEN`` or the user's login, never from an argument."""
    files = files_to_publish(Path(folder))
    if "/" not in repo_id:
        raise UnlearningInputError(f"--repo-id must be owner/name, got {repo_id!r}")
    if dry_run:
        return files
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi()
    try:
        api.create_repo(repo_id, private=private, exist_ok=True)
        api.upload_folder(
            folder_path=str(folder),
            repo_id=repo_id,
            commit_message="medunlearn publish",
            ignore_patterns=list(UPLOAD_IGNORE_PATTERNS),
        )
    except (HfHubHTTPError, OSError) as error:  # network / auth / permission: a clear line, not a traceback
        raise PublishError(f"upload to {repo_id} failed: {error}") from error
    return files
