"""The generated wire models (`acp_server.protocol.schema`): they are what the vendored schema gives (regenerated in
memory and compared, as lsprotocol does), they read every frame of the recorded transcripts and write it back as it
was, and they read values the way the schema says (unknown fields kept, defaults on error, invalid items skipped,
forms told apart by their tag) with errors that name only the schema's own field names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from acp_server.protocol import generate
from acp_server.protocol import schema as s
from acp_server.protocol.base import WireError, dump
from tests.support.acp_schema import def_errors
from tests.support.fuzz_strategies import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS, from_schema

TRANSCRIPTS = sorted((Path(__file__).parents[1] / "transcripts").glob("*.jsonl"))


def test_the_committed_models_are_what_the_vendored_schema_gives():
    """Freshness: `python -m acp_server.protocol.generate` would write exactly the committed file."""
    assert generate.render() == generate.OUT.read_text(encoding="utf-8"), (
        "acp_server/protocol/schema.py is stale: run python -m acp_server.protocol.generate"
    )


def test_every_method_of_the_schema_has_decoders_for_its_params_and_result():
    for method, spec in s.METHODS.items():
        assert spec.params in s.DECODERS, method
        assert spec.result is None or spec.result in s.DECODERS, method
    assert s.METHODS["session/fork"].unstable and not s.METHODS["session/prompt"].unstable
    assert set(CLIENT_REQUESTS) | set(CLIENT_NOTIFICATIONS) <= set(s.METHODS)


def _frames() -> list[tuple[str, str, Any]]:
    """(definition, where, value) for every params and result in the recorded transcripts."""
    out: list[tuple[str, str, Any]] = []
    for path in TRANSCRIPTS:
        pending: dict[str, str] = {}
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            entry = json.loads(line)
            msg = entry.get("msg")
            if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
                continue
            where = f"{path.name}:{n}"
            if isinstance(msg.get("method"), str) and msg["method"] in s.METHODS:
                if "id" in msg:
                    pending[f"{entry['dir']}:{json.dumps(msg['id'])}"] = msg["method"]
                if isinstance(msg.get("params"), dict):
                    out.append((s.METHODS[msg["method"]].params, where, msg["params"]))
            elif "result" in msg:
                asked = "out" if entry["dir"] == "in" else "in"
                method = pending.get(f"{asked}:{json.dumps(msg.get('id'))}")
                result = s.METHODS[method].result if method else None
                if result is not None:
                    out.append((result, where, msg["result"]))
    return out


FRAMES = _frames()


def test_the_transcripts_hold_frames_of_many_definitions():
    assert len({name for name, _, _ in FRAMES}) >= 12


@pytest.mark.parametrize(("name", "where", "value"), FRAMES, ids=[f"{n}@{w}" for n, w, _ in FRAMES])
def test_every_recorded_params_and_result_is_read_and_written_back_as_it_was(name, where, value):
    """As it was, plus the defaults of the fields it left out (`clientCapabilities: {}` is written with `fs`,
    `terminal` and `auth` spelled out), which read back the same."""
    model = s.DECODERS[name](value, "")
    written = dump(model)
    assert _holds(written, value), (written, value)
    assert s.DECODERS[name](written, "") == model


def _holds(written: Any, original: Any) -> bool:
    """`written` has everything `original` has (`null` of an optional field and absence mean the same)."""
    if isinstance(original, dict):
        return isinstance(written, dict) and all(
            _holds(written[k], v) if k in written else v is None for k, v in original.items()
        )
    if isinstance(original, list):
        return (
            isinstance(written, list)
            and len(written) == len(original)
            and all(_holds(w, o) for w, o in zip(written, original, strict=True))
        )
    return written == original and type(written) is type(original)


# ---- reading as the schema says -------------------------------------------------------------------------------------
def test_unknown_fields_are_kept_and_written_back():
    block = {"type": "text", "text": "hi", "vendorField": {"x": 1}, "_meta": {"k": "v"}}
    model = s.content_block_from_wire(block)
    assert isinstance(model, s.TextContentBlock)
    assert model.text == "hi" and model.meta == {"k": "v"} and model.extra == {"vendorField": {"x": 1}}
    assert model.to_wire() == block


def test_attributes_are_snake_case_and_the_wire_is_camel_case():
    req = s.NewSessionRequest(cwd="/w", mcp_servers=[], additional_directories=["/x"])
    assert req.to_wire() == {"cwd": "/w", "mcpServers": [], "additionalDirectories": ["/x"]}
    assert s.NewSessionRequest.from_wire(req.to_wire()) == req


def test_a_union_is_told_apart_by_its_tag_and_untagged_forms_take_the_rest():
    assert isinstance(
        s.mcp_server_from_wire({"type": "http", "name": "h", "url": "http://x", "headers": []}), s.HttpMcpServer
    )
    stdio = {"name": "a", "command": "/bin/a", "args": [], "env": []}
    assert isinstance(s.mcp_server_from_wire(stdio), s.McpServerStdio)
    # `type` absent on the wire is the `value_id` form, as the schema says.
    picked = s.set_session_config_option_request_from_wire({"sessionId": "s", "configId": "mode", "value": "auto"})
    assert isinstance(picked, s.ValueIdSetSessionConfigOptionRequest) and picked.value == "auto"
    boolean = s.set_session_config_option_request_from_wire(
        {"sessionId": "s", "configId": "x", "type": "boolean", "value": True}
    )
    assert isinstance(boolean, s.BooleanSetSessionConfigOptionRequest) and boolean.value is True
    outcome = s.RequestPermissionResponse.from_wire({"outcome": {"outcome": "selected", "optionId": "allow"}})
    assert isinstance(outcome.outcome, s.SelectedRequestPermissionOutcome) and outcome.outcome.option_id == "allow"
    other = s.create_elicitation_response_from_wire({"action": "later", "x": 1})
    assert isinstance(other, s.OtherCreateElicitationResponse) and other.action == "later"


def test_values_that_do_not_fit_a_lenient_field_become_its_default():
    """`x-deserialize-default-on-error`: a malformed capability is not offered (only a literal `true` counts)."""
    req = s.InitializeRequest.from_wire(
        {
            "protocolVersion": 1,
            "clientCapabilities": {
                "fs": {"readTextFile": True, "writeTextFile": "yes"},
                "terminal": 1,
                "elicitation": {"form": True},
            },
        }
    )
    caps = req.client_capabilities
    assert caps.fs.read_text_file is True and caps.fs.write_text_file is False and caps.terminal is False
    assert caps.elicitation is not None and caps.elicitation.form is None
    assert (
        s.InitializeRequest.from_wire({"protocolVersion": 1, "clientCapabilities": "garbage"}).client_capabilities
        == s.InitializeRequest.from_wire({"protocolVersion": 1}).client_capabilities
    )


def test_items_that_do_not_fit_a_skipping_array_are_left_out():
    update = s.session_update_from_wire(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c",
            "title": "t",
            "content": [{"type": "nope"}, {"type": "diff", "path": "/a", "newText": ""}],
        }
    )
    assert isinstance(update, s.ToolCallSessionUpdate)
    assert [type(c) for c in update.content or []] == [s.DiffToolCallContent]


def test_mcp_server_entries_stay_json_for_the_runtime_to_read_and_report():
    """Not the schema's skipping: runtime.mcp.config tells the user about an entry it cannot start."""
    req = s.NewSessionRequest.from_wire({"cwd": "/w", "mcpServers": [{"type": "weird"}, 5]})
    assert req.mcp_servers == [{"type": "weird"}, 5]


