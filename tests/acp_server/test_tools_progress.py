"""A long-running command shows its life: the editor gets `in_progress` updates carrying the output so far, redacted
like the result, before the call completes."""

from __future__ import annotations

import pytest

from tests.support.harness import write_script

pytestmark = [pytest.mark.timeout(60)]


def test_a_long_command_sends_its_output_so_far_before_it_completes(inproc, workspace, tmp_path):
    command = "for i in 1 2 3 4; do echo step$i; sleep 0.5; done"
    model = write_script(
        tmp_path / "m.json", [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "done"}]
    )
    agent = inproc("--model", f"scripted:{model}", "--mode", "auto", cwd=workspace)
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "go")["result"]["stopReason"] == "end_turn"
    updates = [u for u in agent.updates(sid) if u.get("sessionUpdate") == "tool_call_update"]
    final = next(i for i, u in enumerate(updates) if u.get("status") == "completed")
    live = [u for u in updates[:final] if u.get("content")]
    assert live, "no output was shown while the command ran"
    text = live[0]["content"][0]["content"]["text"]
    assert "step1" in text and "step4" not in text
    assert all(u.get("status") == "in_progress" for u in live)
    assert "step4" in str(updates[final]["rawOutput"])


def test_a_quick_command_sends_no_progress(inproc, workspace, tmp_path):
    model = write_script(
        tmp_path / "m.json", [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}, {"text": "done"}]
    )
    agent = inproc("--model", f"scripted:{model}", "--mode", "auto", cwd=workspace)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "go")
    updates = [u for u in agent.updates(sid) if u.get("sessionUpdate") == "tool_call_update"]
    assert [u.get("status") for u in updates] == ["in_progress", "completed"]
