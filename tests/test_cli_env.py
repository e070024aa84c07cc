"""``medunlearn env``: what a bug report needs, and never a token's value."""

from __future__ import annotations

import importlib.metadata
import json

from medunlearn.cli import main
from medunlearn.cli.env import ENVIRONMENT_FLAGS, environment_report, format_report

SECRET = "hf_notARealTokenButSecret0123456789"


def test_env_prints_versions_devices_and_flags_but_never_the_token(monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET + "-openai")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    assert main(["env"]) == 0
    printed = capsys.readouterr().out
    assert SECRET not in printed and "notARealToken" not in printed
    assert "- HF_TOKEN: set" in printed and "- HUGGING_FACE_HUB_TOKEN: not set" in printed
    assert "- OPENAI_API_KEY: set" in printed
    assert "- HF_HUB_OFFLINE: 1" in printed
    for package in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers"):
        assert f"- {package}: {importlib.metadata.version(package)}" in printed
    assert "- CUDA available: " in printed and "- MPS available: " in printed


def test_env_json_is_the_same_report_and_holds_no_token(monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    assert main(["env", "--json"]) == 0
    printed = capsys.readouterr().out
    report = json.loads(printed)
    assert SECRET not in printed
    assert report["tokens"]["HF_TOKEN"] == "set"
    assert set(report) == {"system", "packages", "devices", "settings", "tokens"}


def test_vllm_is_listed_only_where_installed_and_a_missing_core_package_is_said():
    def versions(installed):
        return lambda name: installed.get(name)

    def report(installed):
        return environment_report({}, versions(installed), devices=dict, stored_token=lambda: None)

    without = report({"torch": "2.13.0"})
    assert "vllm" not in without["packages"]
    assert without["packages"]["torch"] == "2.13.0" and without["packages"]["trl"] == "not installed"
    with_vllm = report({"torch": "2.13.0", "vllm": "0.32.0"})
    assert with_vllm["packages"]["vllm"] == "0.32.0"
    assert without["settings"] == {name: "not set" for name in ENVIRONMENT_FLAGS}
    assert without["tokens"]["HF token found by huggingface_hub"] == "no"


def test_a_token_found_only_in_the_login_file_is_reported_as_found_not_shown():
    report = environment_report({}, lambda name: "1.0", devices=dict, stored_token=lambda: SECRET)
    text = format_report(report)
    assert "- HF token found by huggingface_hub: yes" in text and SECRET not in text
