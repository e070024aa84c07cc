"""No secret in what a command prints: URL credentials, secret query values, bearer tokens, token shapes and
the values of the secret environment variables are masked, in errors, prints, logs and warnings."""

from __future__ import annotations

import logging
import re

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
        # The whole userinfo, up to the last '@' before the host, whatever the password holds.
        ("at http://alice:p@SECRETPW@127.0.0.1:9/v1", "at http://***@127.0.0.1:9/v1"),
        ("at http://alice:p@ss#SECRET@127.0.0.1:9/v1", "at http://***@127.0.0.1:9/v1"),
        ("spec 'openai:m@http://alice:BAD SECRET@h:9/v1'", "spec 'openai:m@http://***@h:9/v1'"),
        ("http://u:p?q@X@[::1/v1 and openai:b@http://h:9", "http://***@[::1/v1 and openai:b@http://h:9"),
        (
            "openai:a@http://h1:9 × 3, openai:b@http://x:y@h2:9",
            "openai:a@http://h1:9 × 3, openai:b@http://***@h2:9",
        ),
        # A '/' in the password: 'u:pa' cannot be a host (no port is 'pa'), so the userinfo runs past it.
        ("at http://u:pa/ss@host/v1", "at http://***@host/v1"),
        (
            "at http://alice:p/a/ss word@h:9/v1 and openai:n@http://h:9",
            "at http://***@h:9/v1 and openai:n@http://h:9",
        ),
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
        # An '@' after a host's '/' is the path's (ambiguous with a token holding a '/': see secrets.py).
        "see http://host/a@b and https://medium.com/@someone",
        "http://host:8000/users/@me and http://[::1]:8000/a@b",
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


PASSWORDS = ["p@SECRETPW", "p@ss#SECRET", "BAD SECRET", "q?x=SECRET"]


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize(
    ("argv", "url_at"),
    [
        (["amnesia", "build", "--source", "pmc-patients", "--notes", "n.csv", "--generate"], "openai:m@{}"),
        (["amnesia", "build", "--source", "pmc-patients", "--notes", "n.csv", "--judge"], "openai:m@{}"),
        (["biodivergence", "build", "--synthetic", "--labeller"], "openai:m@{}"),
        (["evaluate", "--model", "m", "--data", "d", "--engine", "vllm", "--vllm-url"], "{}"),
    ],
)
@pytest.mark.parametrize("host", ["127.0.0.1:99999", "[::1", "h:0"])
def test_a_bad_llm_url_is_refused_when_parsed_with_its_password_masked(
    tmp_path, capsys, argv, url_at, password, host
):
    """A URL that is not one (a port past 65535, an unbalanced bracket) is a named error when the command line
    is parsed, never an httpx or socket traceback; the message shows the URL with its userinfo masked."""
    url = url_at.format(f"http://alice:{password}@{host}/v1")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        main([*argv, url, "--out", str(out)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"error: argument {argv[-1]}: " in err, err
    assert "SECRET" not in err and "alice" not in err and "Traceback" not in err and not out.exists()
    assert "http://***@" in err or argv[-1] == "--vllm-url"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:99999/v1", "the port '99999' is not a number from 1 to 65535"),
        ("http://u:X@[::1/v1", "the host has an unbalanced '[' or ']'"),
        ("http://:8000/v1", "the URL names no host"),
        ("http://u:BAD SECRET@h:1/v1", "the URL holds a space"),
    ],
)
def test_one_check_refuses_a_bad_server_url_wherever_it_is_given(url, problem, monkeypatch):
    from medunlearn.evaluation.settings import RunnerConfig
    from medunlearn.llm import BackendSpecError, parse_spec
    from medunlearn.llm.openai_backend import OpenAIServerBackend

    with pytest.raises(BackendSpecError, match=re.escape(problem)) as caught:
        parse_spec(f"openai:m@{url}")
    assert "SECRET" not in str(caught.value) and "X@" not in str(caught.value)
    with pytest.raises(BackendSpecError, match=r"vllm_url .*" + re.escape(problem)):
        _ = RunnerConfig(engine="vllm", vllm_url=url).placement
    monkeypatch.setenv("MEDUNLEARN_LLM_BASE_URL", url)
    with pytest.raises(BackendSpecError, match=r"\$MEDUNLEARN_LLM_BASE_URL .*" + re.escape(problem)):
        _ = OpenAIServerBackend("m").base_url


def test_a_bugs_traceback_is_redacted(monkeypatch, capsys):
    """A bug's traceback is printed by sys.excepthook once the command has ended: it is redacted too."""
    import sys

    from medunlearn.utils.secrets import redacted_output

    monkeypatch.setattr(
        sys, "excepthook", lambda kind, value, tb: print(f"Traceback: {value}", file=sys.stderr)
    )
    with pytest.raises(RuntimeError), redacted_output():
        raise RuntimeError("at http://alice:p@SECRET@h:9/v1")
    sys.excepthook(RuntimeError, RuntimeError("at http://alice:p@SECRET@h:9/v1"), None)
    assert capsys.readouterr().err == "Traceback: at http://***@h:9/v1\n"


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