@pytest.mark.parametrize("bad", [True, False, 1.0, -1, 65536, "1", None])
def test_a_boolean_or_a_float_is_never_an_integer_and_ranges_hold(bad):
    with pytest.raises(WireError):
        s.InitializeRequest.from_wire({"protocolVersion": bad})


@pytest.mark.parametrize(
    ("value", "path", "problem"),
    [
        ([1, 2], "", "must be an object"),
        ({"prompt": []}, "sessionId", "is required"),
        ({"sessionId": 5, "prompt": []}, "sessionId", "must be a string"),
        ({"sessionId": "s", "prompt": "x"}, "prompt", "must be an array"),
        ({"sessionId": "s", "prompt": [7]}, "prompt[0]", "must be an object"),
        (
            {"sessionId": "s", "prompt": [{"type": "video"}]},
            "prompt[0].type",
            "must be one of audio, image, resource, resource_link, text",
        ),
        ({"sessionId": "s", "prompt": [{"type": "text", "text": None}]}, "prompt[0].text", "must be a string"),
        (
            {"sessionId": "s", "prompt": [{"type": "resource", "resource": {"uri": "u"}}]},
            "prompt[0].resource",
            "fits none of its forms",
        ),
    ],
)
def test_errors_name_the_field_by_its_schema_path(value, path, problem):
    with pytest.raises(WireError) as info:
        s.PromptRequest.from_wire(value)
    assert (info.value.path, info.value.problem) == (path, problem)


