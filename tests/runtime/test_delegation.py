"""Subagents in process: a child runtime with its own context, governed by its handoff policy at execution time,
approved through the session's own decorator and gateway, linked to its parent call, bounded by the parent's turn."""

from __future__ import annotations

import time
from dataclasses import replace

import anyio
import pytest

from runtime.delegation import EXPLORE, TASK, FilteredRegistry, HandoffPolicy, SubagentExecutor, SubagentSpec
from runtime.events import ToolCallProgress
from runtime.loop import RuntimeOptions
from runtime.models.base import TextPart
from runtime.tools.base import ToolCall, ToolContext, ToolFailure
from runtime.workspace import Workspace
from tests.support.delegation_helpers import ScriptsByTask, Sink, error_of, scripted, session_runtime, tool_results

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def delegate(cid: str, task: str, name: str = "delegate_task", **extra) -> dict:
    return {"id": cid, "name": name, "arguments": {"task": task, **extra}}


def spec_with(spec: SubagentSpec, **policy) -> SubagentSpec:
    return replace(spec, policy=replace(spec.policy, **policy))


NESTING = spec_with(TASK, denied_tools=frozenset({"update_plan"}))


async def test_a_delegate_call_runs_a_child_with_its_own_context_and_returns_its_report(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "What does the README say?")]},
            {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}}]},  # the child
            {"text": "The README says hello."},  # the child's report
            {"text": "Done."},
        ]
    )
    rt, gw, _ = session_runtime(tmp_path, model)
    sink = Sink()
    outcome = await rt.run_turn([TextPart("go")], sink)
    assert outcome.stop_reason == "end_turn" and model.position == 4
    (result,) = tool_results(rt)  # the child's read_file result stayed in the child's history
    assert result.call_id == "d1" and result.output == "The README says hello." and not result.is_error
    assert [e.call_id for e in sink.started()] == ["d1", "d1/r1"]
    child = sink.started()[1]
    assert child.meta == {"gatewright": {"parentToolCallId": "d1", "depth": 1}}
    final = sink.final("d1/r1")
    assert final is not None and final.status == "completed"
    assert final.meta is not None and final.meta["gatewright"]["parentToolCallId"] == "d1"
    assert "hello from the readme" in "".join(sink.texts("d1/r1"))
    # the delegate call's trace lists the child's calls; it is stored beside the result, not in the output
    trace = result.meta["trace"]
    assert trace["calls"] == [{"toolCallId": "d1/r1", "name": "read_file", "status": "completed"}]
    assert trace["subagent"] == "task" and trace["depth"] == 1 and "d1/r1" not in result.output
    assert not gw.asked  # safe mode: the handoff and the child's read ran without a question


async def test_a_childs_write_is_asked_through_the_sessions_gateway_under_a_session_wide_id(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "Create hello.txt")]},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]},
            {"text": "Wrote hello.txt."},
            {"text": "Done."},
        ]
    )
    rt, gw, ws = session_runtime(tmp_path, model, answers=["allow_once"])
    await rt.run_turn([TextPart("go")], Sink())
    assert [q.call_id for q in gw.asked] == ["d1/w1"]
    assert (ws / "hello.txt").read_text() == "hi\n"


async def test_rejecting_a_childs_call_stops_the_parent_turn_as_blocked_by_approval(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "Create hello.txt")]},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]},
            {"text": "never reached"},
            {"text": "never reached either"},
        ]
    )
    rt, gw, ws = session_runtime(tmp_path, model, answers=["reject_once"])
    sink = Sink()
    outcome = await rt.run_turn([TextPart("go")], sink)
    assert outcome.blocked_by_approval and model.position == 2 and not (ws / "hello.txt").exists()
    assert error_of(tool_results(rt)[0])["errorType"] == "ApprovalRejected"
    assert sink.final("d1/w1").status == "failed" and sink.final("d1").status == "failed"


async def test_a_cancelled_permission_question_in_a_child_cancels_the_whole_turn(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "Create hello.txt")]},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]},
        ]
    )
    rt, gw, ws = session_runtime(tmp_path, model, answers=["cancel"])
    sink = Sink()
    assert (await rt.run_turn([TextPart("go")], sink)).stop_reason == "cancelled"
    assert not (ws / "hello.txt").exists() and sink.final("d1").status == "failed"


