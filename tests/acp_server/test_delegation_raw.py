"""Subagents through the ACP connection in process (`--model scripted:PATH`): the editor is asked about a child's
call on the parent's session, sees it linked to the delegate call through `_meta`, and a cancel reaches the child.

The child shares the session's scripted model: its model calls consume the next entries of the script, in order.
Every frame is checked against the official ACP schema by the harness.
"""

from __future__ import annotations

import pytest

from tests.support.harness import never_answer, write_script

pytestmark = pytest.mark.timeout(60)


def child_write_script(tmp_path):
    return write_script(
        tmp_path / "m.json",
        [
            {"tool_calls": [{"id": "d1", "name": "delegate_task", "arguments": {"task": "Create hello.txt"}}]},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]},
            {"text": "Wrote hello.txt."},
            {"text": "Done."},
        ],
    )


def test_the_editor_approves_a_childs_write_linked_to_the_delegate_call(inproc, workspace, tmp_path):
    agent = inproc("--model", f"scripted:{child_write_script(tmp_path)}")
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "go")["result"]["stopReason"] == "end_turn"
    assert (workspace / "hello.txt").read_text() == "hi\n"

    (question,) = [f for f in agent.frames if f.get("method") == "session/request_permission"]
    assert question["params"]["sessionId"] == sid and question["params"]["toolCall"]["toolCallId"] == "d1/w1"
    updates = agent.updates(sid)
    child = next(u for u in updates if u["sessionUpdate"] == "tool_call" and u["toolCallId"] == "d1/w1")
    assert child["_meta"] == {"gatewright": {"parentToolCallId": "d1", "depth": 1}}
    assert child["kind"] == "edit"
    order = [u.get("toolCallId") for u in updates if u["sessionUpdate"] == "tool_call"]
    assert order == ["d1", "d1/w1"]  # the delegate call is announced before its child
    child_final = [u for u in updates if u.get("toolCallId") == "d1/w1" and u.get("status") == "completed"]
    assert child_final and child_final[-1]["_meta"]["gatewright"]["parentToolCallId"] == "d1"
    parent_final = [u for u in updates if u.get("toolCallId") == "d1" and u.get("status") == "completed"][-1]
    assert parent_final["content"][0]["content"]["text"] == "Wrote hello.txt."
    assert parent_final["rawOutput"]["subagent"] == "task" and parent_final["rawOutput"]["toolCalls"] == 1
    trace = parent_final["_meta"]["gatewright"]["trace"]
    assert trace["calls"] == [{"toolCallId": "d1/w1", "name": "write_file", "status": "completed"}]
    # no text of the child reached the session's message stream
    texts = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert texts == "Done."


def test_cancelling_while_a_child_waits_for_permission_ends_the_turn_and_nothing_asks_again(
    inproc, workspace, tmp_path
):
    agent = inproc("--model", f"scripted:{child_write_script(tmp_path)}", responder=never_answer)
    agent.initialize()
    sid = agent.new_session(workspace)
    rid = agent.start_prompt(sid, "go")
    asked = agent.wait_for(lambda f: f.get("method") == "session/request_permission")
    assert asked["params"]["toolCall"]["toolCallId"] == "d1/w1"
    agent.notify("session/cancel", {"sessionId": sid})
    assert agent.response(rid, timeout=10)["result"]["stopReason"] == "cancelled"
    after = len(agent.frames)
    # the session stays usable, and the cancelled child never asks again
    assert agent.prompt(sid, "again")["result"]["stopReason"] == "end_turn"
    assert not [f for f in agent.frames[after:] if f.get("method") == "session/request_permission"]
    assert not (workspace / "hello.txt").exists()
    finals = {
        u["toolCallId"]: u["status"]
        for u in agent.updates(sid)
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
    }
    assert finals == {"d1/w1": "failed", "d1": "failed"}
