"""Normalisation and structural validation of the model's tool calls.

Normalisation never rejects: a missing id becomes `tool_step_<step>_<index>`, names are trimmed. Validation is a
separate layer from authorisation: a malformed call becomes a `TOOL_ERROR` the model can fix.
"""

from __future__ import annotations

from typing import Any

import orjson

from runtime.models.base import ToolCallRequest
from runtime.tools.base import ToolCall, ToolFailure, ToolRegistry, validate_arguments


def normalise(step: int, calls: list[ToolCallRequest]) -> list[ToolCallRequest]:
    out: list[ToolCallRequest] = []
    seen: set[str] = set()
    for index, call in enumerate(calls):
        cid = (call.id or "").strip() or f"tool_step_{step}_{index}"
        if cid in seen:  # ids must be unique within a turn; keep the model's id visible
            cid = f"{cid}_{index}"
        seen.add(cid)
        out.append(ToolCallRequest(cid, (call.name or "").strip(), call.arguments))
    return out


def parse_arguments(call: ToolCallRequest) -> dict[str, Any]:
    """Parse the raw arguments text into an object.

    Raises:
        ToolFailure: `InvalidArguments` for blank, unparsable or non-object arguments.
    """
    raw = call.arguments
    if raw is None or not raw.strip():
        # An empty argument string from a streaming provider means "no arguments".
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ToolFailure(f"{call.name} arguments are not valid JSON", "InvalidArguments") from None
    if not isinstance(value, dict):
        raise ToolFailure(f"{call.name} arguments must be a JSON object", "InvalidArguments")
    return value


def validate(call: ToolCallRequest, index: int, registry: ToolRegistry) -> ToolCall:
    """Turn a normalised request into a validated `ToolCall`.

    Raises:
        ToolFailure: blank name, unknown (unexposed) tool, or arguments that do not match the tool's schema.
    """
    if not call.name:
        raise ToolFailure("tool name is required", "InvalidToolCall")
    tool = registry.get(call.name)
    if tool is None:
        available = ", ".join(sorted(registry.names()))
        raise ToolFailure(f"unknown tool {call.name!r}; available tools: {available}", "ToolNotFound")
    args = parse_arguments(call)
    validate_arguments(tool, args)
    return ToolCall(call.id or "", call.name, args, call.arguments, index)


def tool_error(error_type: str, error: str, tool: str, call_id: str) -> str:
    """The exact text a failing tool gives the model."""
    payload = {"errorType": error_type, "error": error, "tool": tool, "callId": call_id}
    return "TOOL_ERROR: " + orjson.dumps(payload).decode()
