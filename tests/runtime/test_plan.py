"""`update_plan`: every change goes to the client as a complete ACP `plan` update and is kept on the runtime."""

from __future__ import annotations

import pytest

from runtime.events import PlanUpdated
from runtime.models.base import TextPart
from runtime.tools.builtin.plan import plan_summary
from tests.support.acp_schema import agent_frame_errors
from tests.support.delegation_helpers import Sink, error_of, scripted, session_runtime, tool_results
from tests.support.harness import write_script

pytestmark = pytest.mark.timeout(60)


def plan_call(*entries: dict) -> dict:
    return {"tool_calls": [{"name": "update_plan", "arguments": {"entries": list(entries)}}]}


@pytest.mark.anyio
async def test_each_update_sends_the_complete_plan_and_the_runtime_keeps_the_last(tmp_path):
    model = scripted(
        [
            plan_call(
                {"content": "Read the code", "status": "in_progress", "priority": "high"},
                {"content": "Fix the bug", "status": "pending"},
            ),
            plan_call(
                {"content": "Read the code", "status": "completed", "priority": "high"},
                {"content": "Fix the bug", "status": "in_progress"},
            ),
            {"text": "ok"},
        ]
    )
    rt, gw, _ = session_runtime(tmp_path, model, mode="safe")
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    plans = [e.entries for e in sink.events if isinstance(e, PlanUpdated)]
    assert plans == [
        (
            {"content": "Read the code", "priority": "high", "status": "in_progress"},
            {"content": "Fix the bug", "priority": "medium", "status": "pending"},
        ),
        (
            {"content": "Read the code", "priority": "high", "status": "completed"},
            {"content": "Fix the bug", "priority": "medium", "status": "in_progress"},
        ),
    ]
    assert rt.plan == plans[-1] and not gw.asked
    assert tool_results(rt)[1].output == "Plan updated: 2 entries (1 completed, 1 in progress). Now: Fix the bug"


@pytest.mark.anyio
async def test_an_invalid_plan_is_a_tool_error_and_changes_nothing(tmp_path):
    model = scripted(
        [
            plan_call({"content": "x", "status": "done"}),
            plan_call({"content": "x", "status": "pending", "owner": "me"}),
            {"text": "ok"},
        ]
    )
    rt, _, _ = session_runtime(tmp_path, model)
    rt.plan = ({"content": "restored", "priority": "low", "status": "pending"},)
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    assert [error_of(r)["errorType"] for r in tool_results(rt)] == ["InvalidArguments", "InvalidArguments"]
    assert not [e for e in sink.events if isinstance(e, PlanUpdated)]
    assert rt.plan == ({"content": "restored", "priority": "low", "status": "pending"},)


@pytest.mark.anyio
async def test_an_empty_list_clears_the_plan(tmp_path):
    rt, _, _ = session_runtime(tmp_path, scripted([plan_call(), {"text": "ok"}]))
    rt.plan = ({"content": "old", "priority": "low", "status": "pending"},)
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    assert rt.plan == () and [e.entries for e in sink.events if isinstance(e, PlanUpdated)] == [()]
    assert tool_results(rt)[0].output == "Plan cleared."


@pytest.mark.anyio
async def test_the_plan_tool_runs_in_read_only_mode_without_a_question(tmp_path):
    rt, gw, _ = session_runtime(
        tmp_path, scripted([plan_call({"content": "a", "status": "pending"}), {"text": "ok"}]), mode="read-only"
    )
    await rt.run_turn([TextPart("go")], Sink())
    assert not gw.asked and rt.plan == ({"content": "a", "priority": "medium", "status": "pending"},)


def test_the_summary_names_counts_and_the_current_step():
    entries = (
        {"content": "a", "priority": "high", "status": "completed"},
        {"content": "b", "priority": "high", "status": "pending"},
    )
    assert plan_summary(entries) == "Plan updated: 2 entries (1 completed, 1 pending)."


def test_plan_frames_on_the_wire_are_schema_valid_and_complete(inproc, workspace, tmp_path):
    script = write_script(
        tmp_path / "m.json",
        [
            plan_call({"content": "Step one", "status": "in_progress"}, {"content": "Step two", "status": "pending"}),
            plan_call({"content": "Step one", "status": "completed"}, {"content": "Step two", "status": "completed"}),
            {"text": "All done."},
        ],
    )
    agent = inproc("--model", f"scripted:{script}")
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "go")["result"]["stopReason"] == "end_turn"
    frames = [
        f
        for f in agent.frames
        if f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == "plan"
    ]
    assert [agent_frame_errors(f) for f in frames] == [[], []]
    assert [[(e["content"], e["status"]) for e in f["params"]["update"]["entries"]] for f in frames] == [
        [("Step one", "in_progress"), ("Step two", "pending")],
        [("Step one", "completed"), ("Step two", "completed")],
    ]
    tool_calls = [u for u in agent.updates(sid) if u["sessionUpdate"] == "tool_call"]
    assert [(u["title"], u["kind"]) for u in tool_calls] == [("Update plan", "think")] * 2
