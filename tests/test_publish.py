"""Publishing uploads only what the layout names, after an audit (dataset) or the model checks (model):
never a ``.env``, a link leading out of the folder, or a README path like ``../../etc/passwd``; a missing
folder and a bad repository id are named errors (exit 2). Offline: dry runs, and a recording stand-in for
the Hub."""

from __future__ import annotations

import shutil
from pathlib import Path

import huggingface_hub
import pytest

from medunlearn.cli import main

DATA_FILES_OF_40 = "data/full/train-00000-of-00001.parquet"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    from medunlearn.amnesia import build_amnesia_folder

    return build_amnesia_folder(tmp_path_factory.mktemp("built") / "amnesia", patients=40, seed=0)


def keep_carelessly(folder: Path, private: dict[str, str], links: dict[str, str]) -> None:
    """What a careless user keeps in a folder to publish: a ``.env`` with a token, ``private`` files (name ->
    text) and links out of the folder (name -> target)."""
    (folder / ".env").write_text("HF_TOKEN=hf_secret\n")
    for name, text in private.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    for name, target in links.items():
        (folder / name).symlink_to(target)


@pytest.fixture()
def hub_commits(monkeypatch) -> list[tuple[str, list[str], str]]:
    """A recording stand-in for the Hub: every commit as (repo id, sorted paths in the repo, repo type)."""
    commits = []

    class RecordingApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kwargs):
            pass

        def create_commit(self, repo_id, operations, **kwargs):
            commits.append((repo_id, sorted(op.path_in_repo for op in operations), kwargs["repo_type"]))

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    return commits


@pytest.fixture()
def dataset(built, tmp_path) -> Path:
    """The built folder plus what a careless user keeps in it."""
    folder = tmp_path / "amnesia"
    shutil.copytree(built, folder)
    keep_carelessly(
        folder, {"notes.csv": "patient_id,note\n1,private\n"}, {"etc": "/etc", "passwd": "/etc/passwd"}
    )
    return folder


def layout_files(folder: Path) -> list[str]:
    """The files the AMNESIA layout names, read independently: README.md, each data/ parquet, the record."""
    parquet = sorted(str(p.relative_to(folder)) for p in (folder / "data").rglob("*.parquet"))
    return sorted(["README.md", "amnesia_build.json", *parquet])


def test_dataset_dry_run_lists_exactly_the_layout(dataset, capsys):
    assert main(["amnesia", "publish", str(dataset), "--repo", "org/amnesia", "--dry-run"]) == 0
    out = capsys.readouterr().out
    listed = sorted(line.removeprefix("would upload ") for line in out.splitlines()[:-1])
    assert listed == layout_files(dataset)
    assert DATA_FILES_OF_40 in listed
    for secret in (".env", "notes.csv", "etc", "passwd"):
        assert secret not in listed


def test_dataset_upload_commits_only_the_listed_files(dataset, hub_commits):
    from medunlearn.amnesia.hub import publish_folder

    files = publish_folder(dataset, "org/amnesia")
    assert hub_commits == [("org/amnesia", layout_files(dataset), "dataset")] and files == layout_files(
        dataset
    )


def rewrite_readme_path(folder: Path, new_path: str) -> None:
    readme = folder / "README.md"
    readme.write_text(readme.read_text().replace(DATA_FILES_OF_40, new_path, 1))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda f: rewrite_readme_path(f, "../../etc/passwd"), "leads outside"),
        (lambda f: rewrite_readme_path(f, "/etc/passwd"), "leads outside"),
        (lambda f: rewrite_readme_path(f, "passwd"), "leads outside"),  # a link in the folder, out of it
        (lambda f: rewrite_readme_path(f, "etc/passwd"), "leads outside"),
        (lambda f: rewrite_readme_path(f, "data/missing.parquet"), "is not a file"),
        (lambda f: (f / "amnesia_build.json").unlink(), "amnesia_build.json"),
        (lambda f: (f / "README.md").unlink(), "README.md"),
        # The audit runs first: a folder whose splits break an invariant is not published.
        (lambda f: (f / "data/forget_10/train-00000-of-00001.parquet").unlink(), "forget_10"),
    ],
)
def test_dataset_publish_refuses_what_leaves_or_breaks_the_layout(dataset, capsys, change, message):
    change(dataset)
    assert main(["amnesia", "publish", str(dataset), "--repo", "org/amnesia", "--dry-run"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("repo", ["../../etc", "org", "org/name/extra", "org/na me", "org/.."])
def test_dataset_publish_refuses_a_bad_repo_id(dataset, capsys, repo):
    assert main(["amnesia", "publish", str(dataset), "--repo", repo, "--dry-run"]) == 2
    assert "--repo" in capsys.readouterr().err


def test_dataset_publish_of_a_missing_folder_is_an_error(tmp_path, capsys):
    assert main(["amnesia", "publish", str(tmp_path / "nope"), "--repo", "org/x", "--dry-run"]) == 2
    assert "nope" in capsys.readouterr().err


# ----- models ----------------------------------------------------------------------------------------------

MODEL_NAMES = [
    "README.md",
    "model.safetensors",
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "unlearning_config.json",
    "conventions.json",
    "probe.json",
    "best/model.safetensors",
    "best/config.json",
]


@pytest.fixture()
def model(tmp_path) -> Path:
    folder = tmp_path / "model"
    for name in MODEL_NAMES:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")
    keep_carelessly(
        folder, {"notes.txt": "private", "qa/train.jsonl": "{}"}, {"etc": "/etc", "shadow": "/etc/passwd"}
    )
    return folder


def test_model_dry_run_lists_only_the_model_files(model, capsys):
    assert main(["publish", "--model", str(model), "--repo-id", "me/model", "--dry-run"]) == 0
    out = capsys.readouterr().out
    listed = sorted(line.strip() for line in out.splitlines()[:-1])
    assert listed == sorted(MODEL_NAMES)
    assert f"{len(MODEL_NAMES)} files would be uploaded" in out


def test_model_upload_commits_only_the_model_files(model, hub_commits):
    from medunlearn.unlearn.publish import publish_model

    publish_model(model, "me/model")
    assert hub_commits == [("me/model", sorted(MODEL_NAMES), "model")]


def test_a_model_file_that_links_out_is_refused(model, capsys):
    (model / "config.json").unlink()
    (model / "config.json").symlink_to("/etc/passwd")
    assert main(["publish", "--model", str(model), "--repo-id", "me/model", "--dry-run"]) == 2
    assert "config.json" in capsys.readouterr().err


def test_a_best_folder_that_links_out_is_not_read(model, capsys):
    shutil.rmtree(model / "best")
    (model / "best").symlink_to("/etc")
    assert main(["publish", "--model", str(model), "--repo-id", "me/model", "--dry-run"]) == 0
    assert "best/" not in capsys.readouterr().out


@pytest.mark.parametrize("repo", ["../../etc", "model", "me/mo del"])
def test_model_publish_refuses_a_bad_repo_id(model, capsys, repo):
    assert main(["publish", "--model", str(model), "--repo-id", repo, "--dry-run"]) == 2
    assert "--repo-id" in capsys.readouterr().err


def test_model_publish_of_a_missing_folder_is_an_error(tmp_path, capsys):
    assert main(["publish", "--model", str(tmp_path / "nope"), "--repo-id", "me/x", "--dry-run"]) == 2
    assert "nope" in capsys.readouterr().err