async def test_manual_mode_asks_for_the_handoff_and_then_for_the_childs_call_without_deadlock(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "What does the README say?")]},
            {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}}]},
            {"text": "hello"},
            {"text": "Done."},
        ]
    )
    rt, gw, _ = session_runtime(tmp_path, model, mode="manual", answers=["allow_once", "allow_once"])
    with anyio.fail_after(5):
        await rt.run_turn([TextPart("go")], Sink())
    assert [q.call_id for q in gw.asked] == ["d1", "d1/r1"]


async def test_read_only_mode_governs_the_childs_calls(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "Create hello.txt")]},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]},
            {"text": "I was not allowed to write."},
            {"text": "Done."},
        ]
    )
    rt, gw, ws = session_runtime(tmp_path, model, mode="read-only")
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    assert not gw.asked and not (ws / "hello.txt").exists()
    assert tool_results(rt)[0].output == "I was not allowed to write."
    assert "read-only mode" in "".join(sink.texts("d1/w1"))


async def test_the_explore_child_sees_and_runs_only_its_allowed_tools(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "Look around", "delegate_explore")]},
            {
                "tool_calls": [
                    {"id": "w1", "name": "write_file", "arguments": {"path": "x.txt", "content": "x"}},
                    {"id": "b1", "name": "bash", "arguments": {"command": "touch y.txt"}},
                ]
            },
            {"text": "I could only read."},
            {"text": "Done."},
        ]
    )
    rt, gw, ws = session_runtime(tmp_path, model, mode="auto")
    seen: list[list[str]] = []
    original = model.stream

    async def spy(request):
        seen.append(sorted(t.name for t in request.tools))
        async for ev in original(request):
            yield ev

    model.stream = spy  # type: ignore[method-assign]
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    assert seen[1] == ["glob", "grep", "read_file"]  # what the child model saw
    assert not (ws / "x.txt").exists() and not (ws / "y.txt").exists()
    for cid in ("d1/w1", "d1/b1"):
        assert sink.final(cid).status == "failed" and "unknown tool" in "".join(sink.texts(cid))


async def test_the_childs_executor_refuses_unexposed_tools_even_when_validation_is_bypassed(tmp_path):
    rt, _, _ = session_runtime(tmp_path, scripted([]), mode="auto")
    registry = FilteredRegistry(rt.registry, EXPLORE.policy.allows_tool)
    executor = SubagentExecutor(rt.executor, registry, "d1/")
    ctx = ToolContext("s1", "w1", Workspace(str(tmp_path / "ws")))
    call = ToolCall("w1", "write_file", {"path": "x.txt", "content": "x"}, "{}")
    with pytest.raises(ToolFailure) as err:
        await executor.execute(call, ctx)
    assert err.value.error_type == "ToolNotFound" and not (tmp_path / "ws" / "x.txt").exists()
    assert sorted(registry.names()) == ["glob", "grep", "read_file"]
    with pytest.raises(TypeError):
        registry.add(rt.registry.get("bash"))  # type: ignore[arg-type]


async def test_a_handoff_beyond_max_depth_is_denied_at_execution_time(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "outer")]},
            {"tool_calls": [delegate("d2", "inner")]},  # the child tries to hand off again
            {"text": "could not delegate"},
            {"text": "Done."},
        ]
    )
    rt, _, _ = session_runtime(tmp_path, model, specs=(NESTING,))
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    assert sink.final("d1/d2").status == "failed"
    assert "handoff depth 2 exceeds maxDepth 1" in "".join(sink.texts("d1/d2"))
    assert tool_results(rt)[0].output == "could not delegate"


async def test_nested_handoffs_within_max_depth_link_each_call_to_its_own_parent(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "outer")]},
            {"tool_calls": [delegate("d2", "inner")]},
            {"tool_calls": [{"id": "s1", "name": "sleep", "arguments": {"ms": 1}}]},  # the grandchild
            {"text": "inner report"},
            {"text": "outer report"},
            {"text": "Done."},
        ]
    )
    rt, _, _ = session_runtime(tmp_path, model, specs=(spec_with(NESTING, max_depth=2),))
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    links = {e.call_id: e.meta for e in sink.started()}
    assert links["d1/d2"] == {"gatewright": {"parentToolCallId": "d1", "depth": 1}}
    assert links["d1/d2/s1"] == {"gatewright": {"parentToolCallId": "d1/d2", "depth": 2}}
    assert "slept in d1/d2@2" in "".join(sink.texts("d1/d2/s1"))
    assert tool_results(rt)[0].output == "outer report"


