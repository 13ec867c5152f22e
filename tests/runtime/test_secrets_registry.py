"""The secret registry (`runtime.secrets`) in process: what a child inherits, what a sink writes, and where the
registrations come from (the model config, MCP entries, `authenticate`). The end-to-end proof, through the real
binary, is tests/security/test_security_secrets.py."""

from __future__ import annotations

import io
import logging
import uuid

import orjson
import pytest

from runtime import secrets
from runtime.secrets import REDACTED, SecretRegistry

ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/u",
    "GITHUB_TOKEN": "ghp-0123456789abcdef",
    "GATEWRIGHT_MODE": "auto",
    "CORP_LLM_KEY": "corp-0123456789",
    "ALIAS": "corp-0123456789",
    "DB_URL": "postgres://u:corp-0123456789@db/x",
    "SHORT": "abc",
}


@pytest.fixture
def reg() -> SecretRegistry:
    """A registry of its own, over an environment the test controls."""
    return SecretRegistry(dict(ENV))


def test_a_child_inherits_no_registered_name_no_marker_name_no_own_setting_and_no_registered_value(reg):
    reg.register_names(["CORP_LLM_KEY", "SHORT"])
    env = reg.child_environ()
    assert env == {"PATH": "/usr/bin:/bin", "HOME": "/home/u"}, env


def test_before_registration_only_marker_names_and_own_settings_are_kept_from_children(reg):
    env = reg.child_environ()
    assert "GITHUB_TOKEN" not in env and "GATEWRIGHT_MODE" not in env
    assert env["CORP_LLM_KEY"] == "corp-0123456789"  # nobody said it is a key: this is hole 7 before the config


def test_an_editor_terminal_env_blanks_every_secret_name_known(reg):
    reg.register_names(["CORP_LLM_KEY", "NOT_IN_OUR_ENV"])
    env = reg.blank_secret_names({"PATH": "/usr/bin"})
    assert env == {
        "PATH": "/usr/bin",
        "CORP_LLM_KEY": "",
        "NOT_IN_OUR_ENV": "",
        "GITHUB_TOKEN": "",
        "GATEWRIGHT_MODE": "",
    }


def test_redaction_replaces_the_longest_value_first_and_skips_short_ones(reg):
    reg.register_values(["abcdefgh", "abcdefgh-and-more"])
    reg.register_values(["short"])
    assert reg.redact_text("x abcdefgh-and-more y abcdefgh z short") == f"x {REDACTED} y {REDACTED} z short"


def test_redacting_an_object_keeps_its_shape_and_returns_it_unchanged_when_clean(reg):
    reg.register_values(["s3cr3t-value"])
    clean = {"a": [1, "b", ("c",)]}
    assert reg.redact(clean) == clean
    assert reg.redact({"k s3cr3t-value": ["x s3cr3t-value", 3, None]}) == {f"k {REDACTED}": [f"x {REDACTED}", 3, None]}


def test_the_cheap_json_check_finds_a_value_with_characters_json_escapes(reg):
    odd = 'we"ird\\val\nue'
    reg.register_values([odd])
    encoded = orjson.dumps({"t": f"before {odd} after"})
    assert reg.json_has_secret(encoded) and reg.json_has_secret(encoded.decode())
    assert not reg.json_has_secret(orjson.dumps({"t": "nothing here"}))
    assert orjson.loads(orjson.dumps(reg.redact(orjson.loads(encoded)))) == {"t": f"before {REDACTED} after"}


def test_a_numeric_value_in_a_json_number_is_left_alone_and_the_json_stays_valid():
    value = str(10**11 + uuid.uuid4().int % 10**10)
    secrets.register_values([value])
    data = secrets.redacted_json({"n": int(value), "s": f"pin {value}"})
    assert orjson.loads(data) == {"n": int(value), "s": f"pin {REDACTED}"}


def test_a_log_record_of_any_logger_is_scrubbed_message_arguments_and_traceback():
    value = f"log-secret-{uuid.uuid4().hex}"
    secrets.register_values([value])
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        secrets.install_log_filter()
        logging.getLogger("thirdparty.http").warning("GET https://x/?k=%s", value)
        try:
            raise RuntimeError(f"bad key {value}")
        except RuntimeError:
            logging.getLogger("gatewright.rpc").exception("crashed")
    finally:
        root.removeHandler(handler)
    out = stream.getvalue()
    assert value not in out and out.count(REDACTED) == 2, out


def test_the_model_config_registers_every_key_variable_and_its_headers(monkeypatch, tmp_path):
    from runtime.models import ModelFactory, parse_model_spec
    from runtime.models.config import load_config

    key, header = f"cfg-key-{uuid.uuid4().hex}", f"cfg-hdr-{uuid.uuid4().hex}"
    conf = tmp_path / "c.toml"
    conf.write_text(
        '[providers.corp]\nkind = "openai"\nbase_url = "http://x/v1"\napi_key_env = "CORP_KEY_VAR"\n'
        f'headers = {{ "X-Auth" = "{header}", "Content-Type" = "application/json" }}\n',
        encoding="utf-8",
    )
    env = {"CORP_KEY_VAR": key}
    ModelFactory(parse_model_spec("openai:gpt-4.1"), load_config(conf, env), env=env)
    assert {"CORP_KEY_VAR", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"} <= secrets.secret_names()
    assert {key, header} <= set(secrets.secret_values())
    assert "application/json" not in secrets.secret_values()  # a protocol header, not a credential


def test_an_http_mcp_server_registers_its_header_values_and_url_credentials():
    from runtime.mcp.config import HttpServer, register_secrets

    token, password = f"Bearer mcp-{uuid.uuid4().hex}", f"pw-{uuid.uuid4().hex}"
    register_secrets(HttpServer("h", f"https://user:{password}@x/mcp", headers=(("Authorization", token),)))
    assert {token, password} <= set(secrets.secret_values())


def test_the_session_store_never_writes_a_registered_value(tmp_path):
    from runtime.models.base import AssistantMessage, TextPart, UserMessage
    from runtime.store import SessionRecord, SessionStore

    value = f"store-secret-{uuid.uuid4().hex}"
    secrets.register_values([value])
    store = SessionStore(tmp_path / "s.db")
    store.create(SessionRecord("s1", "/w", "safe", title=f"about {value}", state={"k": value}))
    store.append_events("s1", [("agent_message_chunk", {"content": {"type": "text", "text": f"is {value}"}})])
    store.append_messages("s1", 0, 0, [UserMessage((TextPart(f"key {value}"),)), AssistantMessage(f"ok {value}")])
    store.save("s1", title=f"now {value}", state={"k": [value]})
    store.replace_context("s1", [AssistantMessage(value)], {"x": value})
    assert store.get("s1").title == f"now {REDACTED}"
    store.close()
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert value.encode() not in data


def test_a_secret_looking_variable_that_names_a_file_is_kept_from_children_but_its_path_is_not_redacted(tmp_path):
    creds = tmp_path / "credentials"
    creds.write_text("x", encoding="utf-8")
    reg = SecretRegistry({"AWS_SHARED_CREDENTIALS_FILE": str(creds), "PATH": "/usr/bin"})
    assert reg.child_environ() == {"PATH": "/usr/bin"}
    assert reg.redact_text(f"reading {creds}") == f"reading {creds}"
