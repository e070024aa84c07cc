"""``medunlearn publish`` checks the folder before any upload (dry run, offline)."""

from __future__ import annotations

import huggingface_hub
from cli_checks import write_model_file

from medunlearn.cli import main
from medunlearn.unlearn.publish import publish_model
from medunlearn.utils.digest import DIGEST_FILE


def make_folder(tmp_path, *names):
    """A model folder of ``names``, each a file that passes the publish audit."""
    folder = tmp_path / "model"
    folder.mkdir()
    for name in names:
        write_model_file(folder / name)
    return folder


def test_dry_run_lists_the_files(tmp_path, capsys):
    folder = make_folder(tmp_path, "README.md", "model.safetensors", "config.json")
    assert main(["publish", "--model", str(folder), "--repo-id", "me/model", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "model.safetensors" in out and "3 files would be uploaded to me/model" in out


def test_pickled_weights_and_missing_card_are_refused(tmp_path, capsys):
    folder = make_folder(tmp_path, "README.md", "model.safetensors", "training_args.bin")
    assert main(["publish", "--model", str(folder), "--repo-id", "me/model", "--dry-run"]) == 2
    assert "training_args.bin" in capsys.readouterr().err
    (folder / "training_args.bin").unlink()
    (folder / "README.md").unlink()
    assert main(["publish", "--model", str(folder), "--repo-id", "me/model", "--dry-run"]) == 2
    assert "model card" in capsys.readouterr().err


def test_the_weights_digest_cache_is_not_uploaded(tmp_path, monkeypatch):
    folder = make_folder(tmp_path, "README.md", "model.safetensors", "config.json", DIGEST_FILE)
    calls = {}

    class RecordingApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kwargs):
            calls["create_repo"] = repo_id

        def create_commit(self, repo_id, operations, **kwargs):
            calls["create_commit"] = (repo_id, [op.path_in_repo for op in operations])

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    files = publish_model(folder, "me/model")
    assert DIGEST_FILE not in [p.name for p in files]
    # Only the model's files are committed (the digest cache is not one of them).
    assert calls["create_commit"] == ("me/model", ["README.md", "config.json", "model.safetensors"])
