"""Traceable tools: a structured trace per call (safe under parallel calls), found through any decorator chain, stored
with the tool result and shown to the client, never sent to the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from runtime.models.base import ModelRequest, TextPart, ToolResultMessage
from runtime.models.openai_compat import to_openai_messages
from runtime.tools.base import RoutingToolExecutor, Tool, ToolCall, ToolContext, ToolRegistry, ToolResult
from runtime.tracing import RetryingExecutor, find_trace, jsonable_trace
from tests.support.delegation_helpers import Sink, scripted, session_runtime, tool_results

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


@dataclass(frozen=True)
class Hit:
    doc: str
    score: float


class SearchTool(Tool):
    name = "search_docs"
    description = "search"
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "ms": {"type": "integer"}},
        "required": ["q"],
        "additionalProperties": False,
    }

    def effect(self, args):
        return "read"

    async def run(self, args, ctx):
        await anyio.sleep(args.get("ms", 0) / 1000)
        return ToolResult(f"2 hits for {args['q']}")


class TracingRouter(RoutingToolExecutor):
    """An executor that keeps the sub-trace of each execution beside the text, keyed by call id (a
    traceable executor, without thread-local state)."""

    def __init__(self, registry: ToolRegistry) -> None:
        super().__init__(registry)
        self.traces: dict[str, Any] = {}

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        result = await super().execute(call, ctx)
        if call.name == "search_docs":
            q = call.arguments["q"]
            self.traces[ctx.call_id] = {
                "query": q,
                "hits": [Hit(f"{q}-1.md", 0.9), Hit(f"{q}-2.md", 0.5)],
                "reranked": True,
            }
        return result

    def trace_for(self, call_id: str) -> Any | None:
        return self.traces.pop(call_id, None)


class TraceOnResultTool(Tool):
    name = "traced"
    description = "traced"
    schema = {"type": "object", "properties": {}, "additionalProperties": False}

    def effect(self, args):
        return "read"

    async def run(self, args, ctx):
        return ToolResult("short text", trace={"steps": ["parse", "lookup"], "secret_marker": "TRACE-ONLY-7731"})


def runtime_with_tracing_router(tmp_path, responses):
    search, traced = SearchTool(), TraceOnResultTool()
    from runtime.tools.builtin import builtin_tools

    registry = ToolRegistry([*builtin_tools(), search, traced])
    router = TracingRouter(registry)
    rt, gw, ws = session_runtime(tmp_path, scripted(responses), extra_tools=[search, traced], router=router)
    return rt, router


async def test_parallel_calls_each_get_their_own_trace_through_the_decorators(tmp_path):
    rt, router = runtime_with_tracing_router(
        tmp_path,
        [
            {
                "tool_calls": [
                    {"id": "a", "name": "search_docs", "arguments": {"q": "alpha", "ms": 80}},
                    {"id": "b", "name": "search_docs", "arguments": {"q": "beta", "ms": 10}},
                ]
            },
            {"text": "ok"},
        ],
    )
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    a, b = tool_results(rt)
    assert a.meta["trace"]["query"] == "alpha" and b.meta["trace"]["query"] == "beta"
    assert a.meta["trace"]["hits"][0] == {"doc": "alpha-1.md", "score": 0.9}  # dataclasses become JSON
    assert sink.final("a").meta["gatewright"]["trace"]["query"] == "alpha"
    assert sink.final("b").meta["gatewright"]["trace"]["hits"][1]["doc"] == "beta-2.md"
    assert router.traces == {}  # read once, then forgotten: no growth over a long session
    assert a.output == "2 hits for alpha"


async def test_a_trace_on_the_tool_result_is_stored_shown_and_never_sent_to_the_model(tmp_path):
    rt, _ = runtime_with_tracing_router(tmp_path, [{"tool_calls": [{"id": "t", "name": "traced"}]}, {"text": "ok"}])
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    (r,) = tool_results(rt)
    assert r.meta["trace"]["steps"] == ["parse", "lookup"] and r.output == "short text"
    assert sink.final("t").meta["gatewright"]["trace"]["secret_marker"] == "TRACE-ONLY-7731"
    # what a provider is sent for this history carries the text only
    wire = to_openai_messages(ModelRequest("system", tuple(rt.history), ()), images=False)
    assert "TRACE-ONLY-7731" not in repr(wire)
    requests: list[Any] = []
    original = rt.model.stream

    async def spy(request):
        requests.append(request)
        async for ev in original(request):
            yield ev

    rt.model.stream = spy  # type: ignore[method-assign]
    await rt.run_turn([TextPart("again")], sink)
    (request,) = requests
    sent = [m.output for m in request.messages if isinstance(m, ToolResultMessage)]
    assert sent == ["short text"]


async def test_every_result_carries_its_own_operation_id_and_plain_calls_keep_their_frames(tmp_path):
    rt, _ = runtime_with_tracing_router(
        tmp_path,
        [
            {
                "tool_calls": [
                    {"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}},
                    {"id": "r2", "name": "read_file", "arguments": {"path": "README.md"}},
                ]
            },
            {"text": "ok"},
        ],
    )
    sink = Sink()
    await rt.run_turn([TextPart("go")], sink)
    r1, r2 = tool_results(rt)
    assert r1.meta["operationId"].startswith("op_") and r1.meta["operationId"] != r2.meta["operationId"]
    assert sink.final("r1").meta is None  # nothing notable: the wire is unchanged for ordinary calls


class Opaque:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<opaque>"


async def test_traces_are_made_json_and_oversized_ones_are_replaced_by_a_marker():
    assert jsonable_trace({"x": Opaque()}) == {"x": "<opaque>"}
    assert jsonable_trace({"blob": "x" * 100_000}) == {"truncated": True, "bytes": 100_011}
    assert jsonable_trace(None) is None


async def test_find_trace_walks_decorators_that_know_nothing_about_traces():
    class Plain:
        def __init__(self, delegate):
            self.delegate = delegate

    class Keeper:
        def trace_for(self, call_id):
            return {"call": call_id}

    chain = Plain(Plain(RetryingExecutor(Keeper(), ToolRegistry())))  # type: ignore[arg-type]
    assert find_trace(chain, "c9") == {"call": "c9"}
    assert find_trace(Plain(object()), "c9") is None
