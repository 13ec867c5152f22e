"""JSON-RPC robustness of the ACP connection, driven by a raw NDJSON client (the SDK cannot send malformed frames)
through the in-process seam (tests/support/inprocess.py). What only the real binary shows (the start-up fast path,
EOF and signals, stdout and stderr) stays in tests/e2e/test_protocol_raw.py."""

from __future__ import annotations

import base64
import json

from tests.support.harness import write_script


def test_unparseable_line_gets_parse_error_with_null_id_and_the_connection_lives_on(inproc):
    agent = inproc()
    agent.send_raw(b"this is not json")
    agent.send_raw(b'{"jsonrpc": "2.0", "id": 5, "method": ')
    errors = [agent.wait_for(lambda f: f.get("error", {}).get("code") == -32700)]
    assert errors[0]["id"] is None
    assert agent.initialize()["protocolVersion"] == 1


def test_valid_json_that_is_not_a_request_object_gets_invalid_request(inproc):
    agent = inproc()
    for line in (
        b'{"foo": "bar"}',
        b"42",
        b"[]",
        b"[1,2]",
        b'{"jsonrpc": "1.0", "id": 1, "method": "initialize"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": 7}',
        b'{"jsonrpc": "2.0", "id": 1.5, "method": "x"}',
        b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "x"}',
        b'{"jsonrpc":"2.0","id":3,"method":"x","params":5}',
    ):
        before = len(agent.frames)
        agent.send_raw(line)
        err = agent.wait_for(lambda f: "error" in f, after=before)
        assert err["error"]["code"] == -32600, (line, err)
    assert agent.initialize()["protocolVersion"] == 1


def test_boolean_ids_are_invalid_and_never_confused_with_integer_ids(inproc):
    agent = inproc()
    agent.send({"jsonrpc": "2.0", "id": True, "method": "initialize", "params": {"protocolVersion": 1}})
    err = agent.wait_for(lambda f: "error" in f)
    assert err["id"] is None and err["error"]["code"] == -32600


def test_ids_are_echoed_with_their_type(inproc):
    agent = inproc()
    for rid in ("1", 1, "abc", 0, -7, None):
        agent.start_request("initialize", {"protocolVersion": 1}, rid=rid)
        answer = agent.response(rid)
        assert answer["id"] == rid and type(answer["id"]) is type(rid)


def test_unknown_methods_including_extensions_get_method_not_found(inproc):
    agent = inproc()
    for method in ("no/such/method", "_zed.dev/unknown", "session/fork_bogus", "$/unknown_request"):
        assert agent.request(method, {})["error"]["code"] == -32601


def test_notifications_are_never_answered_even_unknown_or_malformed_ones(inproc):
    agent = inproc()
    agent.notify("no/such/notification", {})
    agent.notify("session/cancel", {"sessionId": "nope"})
    agent.notify("session/cancel", "garbage")
    agent.notify("_ext/notice", {"x": 1})
    agent.send_raw(b'{"jsonrpc": "2.0", "method": "session/cancel", "params": 5}')
    agent.initialize()
    assert [f for f in agent.frames if "id" not in f or f.get("id") is None and "error" in f] == []
    assert len(agent.frames) == 1


def test_bad_params_get_invalid_params_without_validator_text(inproc, workspace):
    agent = inproc()
    agent.initialize()
    cases = [
        ("session/new", {"cwd": "relative/path", "mcpServers": []}),
        ("session/new", {"cwd": 17, "mcpServers": []}),
        ("session/new", {"mcpServers": []}),
        ("session/new", {"cwd": str(workspace / "missing"), "mcpServers": []}),
        ("session/new", {"cwd": str(workspace), "mcpServers": "x"}),
        ("session/prompt", {"sessionId": 5, "prompt": []}),
        ("session/new", [1, 2]),
    ]
    for method, params in cases:
        err = agent.request(method, params)["error"]
        assert err["code"] == -32602, (method, params, err)
        assert "validation error" not in err["message"].lower() and "pydantic" not in err["message"].lower()
        assert "\n" not in err["message"]


def test_unknown_session_ids_get_a_clear_error_and_the_connection_stays_usable(inproc, workspace):
    agent = inproc()
    agent.initialize()
    err = agent.request("session/prompt", {"sessionId": "sess_nope", "prompt": [{"type": "text", "text": "x"}]})
    assert err["error"]["code"] == -32002 and "sess_nope" in err["error"]["message"]
    assert agent.request("session/set_mode", {"sessionId": "nope", "modeId": "auto"})["error"]["code"] == -32002
    assert agent.new_session(workspace).startswith("sess_")


def test_session_ids_are_unique(inproc, workspace):
    agent = inproc()
    agent.initialize()
    ids = {agent.new_session(workspace) for _ in range(5)}
    assert len(ids) == 5


def test_a_frame_beyond_the_size_bound_gets_an_error_and_the_connection_lives_on(inproc):
    agent = inproc(env={"GATEWRIGHT_MAX_FRAME_BYTES": "65536"})
    big = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "pad": "x" * 100_000}}
    ).encode()
    agent.send_raw(big)
    err = agent.wait_for(lambda f: "error" in f)
    assert err["id"] is None and err["error"]["code"] == -32600 and "exceeds" in err["error"]["message"]
    assert agent.initialize()["protocolVersion"] == 1


def test_a_huge_line_without_newline_followed_by_a_valid_frame_is_dropped_then_serving_continues(inproc):
    agent = inproc(env={"GATEWRIGHT_MAX_FRAME_BYTES": "65536"})
    for _ in range(10):
        agent.write(b"y" * 50_000)
    agent.send_raw(b"")  # the newline ending the huge line
    agent.wait_for(lambda f: "error" in f)
    assert agent.initialize()["protocolVersion"] == 1


def test_a_prompt_carrying_tens_of_mib_of_base64_images_is_accepted(inproc, workspace, tmp_path):
    script = write_script(tmp_path / "m.json", [{"text": "seen"}])
    agent = inproc("--model", f"scripted:{script}")
    agent.initialize()
    sid = agent.new_session(workspace)
    image = base64.b64encode(b"\x89PNG" + b"\0" * (8 * 1024 * 1024)).decode()
    blocks = [{"type": "image", "mimeType": "image/png", "data": image} for _ in range(3)]
    blocks.append({"type": "text", "text": "what is in these?"})
    answer = agent.request("session/prompt", {"sessionId": sid, "prompt": blocks}, timeout=60)
    assert answer["result"]["stopReason"] == "end_turn"
    texts = "".join(u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk")
    assert "does not take images" in texts


def test_deeply_nested_json_is_a_parse_error_not_a_crash(inproc):
    agent = inproc()
    agent.send_raw(b"[" * 100_000 + b"]" * 100_000)
    agent.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}")
    agent.wait_for(lambda f: f.get("error", {}).get("code") in (-32700, -32600))
    assert agent.initialize()["protocolVersion"] == 1


def test_duplicate_request_ids_are_each_answered_once(inproc):
    agent = inproc()
    for _ in range(3):
        agent.send({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"protocolVersion": 1}})
    agent.wait_for(lambda f: len([g for g in agent.frames if g.get("id") == 9]) >= 3)
    assert len([f for f in agent.frames if f.get("id") == 9]) == 3


def test_cancel_request_for_a_prompt_ends_it_with_cancelled(inproc, workspace, tmp_path):
    script = write_script(tmp_path / "m.json", [{"delay_ms": 30_000, "text": "too late"}])
    agent = inproc("--model", f"scripted:{script}")
    agent.initialize()
    sid = agent.new_session(workspace)
    rid = agent.start_prompt(sid, "go")
    # Once the turn has started (its title is set before the model is called); a cancel before it is correct too.
    agent.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "session_info_update")
    agent.notify("$/cancel_request", {"requestId": rid})
    assert agent.response(rid, timeout=5)["result"]["stopReason"] == "cancelled"


def test_cancel_request_for_unknown_or_finished_ids_is_harmless(inproc):
    agent = inproc()
    agent.initialize()
    agent.notify("$/cancel_request", {"requestId": 12345})
    agent.notify("$/cancel_request", {"requestId": True})
    agent.notify("$/cancel_request", {})
    assert agent.initialize()["protocolVersion"] == 1
