"""Publishing uploads only what the layout names, after an audit (dataset) or the model checks (model):
never a ``.env``, a link leading out of the folder, or a README path like ``../../etc/passwd``; a missing
folder and a bad repository id are named errors (exit 2). Offline: dry runs, and a recording stand-in for
the Hub."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import huggingface_hub
import pytest
from cli_checks import write_model_file

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
        write_model_file(folder / name)
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


def _shards(folder: Path, names: list[str], index: list[str] | None) -> None:
    (folder / "model.safetensors").unlink()
    for name in names:
        write_model_file(folder / name)
    if index is not None:
        weight_map = {f"w{i}": name for i, name in enumerate(index)}
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
# (damage done to a model folder, the file named, what the error says): each was listed by a dry run before.
DAMAGED_MODELS = {
    "a pickle named model.safetensors": (
        lambda f: (f / "model.safetensors").write_bytes(pickle.dumps({"a": 1})),
        "model.safetensors",
        "is not a readable safetensors file",
    ),
    "random bytes as weights": (
        lambda f: (f / "model.safetensors").write_bytes(bytes(range(256)) * 20),
        "model.safetensors",
        "is not a readable safetensors file",
    ),
    "truncated weights": (
        lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:-4]),
        "model.safetensors",
        "is not a readable safetensors file",
    ),
    "damaged best/ weights": (
        lambda f: (f / "best" / "model.safetensors").write_bytes(b"\x00" * 8),
        "best/model.safetensors",
        "is not a readable safetensors file",
    ),
    "invalid config.json": (
        lambda f: (f / "config.json").write_text("{not json"),
        "config.json",
        "line 1: invalid JSON",
    ),
    "config.json without model_type": (
        lambda f: (f / "config.json").write_text('{"a": 1}'),
        None,  # named as its folder's config.json
        "its config.json has no 'model_type'",
    ),
    "invalid tokenizer.json": (
        lambda f: (f / "tokenizer.json").write_text('{"a": 1'),
        "tokenizer.json",
        "invalid JSON",
    ),
    "shards without their index": (
        lambda f: _shards(f, SHARDS, None),
        "model.safetensors.index.json",
        "missing: it names the shards",
    ),
    "an index naming a shard that is not there": (
        lambda f: _shards(f, SHARDS[:1], SHARDS),
        "model.safetensors.index.json",
        "field 'weight_map': names the shards",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGED_MODELS))
@pytest.mark.parametrize("dry_run", [True, False])
def test_model_publish_audits_every_file_first(model, capsys, hub_commits, case, dry_run):
    damage, name, message = DAMAGED_MODELS[case]
    damage(model)
    argv = ["publish", "--model", str(model), "--repo-id", "me/model"] + (["--dry-run"] if dry_run else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    named = f"model folder {model}:" if name is None else f"{model / name}"
    assert "Traceback" not in err and f"medunlearn publish: error: {named}" in err, err
    assert message in err and hub_commits == []


def test_sharded_weights_with_their_index_are_published(model, capsys):
    _shards(model, SHARDS, SHARDS)
    assert main(["publish", "--model", str(model), "--repo-id", "me/model", "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in [*SHARDS, "model.safetensors.index.json"])


def test_the_shard_index_is_read_once(model, monkeypatch):
    """Before: the audit read every JSON file, then the shard check read the index a second time."""
    from medunlearn.unlearn import publish

    reads = []

    def counting(path, *args, **kwargs):
        reads.append(Path(path).name)
        return read_json(path, *args, **kwargs)

    read_json = publish.read_json
    monkeypatch.setattr(publish, "read_json", counting)
    _shards(model, SHARDS, SHARDS)
    publish.files_to_publish(model)
    assert reads.count("model.safetensors.index.json") == 1


@pytest.mark.parametrize("name", ["secrets .safetensors", "weights.safetensors", "model.safetensors.bak"])
def test_a_safetensors_name_outside_the_layout_is_not_uploaded(model, capsys, name):
    (model / name).write_text("HF_TOKEN=hf_topsecret\n")  # a .env copy, renamed
    assert main(["publish", "--model", str(model), "--repo-id", "me/model", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert name not in out and f"{len(MODEL_NAMES)} files would be uploaded" in out