def test_an_error_never_shows_a_value_or_a_key_the_peer_chose():
    secret = "sk-live-0123456789"
    cases = [
        (s.PromptRequest.from_wire, {"sessionId": "s", "prompt": [{"type": secret}]}),
        (s.SetSessionModeRequest.from_wire, {"sessionId": secret, "modeId": [secret]}),
        (s.create_elicitation_response_from_wire, {"action": "accept", "content": {secret: {"nested": secret}}}),
    ]
    for decode, value in cases:
        with pytest.raises(WireError) as info:
            decode(value, "")
        assert secret not in str(info.value) and "\n" not in str(info.value)


# ---- generated valid instances ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    sorted(
        {
            *CLIENT_REQUESTS.values(),
            *CLIENT_NOTIFICATIONS.values(),
            "RequestPermissionResponse",
            "ReadTextFileResponse",
            "CreateTerminalResponse",
            "TerminalOutputResponse",
        }
    ),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_valid_instance_is_read_and_what_is_written_back_is_valid_and_reads_the_same(name, data):
    value = data.draw(from_schema(name))
    # The integer formats (uint16, uint32, int64) bound what the JSON schema leaves open; the models hold them.
    assume(not _has_big_int(value))
    model = s.DECODERS[name](value, "")
    written = dump(model)
    assert def_errors(name, written) == []
    assert s.DECODERS[name](written, "") == model


def _has_big_int(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_big_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_big_int(v) for v in value)
    return type(value) is int and not -(2**31) <= value < 2**16


def test_the_vendored_method_list_is_the_schemas_own_method_tags():
    """`schemas/acp/meta.json` comes from an older upstream release than `schema.json` (SOURCE.md): it stays only
    while the methods it names are exactly the ones the schema tags."""
    root = generate.SCHEMA_DIR
    meta = json.loads((root / "meta.json").read_text(encoding="utf-8"))
    schema = json.loads((root / "schema.json").read_text(encoding="utf-8"))
    tagged = {(d["x-side"], d["x-method"]) for d in schema["$defs"].values() if "x-method" in d}
    listed = (
        {("agent", m) for m in meta["agentMethods"].values()}
        | {("client", m) for m in meta["clientMethods"].values()}
        | {("protocol", m) for m in meta["protocolMethods"].values()}
    )
    assert listed == tagged


def test_the_new_stable_shapes_of_schema_1_25_are_models():
    """What 1.25 added is read and written by the generated models (`name`, notices, compaction updates)."""
    call = s.session_update_from_wire(
        {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read a", "name": "read_file"}, "update"
    )
    assert isinstance(call, s.ToolCallSessionUpdate) and call.name == "read_file"
    notice = s.session_update_from_wire({"sessionUpdate": "notice", "severity": "warning", "title": "t"}, "update")
    assert notice.to_wire() == {"sessionUpdate": "notice", "severity": "warning", "title": "t"}
    caps = s.ClientCapabilities.from_wire({"session": {"notices": {}, "compaction": {}}}, "c")
    assert caps.session is not None and caps.session.notices is not None and caps.session.compaction is not None
