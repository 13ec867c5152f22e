"""What only the real `gatewright acp` shows, driven by a raw NDJSON client: the start-up fast path of the first
`initialize`, EOF and SIGTERM, stdout and stderr, a refused start-up. The connection's behaviour (frames, ids, errors,
cancellation) is tested in process: tests/acp_server/test_protocol_methods.py."""

from __future__ import annotations

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


def test_stdin_eof_exits_0_within_two_seconds(spawn):
    agent = spawn()
    agent.initialize()
    start = time.monotonic()
    assert agent.close(timeout=5) == 0
    assert time.monotonic() - start < 2.0


def test_stdin_eof_during_a_running_turn_and_a_pending_permission_exits_promptly(spawn, workspace, tmp_path):
    script = write_script(
        tmp_path / "m.json", [{"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]}]
    )
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
    proc = subprocess.run(
        [sys.executable, "-m", "acp_server", "--model", f"scripted:{bad}"],
        capture_output=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert str(bad) in proc.stderr.decode() and "name" in proc.stderr.decode()
    assert proc.stdout == b""
