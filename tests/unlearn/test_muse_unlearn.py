"""``medunlearn unlearn --benchmark muse``: the forget corpus is a MUSE folder's ``raw/forget`` (or a chosen
``scal``/``sust`` fold), the retain corpus ``raw/retain1`` (the reference's, open-unlearning@d3d7cf9
configs/experiment/unlearn/muse/default.yaml:13), trained as raw text; end to end on a tiny model."""

from __future__ import annotations

import json
import shutil

import pytest
from safetensors.torch import load_file

from medunlearn.cli import main
from medunlearn.models import build_tiny_llama
from medunlearn.muse.build import build_muse_folder
from medunlearn.muse.data import load_muse_split
from medunlearn.unlearn.errors import UnlearningInputError
from medunlearn.unlearn.run import UnlearningDataArguments
from medunlearn.unlearn.sources import load_corpus, muse_split


@pytest.fixture(scope="module")
def muse_dir(tmp_path_factory):
    return build_muse_folder(tmp_path_factory.mktemp("muse") / "data", articles=8, seed=0)


@pytest.fixture()
def model_dir(tmp_path, tiny_tokenizer):
    import torch

    torch.manual_seed(0)
    folder = tmp_path / "model"
    build_tiny_llama(tiny_tokenizer).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def texts(folder, config, split):
    return [row["text"] for row in load_muse_split(folder, config, split)]


@pytest.mark.parametrize(
    ("choice", "role", "expected"),
    [
        ("forget", "forget", ("raw", "forget")),
        ("raw/forget", "forget", ("raw", "forget")),
        ("scal/forget_2", "forget", ("scal", "forget_2")),
        ("sust/forget_3", "forget", ("sust", "forget_3")),
        ("retain1", "retain", ("raw", "retain1")),
        ("raw/retain2", "retain", ("raw", "retain2")),
    ],
)
def test_muse_split_names(choice, role, expected):
    assert muse_split(choice, role) == expected


@pytest.mark.parametrize(
    ("choice", "role"),
    [
        ("raw/holdout", "forget"),
        ("scal/forget_5", "forget"),
        ("raw/forget", "retain"),
        ("knowmem/forget_qa", "forget"),
    ],
)
def test_a_split_that_is_not_a_corpus_is_refused_naming_the_flag_and_choices(choice, role):
    with pytest.raises(UnlearningInputError, match=f"--{role} {choice!r}.*raw/"):
        muse_split(choice, role)


def test_the_corpus_is_raw_forget_and_raw_retain1_or_the_chosen_fold(muse_dir):
    corpus = load_corpus(
        UnlearningDataArguments(str(muse_dir), "raw/forget", benchmark="muse"), need_retain=True
    )
    assert corpus.data_format == "text" and corpus.retain_name == "raw/retain1"
    assert corpus.forget[0]["text"] == texts(muse_dir, "raw", "forget")
    assert corpus.retain[0]["text"] == texts(muse_dir, "raw", "retain1")
    fold = load_corpus(
        UnlearningDataArguments(str(muse_dir), "sust/forget_3", benchmark="muse"), need_retain=False
    )
    assert fold.forget[0]["text"] == texts(muse_dir, "sust", "forget_3") and fold.retain is None
    assert texts(muse_dir, "sust", "forget_3") != texts(muse_dir, "raw", "forget")


def unlearn(muse_dir, model_dir, out, *extra):
    return main(
        [
            "unlearn",
            "--benchmark",
            "muse",
            "--data",
            str(muse_dir),
            "--model",
            str(model_dir),
            "--method",
            "GradDiff",
            "--out",
            str(out),
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "2",
            "--gradient_accumulation_steps",
            "1",
            "--learning_rate",
            "1e-3",
            "--disable_tqdm",
            "true",
            *extra,
        ]
    )


@pytest.mark.slow
def test_unlearn_muse_end_to_end_changes_the_weights_and_says_the_corpus(
    muse_dir, model_dir, tmp_path, capsys
):
    out = tmp_path / "unlearned"
    assert unlearn(muse_dir, model_dir, out, "--max_length", "32") == 0, capsys.readouterr().err
    before, after = load_file(model_dir / "model.safetensors"), load_file(out / "model.safetensors")
    assert any(not before[name].equal(after[name]) for name in before)
    card = (out / "README.md").read_text()
    assert "| benchmark | MUSE |" in card
    assert "| forget corpus | `raw/forget`" in card and "| retain corpus | `raw/retain1`" in card
    assert "| unlearning steps | 2 |" in card
    saved = json.loads((out / "unlearning_config.json").read_text())
    assert saved["data_format"] == "text" and saved["text_chunking"] == "document"


@pytest.mark.slow
def test_the_open_unlearning_preset_selects_the_muse_recipe(muse_dir, model_dir, tmp_path, capsys):
    out = tmp_path / "reference"
    assert (
        unlearn(muse_dir, model_dir, out, "--preset", "open-unlearning", "--forget", "scal/forget_2") == 0
    ), capsys.readouterr().err
    saved = json.loads((out / "unlearning_config.json").read_text())
    assert saved["text_chunking"] == "stream" and saved["max_length"] == 2048
    assert saved["lr_scheduler_type"] == "constant" and saved["weight_decay"] == 0.0
    assert "| forget corpus | `scal/forget_2`" in (out / "README.md").read_text()


def test_a_muse_folder_missing_a_split_and_a_qa_format_are_named_errors(muse_dir, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(muse_dir, broken)
    for path in (broken / "raw").glob("retain1*"):
        path.unlink()
    readme = broken / "README.md"
    readme.unlink()  # the split is then found by scanning the folder: it is absent
    assert unlearn(broken, tmp_path / "no-model", tmp_path / "o1") == 2
    assert "lacks split 'retain1'" in capsys.readouterr().err
    assert unlearn(muse_dir, tmp_path / "no-model", tmp_path / "o2", "--data_format", "qa") == 2
    assert "--benchmark muse" in capsys.readouterr().err and not (tmp_path / "o2").exists()
