"""MCP tools go through the same approval decorator as every tool: what asks, what runs, what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from permissions import ToolApprovalDecorator
from permissions.decorator import ApprovalDenied
from permissions.gateway import PermissionOutcome, PermissionRequest
from permissions.rules import RuleStore
from runtime.approval import make_describer
from runtime.mcp.connection import RemoteTool
from runtime.mcp.tool import McpTool
from runtime.models.base import ToolCallRequest
from runtime.sanitizer import validate
from runtime.tools.base import RoutingToolExecutor, ToolCall, ToolContext, ToolFailure, ToolRegistry
from runtime.workspace import Workspace

pytestmark = pytest.mark.anyio


class FakeResult:
    def __init__(self, text: str) -> None:
        from mcp_types import TextContent

        self.content = [TextContent(type="text", text=text)]
        self.structured_content = None
        self.is_error = False


class FakeConnection:
    name = "srv"

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call_tool(self, tool: str, arguments: dict[str, Any], progress: Any, call_id: str = "") -> FakeResult:
        self.calls.append((tool, arguments))
        return FakeResult("ok")


class RecordingGateway:
    def __init__(self, option: str = "allow_once") -> None:
        self.asked: list[PermissionRequest] = []
        self.option = option

    async def request(self, request: PermissionRequest) -> PermissionOutcome:
        self.asked.append(request)
        return PermissionOutcome.selected(self.option)


SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "tenant": {"type": "string"}},
    "required": ["q", "tenant"],
}


def make(mode: str, read_only: bool, option: str = "allow_once"):
    conn = FakeConnection()
    remote = RemoteTool("lookup", "Look things up", SCHEMA, read_only_hint=read_only)
    registry = ToolRegistry([McpTool("mcp__srv__lookup", conn, remote, {"tenant": "acme"})])  # type: ignore[arg-type]
    gateway = RecordingGateway(option)
    executor = ToolApprovalDecorator(
        RoutingToolExecutor(registry), gateway, make_describer(registry), lambda: mode, RuleStore()
    )  # type: ignore[arg-type,return-value]
    return conn, registry, gateway, executor


def ctx(tmp_path) -> ToolContext:
    return ToolContext("s", "c1", Workspace(str(tmp_path), []))


CALL = ToolCall("c1", "mcp__srv__lookup", {"q": "x"}, '{"q": "x"}')


@pytest.mark.parametrize(
    ("mode", "read_only", "asks"),
    [
        ("safe", True, False),  # the hint is honoured in safe
        ("safe", False, True),
        ("manual", True, True),  # ...but never in manual
        ("manual", False, True),
        ("auto", False, False),
    ],
)
async def test_who_asks_before_an_mcp_tool_runs(tmp_path, mode, read_only, asks):
    conn, _, gateway, executor = make(mode, read_only)
    result = await executor.execute(CALL, ctx(tmp_path))
    assert result.output == "ok"
    assert bool(gateway.asked) is asks
    assert conn.calls == [("lookup", {"q": "x", "tenant": "acme"})]


async def test_read_only_mode_refuses_unmarked_tools_and_runs_marked_ones(tmp_path):
    conn, _, gateway, executor = make("read-only", read_only=False)
    with pytest.raises(ApprovalDenied):
        await executor.execute(CALL, ctx(tmp_path))
    assert conn.calls == [] and gateway.asked == []
    conn, _, gateway, executor = make("read-only", read_only=True)
    assert (await executor.execute(CALL, ctx(tmp_path))).output == "ok"
    assert gateway.asked == []


async def test_the_question_names_the_server_and_tool_and_shows_only_the_models_arguments(tmp_path):
    _, _, gateway, executor = make("manual", read_only=False)
    await executor.execute(CALL, ctx(tmp_path))
    req = gateway.asked[0]
    assert req.title == "srv/lookup"
    assert req.raw_input == {"q": "x"}  # the pinned tenant is the host's business
    (always,) = [o for o in req.options if o.kind == "allow_always"]
    assert always.name == "Always allow this call to the MCP tool “srv/lookup” in this session"


async def test_always_allow_covers_the_identical_call_and_never_the_same_tool_with_other_arguments(tmp_path):
    conn, _, gateway, executor = make("safe", read_only=False, option="allow_always")
    await executor.execute(CALL, ctx(tmp_path))
    await executor.execute(ToolCall("c2", CALL.name, dict(CALL.arguments), CALL.raw_arguments), ctx(tmp_path))
    assert len(gateway.asked) == 1 and len(conn.calls) == 2
    gateway.option = "reject_continue"
    other = ToolCall("c3", "mcp__srv__lookup", {"q": "DROP TABLE users"}, '{"q": "DROP TABLE users"}')
    with pytest.raises(ApprovalDenied):
        await executor.execute(other, ctx(tmp_path))
    assert len(gateway.asked) == 2 and len(conn.calls) == 2, "other arguments ask again, and rejected do not run"


async def test_a_model_supplied_pinned_value_is_an_invalid_call_before_any_question(tmp_path):
    _, registry, _, _ = make("manual", read_only=False)
    req = ToolCallRequest("c1", "mcp__srv__lookup", '{"q": "x", "tenant": "evil"}')
    with pytest.raises(ToolFailure) as err:
        validate(req, 0, registry)
    assert err.value.error_type == "InvalidArguments"
    assert "tenant" in err.value.message


async def test_the_schema_the_model_sees_has_no_pinned_field(tmp_path):
    _, registry, _, _ = make("safe", read_only=False)
    tool = registry.get("mcp__srv__lookup")
    assert tool is not None
    assert tool.schema == {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert validate(ToolCallRequest("c", "mcp__srv__lookup", '{"q": "x"}'), 0, registry).arguments == {"q": "x"}