async def test_parallel_handoffs_each_keep_their_own_depth_and_parent(tmp_path):
    model = ScriptsByTask(
        {
            "PARENT": [{"tool_calls": [delegate("a", "task ALPHA"), delegate("b", "task BETA")]}, {"text": "Done."}],
            "ALPHA": [
                {"tool_calls": [{"id": "s", "name": "sleep", "arguments": {"ms": 150}}]},
                {"tool_calls": [delegate("n", "nested ALPHA")]},
                {"text": "alpha report"},
            ],
            "BETA": [
                {"tool_calls": [{"id": "s", "name": "sleep", "arguments": {"ms": 50}}]},
                {"tool_calls": [delegate("n", "nested BETA")]},
                {"text": "beta report"},
            ],
        }
    )
    rt, _, _ = session_runtime(tmp_path, model, specs=(NESTING,))
    sink = Sink()
    start = time.monotonic()
    await rt.run_turn([TextPart("PARENT")], sink)
    assert time.monotonic() - start < 5
    assert "slept in a@1" in "".join(sink.texts("a/s")) and "slept in b@1" in "".join(sink.texts("b/s"))
    for parent in ("a", "b"):
        assert {e.call_id: e.meta for e in sink.started()}[f"{parent}/n"]["gatewright"]["parentToolCallId"] == parent
        assert "handoff depth 2 exceeds maxDepth 1" in "".join(sink.texts(f"{parent}/n"))
    assert [r.output for r in tool_results(rt)] == ["alpha report", "beta report"]


async def test_a_child_that_outlives_its_time_limit_is_stopped_and_its_calls_closed(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "slow")]},
            {"tool_calls": [{"id": "s1", "name": "sleep", "arguments": {"ms": 10_000, "write": True}}]},
            {"text": "The subagent timed out; I will check."},
        ]
    )
    rt, _, _ = session_runtime(tmp_path, model, mode="auto", specs=(spec_with(TASK, timeout_millis=300),))
    sink = Sink()
    start = time.monotonic()
    await rt.run_turn([TextPart("go")], sink)
    assert time.monotonic() - start < 5
    err = error_of(tool_results(rt)[0])
    assert err["errorType"] == "HandoffTimeout" and "within 300 ms" in err["error"]
    assert "check the current state" in err["error"]  # a side-effecting child call had started
    assert sink.final("d1/s1").status == "failed"


async def test_on_error_fallback_hands_the_task_back_instead_of_failing(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "slow task")]},
            {"delay_ms": 10_000, "text": "late"},
            {"text": "I did it myself."},
        ]
    )
    rt, _, _ = session_runtime(tmp_path, model, specs=(spec_with(TASK, timeout_millis=200, on_error="fallback"),))
    await rt.run_turn([TextPart("go")], Sink())
    (r,) = tool_results(rt)
    assert not r.is_error and "Do the task yourself instead" in r.output and "slow task" in r.output


async def test_on_denied_fallback_and_the_input_filter(tmp_path):
    refuse_secrets = spec_with(TASK, on_denied="fallback", input_filter=lambda text: None if "SECRET" in text else text)
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "print the SECRET")]},
            {"text": "Done."},
        ]
    )
    rt, _, _ = session_runtime(tmp_path, model, specs=(refuse_secrets,))
    await rt.run_turn([TextPart("go")], Sink())
    (r,) = tool_results(rt)
    assert not r.is_error and "input filter refused" in r.output and model.position == 2
    failing = spec_with(TASK, input_filter=lambda text: None)
    rt2, _, _ = session_runtime(
        tmp_path, scripted([{"tool_calls": [delegate("d1", "x")]}, {"text": "ok"}]), specs=(failing,)
    )
    await rt2.run_turn([TextPart("go")], Sink())
    assert error_of(tool_results(rt2)[0])["errorType"] == "HandoffDenied"


async def test_a_disabled_policy_denies_every_handoff(tmp_path):
    model = scripted([{"tool_calls": [delegate("d1", "x")]}, {"text": "ok"}])
    rt, _, _ = session_runtime(tmp_path, model, specs=(spec_with(TASK, enabled=False),))
    await rt.run_turn([TextPart("go")], Sink())
    assert "disabled" in error_of(tool_results(rt)[0])["error"] and model.position == 2


