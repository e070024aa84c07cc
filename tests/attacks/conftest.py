"""Fixtures the attack tests share: a 20-patient AMNESIA folder and a saved tiny Llama."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def amnesia_folder(tmp_path_factory):
    from medunlearn.amnesia import build_amnesia_folder

    return build_amnesia_folder(tmp_path_factory.mktemp("amnesia") / "amnesia", patients=20, seed=0)


@pytest.fixture()
def saved_model(tiny_model, tiny_tokenizer, tmp_path):
    folder = tmp_path / "tiny"
    tiny_model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder
