"""JSON-RPC robustness of `gatewright acp`, driven by a raw NDJSON client (the SDK cannot send malformed frames)."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

from tests.support.harness import never_answer, write_script


def test_initialize_answers_version_1_to_any_client_version_and_advertises_agent_info(spawn):
    agent = spawn()
    for version in (1, 2, 65535):
        res = agent.result("initialize", {"protocolVersion": version, "clientCapabilities": {}})
        assert res["protocolVersion"] == 1
        assert res["agentInfo"]["name"] == "gatewright"
        assert res["authMethods"] == []


def test_initialize_with_a_non_integer_version_is_invalid_params(spawn):
    agent = spawn()
    for bad in ("1", None, True, -1, 1.5):
        err = agent.request("initialize", {"protocolVersion": bad})["error"]
        assert err["code"] == -32602


def test_unparseable_line_gets_parse_error_with_null_id_and_the_connection_lives_on(spawn):
    agent = spawn()
    agent.send_raw(b"this is not json")
    agent.send_raw(b'{"jsonrpc": "2.0", "id": 5, "method": ')
    errors = [agent.wait_for(lambda f: f.get("error", {}).get("code") == -32700)]
    assert errors[0]["id"] is None
    assert agent.initialize()["protocolVersion"] == 1


def test_valid_json_that_is_not_a_request_object_gets_invalid_request(spawn):
    agent = spawn()
    for line in (b'{"foo": "bar"}', b"42", b"[]", b"[1,2]", b'{"jsonrpc": "1.0", "id": 1, "method": "initialize"}',
                 b'{"jsonrpc": "2.0", "id": 1, "method": 7}', b'{"jsonrpc": "2.0", "id": 1.5, "method": "x"}',
                 b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "x"}',
                 b'{"jsonrpc":"2.0","id":3,"method":"x","params":5}'):
        before = len(agent.frames)
        agent.send_raw(line)
        err = agent.wait_for(lambda f: "error" in f, after=before)
        assert err["error"]["code"] == -32600, (line, err)
    assert agent.initialize()["protocolVersion"] == 1


def test_boolean_ids_are_invalid_and_never_confused_with_integer_ids(spawn):
    agent = spawn()
    agent.send({"jsonrpc": "2.0", "id": True, "method": "initialize", "params": {"protocolVersion": 1}})
    err = agent.wait_for(lambda f: "error" in f)
    assert err["id"] is None and err["error"]["code"] == -32600


def test_ids_are_echoed_with_their_type(spawn):
    agent = spawn()
    for rid in ("1", 1, "abc", 0, -7, None):
        agent.start_request("initialize", {"protocolVersion": 1}, rid=rid)
        answer = agent.response(rid)
        assert answer["id"] == rid and type(answer["id"]) is type(rid)


def test_unknown_methods_including_extensions_get_method_not_found(spawn):
    agent = spawn()
    for method in ("no/such/method", "_zed.dev/unknown", "session/fork_bogus", "$/unknown_request"):
        assert agent.request(method, {})["error"]["code"] == -32601


def test_notifications_are_never_answered_even_unknown_or_malformed_ones(spawn):
    agent = spawn()
    agent.notify("no/such/notification", {})
    agent.notify("session/cancel", {"sessionId": "nope"})
    agent.notify("session/cancel", "garbage")
    agent.notify("_ext/notice", {"x": 1})
    agent.send_raw(b'{"jsonrpc": "2.0", "method": "session/cancel", "params": 5}')
    agent.initialize()
    assert [f for f in agent.frames if "id" not in f or f.get("id") is None and "error" in f] == []
    assert len(agent.frames) == 1


def test_bad_params_get_invalid_params_without_validator_text(spawn, workspace):
    agent = spawn()
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


def test_unknown_session_ids_get_a_clear_error_and_the_connection_stays_usable(spawn, workspace):
    agent = spawn()
    agent.initialize()
    err = agent.request("session/prompt", {"sessionId": "sess_nope", "prompt": [{"type": "text", "text": "x"}]})
    assert err["error"]["code"] == -32002 and "sess_nope" in err["error"]["message"]
    assert agent.request("session/set_mode", {"sessionId": "nope", "modeId": "auto"})["error"]["code"] == -32002
    assert agent.new_session(workspace).startswith("sess_")


def test_session_ids_are_unique(spawn, workspace):
    agent = spawn()
    agent.initialize()
    ids = {agent.new_session(workspace) for _ in range(5)}
    assert len(ids) == 5


def test_a_frame_beyond_the_size_bound_gets_an_error_and_the_connection_lives_on(spawn):
    agent = spawn(env={"GATEWRIGHT_MAX_FRAME_BYTES": "65536"})
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": 1, "pad": "x" * 100_000}}).encode()
    agent.send_raw(big)
    err = agent.wait_for(lambda f: "error" in f)
    assert err["id"] is None and err["error"]["code"] == -32600 and "exceeds" in err["error"]["message"]
    assert agent.initialize()["protocolVersion"] == 1


def test_a_huge_line_without_newline_followed_by_a_valid_frame_is_dropped_then_serving_continues(spawn):
    agent = spawn(env={"GATEWRIGHT_MAX_FRAME_BYTES": "65536"})
    assert agent.proc.stdin is not None
    for _ in range(10):
        agent.proc.stdin.write(b"y" * 50_000)
    agent.proc.stdin.flush()
    agent.send_raw(b"")  # the newline ending the huge line
    agent.wait_for(lambda f: "error" in f)
    assert agent.initialize()["protocolVersion"] == 1


def test_a_prompt_carrying_tens_of_mib_of_base64_images_is_accepted(spawn, workspace, tmp_path):
    script = write_script(tmp_path / "m.json", [{"text": "seen"}])
    agent = spawn("--model", f"scripted:{script}")
    agent.initialize()
    sid = agent.new_session(workspace)
    image = base64.b64encode(b"\x89PNG" + b"\0" * (8 * 1024 * 1024)).decode()
    blocks = [{"type": "image", "mimeType": "image/png", "data": image} for _ in range(3)]
    blocks.append({"type": "text", "text": "what is in these?"})
    answer = agent.request("session/prompt", {"sessionId": sid, "prompt": blocks}, timeout=60)
    assert answer["result"]["stopReason"] == "end_turn"
    texts = "".join(u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk")
    assert "does not take images" in texts


def test_deeply_nested_json_is_a_parse_error_not_a_crash(spawn):
    agent = spawn()
    agent.send_raw(b"[" * 100_000 + b"]" * 100_000)
    agent.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}")
    agent.wait_for(lambda f: f.get("error", {}).get("code") in (-32700, -32600))
    assert agent.initialize()["protocolVersion"] == 1


def test_stdin_eof_exits_0_within_two_seconds(spawn):
    agent = spawn()
    agent.initialize()
    start = time.monotonic()
    assert agent.close(timeout=5) == 0
    assert time.monotonic() - start < 2.0


def test_stdin_eof_during_a_running_turn_and_a_pending_permission_exits_promptly(spawn, workspace, tmp_path):
    script = write_script(tmp_path / "m.json", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]}])
    agent = spawn("--model", f"scripted:{script}", responder=never_answer)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.start_prompt(sid, "go")
    agent.wait_for(lambda f: f.get("method") == "session/request_permission")
    start = time.monotonic()
    assert agent.close(timeout=5) == 0
    assert time.monotonic() - start < 2.0
    assert not (workspace / "x.txt").exists()


def test_sigterm_shuts_down_gracefully_with_exit_0(spawn):
    import signal

    agent = spawn()
    agent.initialize()
    agent.proc.send_signal(signal.SIGTERM)
    assert agent.proc.wait(5) == 0


def test_duplicate_request_ids_are_each_answered_once(spawn):
    agent = spawn()
    for _ in range(3):
        agent.send({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"protocolVersion": 1}})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len([f for f in agent.frames if f.get("id") == 9]) < 3:
        time.sleep(0.02)
    assert len([f for f in agent.frames if f.get("id") == 9]) == 3


def test_cancel_request_for_a_prompt_ends_it_with_cancelled(spawn, workspace, tmp_path):
    script = write_script(tmp_path / "m.json", [{"delay_ms": 30_000, "text": "too late"}])
    agent = spawn("--model", f"scripted:{script}")
    agent.initialize()
    sid = agent.new_session(workspace)
    rid = agent.start_prompt(sid, "go")
    time.sleep(0.2)  # let the turn start; the cancel is also correct before it starts
    agent.notify("$/cancel_request", {"requestId": rid})
    assert agent.response(rid, timeout=5)["result"]["stopReason"] == "cancelled"


def test_cancel_request_for_unknown_or_finished_ids_is_harmless(spawn):
    agent = spawn()
    agent.initialize()
    agent.notify("$/cancel_request", {"requestId": 12345})
    agent.notify("$/cancel_request", {"requestId": True})
    agent.notify("$/cancel_request", {})
    assert agent.initialize()["protocolVersion"] == 1


def test_every_stdout_line_is_a_frame_and_stderr_carries_logs(spawn, workspace, tmp_path):
    script = write_script(tmp_path / "m.json", [{"error": "provider exploded"}])
    agent = spawn("--model", f"scripted:{script}", "--log-level", "DEBUG")
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "x")["result"]["stopReason"] == "end_turn"
    agent.close()
    for raw in agent.raw_lines:
        assert json.loads(raw)["jsonrpc"] == "2.0"
    assert "gatewright" in agent.stderr


def test_a_malformed_scripted_model_is_refused_at_start_up_naming_the_file(tmp_path: Path):
    import subprocess
    import sys

    bad = tmp_path / "bad.json"
    bad.write_text('{"responses": [{"tool_calls": [{"arguments": {}}]}]}')
    proc = subprocess.run([sys.executable, "-m", "acp_server", "--model", f"scripted:{bad}"], capture_output=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert str(bad) in proc.stderr.decode() and "name" in proc.stderr.decode()
    assert proc.stdout == b""
