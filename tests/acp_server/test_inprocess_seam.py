"""The in-process seam (tests/support/inprocess.py) serves what the binary serves: the same options, the same frames
for the same exchange, the same transcript, and on EOF no process of the agent survives it, as none survives the
binary's exit."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_faults_lifecycle import assert_groups_die, groups_with, start_long_bash_turn
from tests.support.harness import RawClient, write_script
from tests.support.inprocess import InProcessAgent
from tests.support.sdk_client import check_recorded_frames

pytestmark = [pytest.mark.timeout(60)]


def _exchange(agent: RawClient, workspace: Path) -> list[tuple[Any, ...]]:
    """A session with a command that asks and runs, a read, and the answer: the frames' shape, in order."""
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "go")["result"]["stopReason"] == "end_turn"
    shape: list[tuple[Any, ...]] = []
    for f in agent.frames:
        if f.get("method") == "session/update":
            u = f["params"]["update"]
            shape.append(
                (
                    "update",
                    u["sessionUpdate"],
                    u.get("toolCallId"),
                    u.get("status"),
                    u["content"].get("text") if u["sessionUpdate"] == "agent_message_chunk" else None,
                )
            )
        elif "method" in f:
            shape.append(("request", f["method"], [o["kind"] for o in f["params"].get("options", [])]))
        else:
            shape.append(("answer", sorted(f.get("result") or {}), f.get("error", {}).get("code")))
    return shape


def test_the_same_exchange_gives_the_same_frames_in_process_and_from_the_binary(spawn, inproc, tmp_path, workspace):
    script = write_script(
        tmp_path / "m.json",
        [
            {"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "echo hi > out.txt"}}]},
            {"tool_calls": [{"id": "c2", "name": "read_file", "arguments": {"path": "README.md"}}]},
            {"text": "done"},
        ],
    )
    real = _exchange(spawn("--model", f"scripted:{script}", "--mode", "safe"), workspace)
    (workspace / "out.txt").unlink()
    here = _exchange(inproc("--model", f"scripted:{script}", "--mode", "safe"), workspace)
    assert here == real
    assert (workspace / "out.txt").read_text() == "hi\n"
    assert [s[1] for s in here if s[0] == "request"] == ["session/request_permission"]  # the command asked
    assert ("update", "tool_call_update", "c1", "completed", None) in here


def test_the_options_are_read_as_the_binary_reads_them(inproc, workspace):
    agent = inproc("--mode", "read-only")
    agent.initialize()
    new = agent.result("session/new", {"cwd": str(workspace), "mcpServers": []})
    assert new["modes"]["currentModeId"] == "read-only"
    with pytest.raises(ValueError, match="refused"):
        inproc("--mode", "no-such-mode")


def test_env_given_to_an_agent_lasts_as_long_as_the_agent(tmp_path):
    assert "GATEWRIGHT_LIST_PAGE_SIZE" not in os.environ
    agent = InProcessAgent(env={"GATEWRIGHT_LIST_PAGE_SIZE": "2"}, state_dir=tmp_path / "state")
    try:
        assert os.environ["GATEWRIGHT_LIST_PAGE_SIZE"] == "2"
        assert agent.initialize()["protocolVersion"] == 1
    finally:
        assert agent.close() == 0
    assert "GATEWRIGHT_LIST_PAGE_SIZE" not in os.environ
    agent.assert_clean()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process checks read /proc")
def test_eof_mid_command_ends_the_command_its_grandchild_and_a_background_process(inproc, workspace, tmp_path):
    background = {
        "id": "call_bg",
        "name": "bash",
        "arguments": {"action": "start", "command": "sleep 302; echo gwseambg"},
    }
    agent, _, groups = start_long_bash_turn(inproc, workspace, tmp_path, background)
    groups |= groups_with("gwseambg")
    assert agent.close(timeout=5) == 0
    assert_groups_die(groups)


def test_record_writes_the_transcript_the_binary_would(inproc, workspace, tmp_path):
    record = tmp_path / "t.jsonl"
    script = write_script(tmp_path / "m.json", [{"text": "hello"}])
    agent = inproc("--record", str(record), "--model", f"scripted:{script}")
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "hi")["result"]["stopReason"] == "end_turn"
    assert agent.close() == 0
    entries = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert "meta" in entries[0] and entries[0]["meta"]["client"]["name"] == "tests"
    assert [(e["dir"], e["msg"].get("method")) for e in entries[1:3]] == [("in", "initialize"), ("out", None)]
    check_recorded_frames(record)