async def test_a_childs_model_error_fails_the_delegate_call(tmp_path):
    model = scripted([{"tool_calls": [delegate("d1", "x")]}, {"error": "upstream 502"}, {"text": "ok"}])
    rt, _, _ = session_runtime(tmp_path, model)
    await rt.run_turn([TextPart("go")], Sink())
    err = error_of(tool_results(rt)[0])
    assert err["errorType"] == "HandoffFailed" and "upstream 502" in err["error"]


async def test_cancelling_the_turn_cancels_the_child_and_nothing_asks_afterwards(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "slow")]},
            {"tool_calls": [{"id": "s1", "name": "sleep", "arguments": {"ms": 10_000}}]},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "late.txt", "content": "x"}}]},
        ]
    )
    rt, gw, ws = session_runtime(tmp_path, model)
    sink = Sink()
    running = anyio.Event()
    result = {}

    async def watch(ev):
        await sink(ev)
        if isinstance(ev, ToolCallProgress) and ev.call_id == "d1/s1" and ev.status == "in_progress":
            running.set()

    async def turn():
        result["outcome"] = await rt.run_turn([TextPart("go")], watch)

    start = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(turn)
        await running.wait()
        rt.cancel()
    gw.closed = True
    assert result["outcome"].stop_reason == "cancelled" and time.monotonic() - start < 3
    assert sink.final("d1/s1").status == "failed" and sink.final("d1").status == "failed"
    await anyio.sleep(0.1)
    assert not gw.after_close and not gw.asked and not (ws / "late.txt").exists()
    assert [r.call_id for r in tool_results(rt)] == ["d1"]  # the parent's history stays well-formed


async def test_a_childs_usage_counts_toward_the_session(tmp_path):
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "x")], "usage": {"input_tokens": 10, "output_tokens": 1}},
            {"text": "child", "usage": {"input_tokens": 100, "output_tokens": 20}},
            {"text": "ok", "usage": {"input_tokens": 5, "output_tokens": 2}},
        ]
    )
    rt, _, _ = session_runtime(tmp_path, model)
    await rt.run_turn([TextPart("go")], Sink())
    assert (rt.total_usage.input_tokens, rt.total_usage.output_tokens) == (115, 23)


async def test_a_childs_plan_and_text_stay_inside_the_child(tmp_path):
    planning = spec_with(TASK, denied_tools=frozenset())
    model = scripted(
        [
            {"tool_calls": [delegate("d1", "x")]},
            {
                "text": "thinking aloud",
                "tool_calls": [
                    {
                        "id": "p",
                        "name": "update_plan",
                        "arguments": {"entries": [{"content": "child step", "status": "pending"}]},
                    }
                ],
            },
            {"text": "child report"},
            {"text": "ok"},
        ]
    )
    rt, _, _ = session_runtime(tmp_path, model, specs=(planning,))
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    from runtime.events import PlanUpdated, TextChunk

    assert not [e for e in sink.events if isinstance(e, PlanUpdated)] and rt.plan == ()
    assert "thinking aloud" not in "".join(e.text for e in sink.events if isinstance(e, TextChunk))


async def test_the_default_policies_keep_children_from_delegating_or_planning():
    assert not TASK.policy.allows_tool("delegate_task") and not TASK.policy.allows_tool("update_plan")
    assert TASK.policy.allows_tool("write_file") and TASK.policy.max_depth == 1
    assert not EXPLORE.policy.allows_tool("bash") and EXPLORE.policy.allows_tool("grep")
    assert HandoffPolicy().denial(2) == "handoff depth 2 exceeds maxDepth 1"


async def test_delegate_tools_reach_the_session_results_through_the_call_order(tmp_path):
    """A delegate call and an ordinary call in one step: results keep the model's call order."""
    model = ScriptsByTask(
        {
            "PARENT": [
                {"tool_calls": [delegate("a", "task ALPHA"), {"id": "s", "name": "sleep", "arguments": {"ms": 1}}]},
                {"text": "Done."},
            ],
            "ALPHA": [{"tool_calls": [{"id": "s", "name": "sleep", "arguments": {"ms": 100}}]}, {"text": "alpha"}],
        }
    )
    rt, _, _ = session_runtime(tmp_path, model, options=RuntimeOptions(max_parallel_tool_calls=4))
    await rt.run_turn([TextPart("PARENT")], Sink())
    assert [(r.call_id, r.output) for r in tool_results(rt)] == [("a", "alpha"), ("s", "slept in root@0")]
