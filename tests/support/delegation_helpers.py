"""A session runtime for in-process tests of subagents, plans, traces and retries: the one composition root
(`runtime.build_runtime`, as `AcpSession` uses it) with a recording gateway, a sleep tool and retries without delay."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import orjson

from permissions import PermissionOutcome, PermissionRequest
from runtime import AgentRuntime, RuntimeEvent, RuntimeOptions, ToolCallProgress, ToolCallStarted, build_runtime
from runtime.delegation import DEFAULT_SUBAGENTS, SubagentSpec, current_frame
from runtime.models.base import (
    AssistantMessage,
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallEvent,
    ToolCallRequest,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from runtime.models.scripted import ScriptedModel, parse_script
from runtime.tools.base import Tool, ToolExecutor, ToolResult
from runtime.tools.builtin import builtin_tools
from runtime.tracing import RetryPolicy


class Gateway:
    """Answers permission questions from a list (default: reject), recording every question and when it came."""

    def __init__(self, answers: list[str] | None = None, default: str = "reject_once") -> None:
        self.answers = list(answers or [])
        self.default = default
        self.asked: list[PermissionRequest] = []
        self.closed = False
        self.after_close: list[PermissionRequest] = []

    async def request(self, request: PermissionRequest) -> PermissionOutcome:
        (self.after_close if self.closed else self.asked).append(request)
        a = self.answers.pop(0) if self.answers else self.default
        return PermissionOutcome.cancel() if a == "cancel" else PermissionOutcome.selected(a)


class Sink:
    def __init__(self) -> None:
        self.events: list[RuntimeEvent] = []

    async def __call__(self, ev: RuntimeEvent) -> None:
        self.events.append(ev)

    def started(self) -> list[ToolCallStarted]:
        return [e for e in self.events if isinstance(e, ToolCallStarted)]

    def final(self, call_id: str) -> ToolCallProgress | None:
        done = [
            e
            for e in self.events
            if isinstance(e, ToolCallProgress) and e.call_id == call_id and e.status in ("completed", "failed")
        ]
        return done[-1] if done else None

    def texts(self, call_id: str) -> list[str]:
        out = []
        for e in self.events:
            if isinstance(e, ToolCallProgress) and e.call_id == call_id and e.content:
                out += [c["content"]["text"] for c in e.content if c.get("type") == "content"]
        return out


class SleepTool(Tool):
    """Sleeps, then says where it ran (which delegation frame, as the context variable tells)."""

    name = "sleep"
    description = "sleep"
    schema = {
        "type": "object",
        "properties": {"ms": {"type": "integer"}, "write": {"type": "boolean"}},
        "required": ["ms"],
        "additionalProperties": False,
    }

    def effect(self, args):
        return "write" if args.get("write") else "read"

    async def run(self, args, ctx):
        await anyio.sleep(args["ms"] / 1000)
        frame = current_frame()
        where = f"{frame.call_id}@{frame.depth}" if frame else "root@0"
        return ToolResult(f"slept in {where}")


class ScriptsByTask:
    """A model for parallel subagents: the conversation's first user message picks the script (the first script
    whose key it contains), and the number of assistant turns so far picks the entry. Deterministic under any
    interleaving, unlike one shared script."""

    accepts_images = False
    name = "scripts-by-task"

    def __init__(self, scripts: dict[str, list[dict[str, Any]]]) -> None:
        self.scripts = scripts
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        first = next(m for m in request.messages if isinstance(m, UserMessage))
        text = " ".join(getattr(p, "text", "") for p in first.parts)
        key = next(k for k in self.scripts if k in text)
        step = sum(isinstance(m, AssistantMessage) for m in request.messages)
        entries = self.scripts[key]
        entry = entries[step] if step < len(entries) else {"text": f"{key} done"}
        if entry.get("delay_ms"):
            await anyio.sleep(entry["delay_ms"] / 1000)
        if entry.get("text"):
            yield TextDelta(entry["text"])
        calls = entry.get("tool_calls") or []
        for c in calls:
            yield ToolCallEvent(ToolCallRequest(c.get("id"), c["name"], orjson.dumps(c.get("arguments", {})).decode()))
        u = entry.get("usage") or {}
        yield Finished("tool_use" if calls else "end_turn", Usage(u.get("input_tokens", 0), u.get("output_tokens", 0)))


def session_runtime(
    tmp_path: Path,
    model: Any,
    *,
    mode: str = "safe",
    answers: list[str] | None = None,
    specs: tuple[SubagentSpec, ...] = DEFAULT_SUBAGENTS,
    extra_tools: list[Tool] | None = None,
    options: RuntimeOptions | None = None,
    retry: RetryPolicy | None = None,
    router: ToolExecutor | None = None,
) -> tuple[AgentRuntime, Gateway, Path]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "README.md").write_text("# sample\n\nhello from the readme\n")
    gateway = Gateway(answers)
    mode_ref = [mode]
    parts = build_runtime(
        session_id="s1",
        cwd=str(ws),
        model=model,
        gateway=gateway,
        mode=lambda: mode_ref[0],
        options=options,
        tools=[*builtin_tools(), SleepTool(), *(extra_tools or [])],
        subagents=specs,
        retry=retry or RetryPolicy(base_delay_seconds=0),
        wrap_router=(lambda _: router) if router is not None else None,
        context=False,
    )
    return parts.runtime, gateway, ws


def scripted(responses: list[dict[str, Any]]) -> ScriptedModel:
    return ScriptedModel(parse_script(json.dumps({"responses": responses})))


def tool_results(rt: AgentRuntime) -> list[ToolResultMessage]:
    return [m for m in rt.history if isinstance(m, ToolResultMessage)]


def error_of(msg: ToolResultMessage) -> dict[str, Any]:
    assert msg.output.startswith("TOOL_ERROR: "), msg.output
    return json.loads(msg.output[len("TOOL_ERROR: ") :])
