"""Reading the editor's mcpServers entries; pinned arguments; secrets."""

from __future__ import annotations

import pytest

from runtime.mcp.config import REDACTED, ConfigProblem, HttpServer, StdioServer, parse_servers, redact
from runtime.mcp.pinning import PinError, inject, parse_pins, strip_schema, supplied_pins

CTX = {"id": "sess_1", "cwd": "/srv/ws"}


def test_stdio_entries_keep_args_and_env_pairs():
    specs, problems = parse_servers(
        [{"name": "fs", "command": "/bin/srv", "args": ["-v"], "env": [{"name": "TOKEN", "value": "abcd1234"}]}], CTX
    )
    assert problems == []
    assert specs == [StdioServer("fs", "/bin/srv", ("-v",), (("TOKEN", "abcd1234"),))]


def test_http_and_sse_entries_keep_header_pairs():
    specs, _ = parse_servers(
        [
            {
                "type": "http",
                "name": "a",
                "url": "https://x/mcp",
                "headers": [{"name": "Authorization", "value": "B x"}],
            },
            {"type": "sse", "name": "b", "url": "http://y/sse", "headers": []},
        ],
        CTX,
    )
    assert specs == [
        HttpServer("a", "https://x/mcp", "http", (("Authorization", "B x"),)),
        HttpServer("b", "http://y/sse", "sse"),
    ]


def test_bad_entries_become_problems_without_hiding_the_good_ones():
    specs, problems = parse_servers(
        [
            {"name": "nocmd", "args": [], "env": []},
            {"name": "badenv", "command": "x", "args": [], "env": {"A": "b"}},
            {"type": "acp", "name": "inproc", "serverId": "s"},
            {"type": "http", "name": "nourl", "headers": []},
            "garbage",
            {"name": "ok", "command": "x", "args": [], "env": []},
        ],
        CTX,
    )
    assert [s.name for s in specs] == ["ok"]
    assert [p.name for p in problems] == ["nocmd", "badenv", "inproc", "nourl", "mcp-5"]
    assert all(isinstance(p, ConfigProblem) and p.message for p in problems)


def test_secrets_are_not_in_the_records_repr():
    specs, _ = parse_servers(
        [
            {"name": "fs", "command": "/bin/srv", "args": [], "env": [{"name": "TOKEN", "value": "topsecret-1"}]},
            {
                "type": "http",
                "name": "h",
                "url": "https://u:pw-12345@x/mcp?key=qk-9876",
                "headers": [{"name": "Authorization", "value": "Bearer hdr-secret"}],
            },
        ],
        CTX,
    )
    assert "topsecret-1" not in repr(specs[0])
    assert "hdr-secret" not in repr(specs[1])
    assert set(specs[1].secrets()) >= {"Bearer hdr-secret", "pw-12345", "qk-9876"}


def test_redact_replaces_longest_secrets_first_and_ignores_tiny_values():
    assert redact("key=abcdefgh and abcdef", ["abcdef", "abcdefgh"]) == f"key={REDACTED} and {REDACTED}"
    assert redact("debug is true", ["true", "debug"]) == "debug is true"


def test_pins_resolve_literals_env_and_session_context():
    meta = {
        "gatewright": {
            "pinned": {
                "search": {
                    "tenant": "acme",
                    "project": {"$env": "PROJ"},
                    "root": {"$session": "cwd"},
                    "filter": {"a": [1]},
                }
            }
        }
    }
    pins = parse_pins(meta, CTX, {"PROJ": "p-42"})
    assert pins == {"search": {"tenant": "acme", "project": "p-42", "root": "/srv/ws", "filter": {"a": [1]}}}


@pytest.mark.parametrize(
    "meta",
    [
        {"gatewright": {"pinned": {"search": {"tenant": {"$env": "MISSING"}}}}},
        {"gatewright": {"pinned": {"search": {"tenant": {"$session": "password"}}}}},
        {"gatewright": {"pinned": ["search"]}},
        {"gatewright": {"pinned": {"search": "tenant"}}},
        {"gatewright": "yes"},
    ],
)
def test_unusable_pins_refuse_the_server(meta):
    with pytest.raises(PinError):
        parse_pins(meta, CTX, {})
    entry = {"name": "t", "command": "x", "args": [], "env": [], "_meta": meta}
    specs, problems = parse_servers([entry], CTX, {})
    assert specs == [] and problems[0].name == "t"


def test_a_pin_error_names_the_argument_but_not_a_value():
    with pytest.raises(PinError) as err:
        parse_pins({"gatewright": {"pinned": {"search": {"tenant": {"$env": "TENANT_ID"}}}}}, CTX, {})
    assert "tenant" in str(err.value) and "TENANT_ID" in str(err.value)


def test_other_meta_is_ignored():
    assert parse_pins({"zed": {"x": 1}}, CTX) == {}
    assert parse_pins(None, CTX) == {}


def test_pinned_fields_leave_the_schema_and_come_back_at_execution():
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "tenant": {"type": "string"}},
        "required": ["q", "tenant"],
    }
    stripped = strip_schema(schema, {"tenant": "acme"})
    assert stripped == {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert schema["required"] == ["q", "tenant"]  # the original is untouched
    assert strip_schema({"type": "object", "properties": {"t": {}}, "required": ["t"]}, {"t": 1}) == {
        "type": "object",
        "properties": {},
    }
    assert inject({"q": "x"}, {"tenant": "acme"}) == {"q": "x", "tenant": "acme"}
    assert supplied_pins({"q": "x", "tenant": "evil"}, {"tenant": "acme"}) == ["tenant"]


def test_log_records_from_any_logger_have_registered_secrets_scrubbed_even_after_the_session_closed():
    import io
    import logging

    from runtime.mcp.config import StdioServer, register_secrets

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        register_secrets(StdioServer("s", "/bin/x", env=(("K", "sk-live-abcdef"),)))
        logging.getLogger("httpx2.fake").warning("POST https://x/mcp?key=%s failed", "sk-live-abcdef")
    finally:
        root.removeHandler(handler)
    assert "sk-live-abcdef" not in stream.getvalue()
    assert REDACTED in stream.getvalue()


def test_passed_through_and_path_values_are_not_registered_as_secrets(monkeypatch, tmp_path):
    """An MCP env value the agent's environment already holds under that name (a PATH passed through) or that names
    existing absolute paths is not a secret: registering it would strip PATH from every child and blank paths in
    every tool result."""
    from runtime import secrets
    from runtime.mcp.config import StdioServer, register_secrets

    monkeypatch.setenv("GW_PLAIN_SETTING", "plain-setting-value")
    register_secrets(
        StdioServer(
            "s",
            "/bin/x",
            env=(
                ("GW_PLAIN_SETTING", "plain-setting-value"),
                ("WORKDIR", str(tmp_path)),
                ("SEARCH", f"{tmp_path}:{tmp_path}"),
                ("TICKET_KEY", "tk-0123456789"),
            ),
        )
    )
    values = secrets.secret_values()
    assert "tk-0123456789" in values
    assert not {"plain-setting-value", str(tmp_path), f"{tmp_path}:{tmp_path}"} & set(values)
    assert secrets.child_environ()["GW_PLAIN_SETTING"] == "plain-setting-value"
