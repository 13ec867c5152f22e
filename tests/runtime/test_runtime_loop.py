"""The turn loop in process: normalisation, validation, TOOL_ERROR, parallelism, timeouts, limits, stop reasons."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from permissions import PermissionOutcome, PermissionRequest
from runtime import AgentRuntime, RuntimeEvent, RuntimeOptions, ToolCallProgress, ToolCallStarted, build_runtime
from runtime.models.base import TextPart, ToolResultMessage
from runtime.models.scripted import ScriptedModel, parse_script
from runtime.tools.base import Tool, ToolResult
from runtime.tools.builtin import builtin_tools


class SleepTool(Tool):
    name = "sleep"
    kind = "other"
    description = "sleep"
    schema = {
        "type": "object",
        "properties": {"ms": {"type": "integer"}, "tag": {"type": "string"}},
        "required": ["ms"],
        "additionalProperties": False,
    }
    running = 0
    peak = 0

    def effect(self, args):
        return "read"

    async def run(self, args, ctx):
        SleepTool.running += 1
        SleepTool.peak = max(SleepTool.peak, SleepTool.running)
        try:
            await anyio.sleep(args["ms"] / 1000)
        finally:
            SleepTool.running -= 1
        return ToolResult(f"slept {args['ms']} {args.get('tag', '')}")


class CrashTool(Tool):
    name = "crash"
    description = "crash"
    schema = {"type": "object", "properties": {}, "additionalProperties": False}

    def effect(self, args):
        return "read"

    async def run(self, args, ctx):
        raise RuntimeError("internal detail that must not leak")


class BigTool(Tool):
    name = "big"
    description = "big"
    schema = {"type": "object", "properties": {}, "additionalProperties": False}

    def effect(self, args):
        return "read"

    async def run(self, args, ctx):
        return ToolResult("x" * 200_000)


class Gateway:
    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.asked: list[PermissionRequest] = []

    async def request(self, request: PermissionRequest) -> PermissionOutcome:
        self.asked.append(request)
        a = self.answers.pop(0) if self.answers else "reject_once"
        return PermissionOutcome.cancel() if a == "cancel" else PermissionOutcome.selected(a)


def make_runtime(
    tmp_path: Path,
    responses: list[dict[str, Any]],
    *,
    mode: str = "safe",
    answers=(),
    options: RuntimeOptions | None = None,
):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    gateway = Gateway(list(answers))
    model = ScriptedModel(parse_script(json.dumps({"responses": responses})))
    rt = build_runtime(
        session_id="s1",
        cwd=str(ws),
        model=model,
        gateway=gateway,
        mode=lambda: mode,
        options=options,
        tools=[*builtin_tools(), SleepTool(), CrashTool(), BigTool()],
        context=False,
    ).runtime
    return rt, gateway, ws, model


class Sink:
    def __init__(self) -> None:
        self.events: list[RuntimeEvent] = []

    async def __call__(self, ev: RuntimeEvent) -> None:
        self.events.append(ev)

    def statuses(self, call_id: str) -> list[str]:
        out = [e for e in self.events if isinstance(e, ToolCallStarted) and e.call_id == call_id]
        st = ["pending"] if out else []
        return st + [
            e.status for e in self.events if isinstance(e, ToolCallProgress) and e.call_id == call_id and e.status
        ]


def tool_results(rt: AgentRuntime) -> list[ToolResultMessage]:
    return [m for m in rt.history if isinstance(m, ToolResultMessage)]


@pytest.mark.anyio
async def test_missing_call_ids_become_tool_step_ids(tmp_path):
    rt, _, ws, _ = make_runtime(
        tmp_path,
        [
            {
                "tool_calls": [
                    {"name": "read_file", "arguments": {"path": "a"}},
                    {"name": "read_file", "arguments": {"path": "b"}},
                ]
            },
            {"text": "ok"},
        ],
    )
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    assert [r.call_id for r in tool_results(rt)] == ["tool_step_0_0", "tool_step_0_1"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({"path": "a", "dangerouslyDisableSandbox": True}, "Additional properties"),
        ({}, "'path' is a required property"),
        ({"path": 5}, "is not of type 'string'"),
    ],
)
async def test_invalid_arguments_become_exact_tool_errors_and_the_loop_goes_on(tmp_path, args, needle):
    rt, _, _, model = make_runtime(
        tmp_path, [{"tool_calls": [{"id": "c1", "name": "read_file", "arguments": args}]}, {"text": "fixed"}]
    )
    sink = Sink()
    outcome = await rt.run_turn([TextPart("go")], sink)
    assert outcome.stop_reason == "end_turn"
    (result,) = tool_results(rt)
    assert result.output.startswith("TOOL_ERROR: ")
    payload = json.loads(result.output[len("TOOL_ERROR: ") :])
    assert list(payload) == ["errorType", "error", "tool", "callId"]
    assert payload["errorType"] == "InvalidArguments" and payload["tool"] == "read_file" and payload["callId"] == "c1"
    assert needle in payload["error"]
    assert sink.statuses("c1") == ["pending", "failed"]
    assert model.position == 2


@pytest.mark.anyio
async def test_blank_and_unknown_tool_names_are_tool_errors(tmp_path):
    rt, _, _, _ = make_runtime(
        tmp_path,
        [
            {"tool_calls": [{"id": "a", "name": "  ", "arguments": {}}, {"id": "b", "name": "rm_rf", "arguments": {}}]},
            {"text": "ok"},
        ],
    )
    await rt.run_turn([TextPart("go")], Sink())
    a, b = tool_results(rt)
    assert json.loads(a.output[12:])["errorType"] == "InvalidToolCall"
    assert json.loads(b.output[12:])["errorType"] == "ToolNotFound"


@pytest.mark.anyio
async def test_a_crashing_tool_yields_tool_error_without_stack_trace(tmp_path):
    rt, _, _, _ = make_runtime(
        tmp_path, [{"tool_calls": [{"id": "x", "name": "crash", "arguments": {}}]}, {"text": "ok"}]
    )
    assert (await rt.run_turn([TextPart("go")], Sink())).stop_reason == "end_turn"
    (r,) = tool_results(rt)
    payload = json.loads(r.output[12:])
    assert payload["errorType"] == "RuntimeError"
    assert "internal detail" not in r.output and "Traceback" not in r.output


@pytest.mark.anyio
async def test_parallel_calls_respect_the_cap_and_results_keep_call_order(tmp_path):
    SleepTool.peak = 0
    calls = [{"id": f"s{i}", "name": "sleep", "arguments": {"ms": 200 - i * 30, "tag": str(i)}} for i in range(6)]
    rt, _, _, _ = make_runtime(
        tmp_path, [{"tool_calls": calls}, {"text": "ok"}], options=RuntimeOptions(max_parallel_tool_calls=2)
    )
    start = time.monotonic()
    await rt.run_turn([TextPart("go")], Sink())
    assert SleepTool.peak == 2
    assert [r.call_id for r in tool_results(rt)] == [f"s{i}" for i in range(6)]
    assert time.monotonic() - start < 1.0  # 6 sleeps of ~0.2 s on 2 lanes, not 6 in a row


@pytest.mark.anyio
async def test_a_timed_out_call_fails_and_its_siblings_are_unaffected(tmp_path):
    rt, _, _, _ = make_runtime(
        tmp_path,
        [
            {
                "tool_calls": [
                    {"id": "slow", "name": "sleep", "arguments": {"ms": 10_000}},
                    {"id": "fast", "name": "sleep", "arguments": {"ms": 10}},
                ]
            },
            {"text": "ok"},
        ],
        options=RuntimeOptions(tool_call_timeout_ms=300),
    )
    sink = Sink()
    start = time.monotonic()
    assert (await rt.run_turn([TextPart("go")], sink)).stop_reason == "end_turn"
    assert time.monotonic() - start < 5
    slow, fast = tool_results(rt)
    assert json.loads(slow.output[12:])["errorType"] == "Timeout"
    assert fast.output.startswith("slept 10")
    assert sink.statuses("slow")[-1] == "failed" and sink.statuses("fast")[-1] == "completed"


@pytest.mark.anyio
async def test_the_step_limit_ends_the_turn_with_max_turn_requests(tmp_path):
    loop_call = {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]}
    rt, _, _, model = make_runtime(tmp_path, [loop_call] * 10, options=RuntimeOptions(max_turn_requests=3))
    outcome = await rt.run_turn([TextPart("go")], Sink())
    assert outcome.stop_reason == "max_turn_requests" and model.position == 3


@pytest.mark.anyio
async def test_tool_output_sent_to_the_model_is_capped_with_a_visible_marker(tmp_path):
    rt, _, _, _ = make_runtime(
        tmp_path,
        [{"tool_calls": [{"name": "big", "arguments": {}}]}, {"text": "ok"}],
        options=RuntimeOptions(max_tool_output_chars=1000),
    )
    await rt.run_turn([TextPart("go")], Sink())
    (r,) = tool_results(rt)
    assert len(r.output) < 1200 and "characters truncated" in r.output


@pytest.mark.anyio
@pytest.mark.parametrize("stop", ["max_tokens", "refusal"])
async def test_model_stop_conditions_become_stop_reasons(tmp_path, stop):
    rt, _, _, _ = make_runtime(tmp_path, [{"text": "partial", "stop": stop}])
    assert (await rt.run_turn([TextPart("go")], Sink())).stop_reason == stop
    if stop == "refusal":
        assert rt.history == []  # the refused prompt leaves the context


@pytest.mark.anyio
async def test_a_rejection_stops_the_turn_without_calling_the_model_again(tmp_path):
    rt, gw, ws, model = make_runtime(
        tmp_path,
        [
            {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "f.txt", "content": "x"}}]},
            {"text": "should not be reached in this turn"},
        ],
        answers=["reject_once"],
    )
    sink = Sink()
    outcome = await rt.run_turn([TextPart("go")], sink)
    assert outcome.stop_reason == "end_turn" and outcome.blocked_by_approval
    assert model.position == 1 and not (ws / "f.txt").exists()
    assert sink.statuses("w") == ["pending", "failed"]


@pytest.mark.anyio
async def test_a_rejection_skips_sibling_calls_still_waiting_for_approval(tmp_path):
    rt, gw, ws, _ = make_runtime(
        tmp_path,
        [
            {
                "tool_calls": [
                    {"id": "a", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}},
                    {"id": "b", "name": "write_file", "arguments": {"path": "b.txt", "content": "x"}},
                ]
            }
        ],
        answers=["reject_once", "allow_once"],
    )
    await rt.run_turn([TextPart("go")], Sink())
    assert len(gw.asked) == 1
    assert not (ws / "a.txt").exists() and not (ws / "b.txt").exists()


@pytest.mark.anyio
async def test_a_cancelled_permission_ends_the_turn_cancelled_and_runs_nothing(tmp_path):
    rt, gw, ws, _ = make_runtime(
        tmp_path,
        [
            {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "f.txt", "content": "x"}}]},
            {"text": "no"},
        ],
        answers=["cancel"],
    )
    sink = Sink()
    outcome = await rt.run_turn([TextPart("go")], sink)
    assert outcome.stop_reason == "cancelled" and not (ws / "f.txt").exists()
    assert sink.statuses("w")[-1] == "failed"
    # the history stays well-formed: every tool call has a result
    assert [r.call_id for r in tool_results(rt)] == ["w"]


@pytest.mark.anyio
async def test_allow_always_is_remembered_for_identical_calls_only(tmp_path):
    w = {"name": "write_file", "arguments": {"path": "f.txt", "content": "x"}}
    other = {"name": "write_file", "arguments": {"path": "g.txt", "content": "x"}}
    rt, gw, ws, _ = make_runtime(
        tmp_path,
        [{"tool_calls": [w]}, {"tool_calls": [w]}, {"tool_calls": [other]}, {"text": "done"}],
        answers=["allow_always", "allow_once"],
    )
    await rt.run_turn([TextPart("go")], Sink())
    assert len(gw.asked) == 2  # the identical second call was not asked; the different one was


@pytest.mark.anyio
async def test_reject_always_refuses_identical_calls_without_asking_and_stops_the_turn(tmp_path):
    w = {"name": "write_file", "arguments": {"path": "f.txt", "content": "x"}}
    rt, gw, ws, model = make_runtime(
        tmp_path, [{"tool_calls": [w]}, {"tool_calls": [w]}, {"text": "x"}], answers=["reject_always"]
    )
    await rt.run_turn([TextPart("one")], Sink())
    outcome = await rt.run_turn([TextPart("two")], Sink())
    assert len(gw.asked) == 1 and outcome.blocked_by_approval and not (ws / "f.txt").exists()


@pytest.mark.anyio
async def test_read_only_mode_refuses_writes_without_asking_and_tells_the_model(tmp_path):
    rt, gw, ws, model = make_runtime(
        tmp_path,
        [
            {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "f.txt", "content": "x"}}]},
            {"text": "understood"},
        ],
        mode="read-only",
    )
    outcome = await rt.run_turn([TextPart("go")], Sink())
    assert outcome.stop_reason == "end_turn" and not gw.asked and not (ws / "f.txt").exists()
    (r,) = tool_results(rt)
    assert json.loads(r.output[12:])["errorType"] == "PermissionDenied"
    assert model.position == 2


@pytest.mark.anyio
async def test_a_mode_change_applies_to_the_next_call_without_rebuilding(tmp_path):
    mode = ["safe"]
    rt, gw, ws, _ = make_runtime(
        tmp_path,
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "f.txt", "content": "x"}}]}, {"text": "ok"}],
    )
    rt.executor.mode = lambda: mode[0]  # type: ignore[attr-defined]
    mode[0] = "auto"
    await rt.run_turn([TextPart("go")], Sink())
    assert not gw.asked and (ws / "f.txt").read_text() == "x"


@pytest.mark.anyio
async def test_paths_outside_the_workspace_ask_with_the_resolved_path_even_in_auto(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    rt, gw, ws, _ = make_runtime(
        tmp_path,
        [{"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"path": "../outside.txt"}}]}, {"text": "ok"}],
        mode="auto",
        answers=["allow_once"],
    )
    await rt.run_turn([TextPart("go")], Sink())
    assert len(gw.asked) == 1 and str(outside) in gw.asked[0].reason
    (r,) = tool_results(rt)
    assert "secret" in r.output


@pytest.mark.anyio
async def test_protected_paths_ask_even_in_auto(tmp_path):
    rt, gw, ws, _ = make_runtime(
        tmp_path,
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": ".git/hooks/pre-commit", "content": "evil"}}]},
            {"text": "ok"},
        ],
        mode="auto",
        answers=["reject_once"],
    )
    await rt.run_turn([TextPart("go")], Sink())
    assert len(gw.asked) == 1 and not (ws / ".git" / "hooks" / "pre-commit").exists()


@pytest.mark.anyio
async def test_cancel_during_a_model_delay_ends_the_turn_cancelled_promptly(tmp_path):
    rt, _, _, _ = make_runtime(tmp_path, [{"delay_ms": 30_000, "text": "late"}])
    sink = Sink()
    result: dict[str, Any] = {}

    async def turn() -> None:
        result["o"] = await rt.run_turn([TextPart("go")], sink)

    start = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(turn)
        await anyio.sleep(0.05)
        rt.cancel()
    assert result["o"].stop_reason == "cancelled" and time.monotonic() - start < 2


@pytest.mark.anyio
async def test_a_model_error_ends_the_turn_with_a_message_and_the_session_stays_usable(tmp_path):
    rt, _, _, _ = make_runtime(tmp_path, [{"error": "upstream 502"}, {"text": "back"}])
    sink = Sink()
    assert (await rt.run_turn([TextPart("a")], sink)).error == "upstream 502"
    assert (await rt.run_turn([TextPart("b")], sink)).stop_reason == "end_turn"
