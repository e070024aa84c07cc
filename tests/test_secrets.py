"""No secret in what a command prints: URL credentials, secret query values, bearer tokens, token shapes and
the values of the secret environment variables are masked, in errors, prints, logs and warnings."""

from __future__ import annotations

import logging

import pytest

from medunlearn.cli import main
from medunlearn.cli.verbosity import DEFAULT, _redacting_showwarning, output_at
from medunlearn.utils.secrets import MASK, redact

HF_TOKEN = "hf_" + "A1b2C3d4" * 4
OPENAI_KEY = "sk-" + "proj_Z9y8X7w6" * 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("at http://admin:hunter22@10.0.0.2:8000/v1", "at http://***@10.0.0.2:8000/v1"),
        ("at https://tok3n@example.org/v1 now", "at https://***@example.org/v1 now"),
        ("url=http://h:8000/v1?api_key=abc123&model=m", "url=http://h:8000/v1?api_key=***&model=m"),
        ("https://h/x?X-Amz-Signature=deadbeef#top", "https://h/x?X-Amz-Signature=***#top"),
        ("header Authorization: Bearer eyJ.abc-def_ghi", "header Authorization: Bearer ***"),
        (f"token {HF_TOKEN} refused", "token *** refused"),
        (f"key {OPENAI_KEY}.", "key ***."),
    ],
)
def test_each_kind_of_secret_is_masked(text, expected):
    assert redact(text, environ={}) == expected


@pytest.mark.parametrize(
    "text",
    [
        "http://127.0.0.1:8000/v1 serves 'unlearned' (root /models/ft)",
        "the key forget_10 has 88 patients; see docs/cli.md?x=1",
        "email me at someone@example.org about sk-short",
        "openai:meta-llama/Llama-3.1-8B-Instruct@http://127.0.0.1:8000/v1",
    ],
)
def test_text_without_secrets_is_left_as_it_is(text):
    assert redact(text, environ={}) == text


def test_the_values_of_secret_variables_are_masked_wherever_they_appear():
    environ = {"MEDUNLEARN_LLM_API_KEY": "plain-key-42", "HF_TOKEN": "1"}
    assert redact("sent plain-key-42 twice: plain-key-42; 1 digit kept", environ) == (
        f"sent {MASK} twice: {MASK}; 1 digit kept"
    )


def test_a_command_error_and_its_warnings_print_no_password(capsys, tmp_path):
    notes = tmp_path / "notes.csv"
    notes.write_text("patient_uid,title,patient\n1-1,Pneumonia,A 30-year-old woman had fever and cough.\n")
    spec = "openai:model@http://admin:hunter22@127.0.0.1:9/v1"
    status = main(
        ["amnesia", "build", "--out", str(tmp_path / "out"), "--generate", spec, "--source", "pmc-patients"]
        + ["--notes", str(notes)]
    )
    err = capsys.readouterr().err
    assert status == 2 and "hunter22" not in err
    assert "warning: the judge panel is openai:model@http://***@127.0.0.1:9/v1" in err
    assert "error: cannot reach the LLM server at http://***@127.0.0.1:9/v1" in err


def test_log_records_are_redacted_inside_a_command(caplog):
    logger = logging.getLogger("medunlearn.test")
    with caplog.at_level(logging.WARNING), output_at(DEFAULT):
        logger.warning("retrying %s", "http://u:pw123@host/v1")
    logger.warning("outside %s", "http://u:pw123@host/v1")
    assert [record.getMessage() for record in caplog.records] == [
        "retrying http://***@host/v1",
        "outside http://u:pw123@host/v1",  # the factory is restored after the command
    ]


def test_warnings_are_redacted():
    shown = []
    show = _redacting_showwarning(lambda message, *rest: shown.append(message))
    show(UserWarning("server http://u:pw123@host/v1 slow"), UserWarning, "f.py", 1)
    assert shown == ["server http://***@host/v1 slow"]
