"""`McpTool`: one tool of one MCP server, as a `Tool` in the session's registry, behind the same approval.

The model sees the server's tool under its exposed name (`runtime.mcp.naming`) with the pinned arguments removed
from the schema. Approval facts: effect `other` (a remote tool can do anything), so `safe` and `manual` ask;
the server's `readOnlyHint` is passed on as `read_only_hint`, which the policy honours in `safe` and `read-only` but
never in `manual`. Results are turned into ACP tool call content for the editor and plain text for the model.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from runtime.mcp.pinning import inject, strip_schema, supplied_pins
from runtime.tools.base import Effect, Tool, ToolContext, ToolFailure, ToolResult, digest
from runtime.workspace import Workspace

if TYPE_CHECKING:
    from runtime.mcp.connection import RemoteTool, ServerConnection

EDITOR_TEXT_LIMIT = 20_000
PROGRESS_INTERVAL = 0.1  # seconds between progress updates sent to the editor


class McpTool(Tool):
    kind = "other"

    def __init__(
        self, exposed_name: str, conn: ServerConnection, remote: RemoteTool, pinned: Mapping[str, Any] | None = None
    ) -> None:
        self.name = exposed_name
        self.conn = conn
        self.remote = remote
        self.pinned = dict(pinned or {})
        self.description = remote.description or f"{remote.name} (from MCP server {conn.name})"
        self.read_only_hint = remote.read_only_hint
        # An instance attribute shadows the base class's schema-file lookup.
        self.schema = model_schema(remote.input_schema, self.pinned)

    # ---- what the approval layer and the editor see ------------------------------------------------------------
    def effect(self, args: Mapping[str, Any]) -> Effect:
        return "other"

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        label = f"{self.conn.name}/{self.remote.name}"
        return f"{self.remote.title} ({label})" if self.remote.title else label

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return f"this call to the MCP tool `{self.conn.name}/{self.remote.name}`"

    def rule_key(self, args: Mapping[str, Any], ws: Workspace) -> str:
        # What decides the effect: which server (how it is started or reached; not its secrets), which of its tools,
        # and the arguments it receives (the model's and the pinned ones). "Always allow" covers that very call.
        spec = getattr(self.conn, "spec", None)
        server = {
            "name": self.conn.name,
            "transport": getattr(spec, "transport", None),
            "command": getattr(spec, "command", None),
            "args": list(getattr(spec, "args", ())),
            "url": getattr(spec, "url", None),
            "env": sorted(name for name, _ in getattr(spec, "env", ())),
            "headers": sorted(name for name, _ in getattr(spec, "headers", ())),
        }
        return f"{self.name}:{digest(server)}:{self.remote.name}:{digest(inject(args, self.pinned))}"

    def check_arguments(self, args: Mapping[str, Any]) -> None:
        bad = supplied_pins(args, self.pinned)
        if bad:
            raise ToolFailure(
                f"{self.name}: argument(s) {', '.join(bad)} are bound by the session configuration "
                "and cannot be supplied",
                "InvalidArguments",
            )

    # ---- running -------------------------------------------------------------------------------------------------
    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        self.check_arguments(args)  # again here: the executor may be reached without the sanitizer
        last = 0.0

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            nonlocal last
            now = time.monotonic()
            if ctx.progress is None or now - last < PROGRESS_INTERVAL:
                return
            last = now
            await ctx.progress(
                ToolResult(
                    "",
                    content=(_text_content(progress_text(progress, total, message)),),
                    raw_output={"progress": progress, "total": total, "message": message},
                )
            )

        result = await self.conn.call_tool(self.remote.name, inject(args, self.pinned), on_progress, ctx.call_id)
        return convert_result(result)


def model_schema(schema: Mapping[str, Any], pinned: Mapping[str, Any]) -> dict[str, Any]:
    """The schema the model sees: an object schema (providers insist), pinned properties gone."""
    out = strip_schema(schema, pinned) if isinstance(schema, Mapping) else {}
    if out.get("type") != "object":
        out = {"type": "object", "properties": {}} if not out else {**out, "type": "object"}
    out.setdefault("properties", {})
    return out


def progress_text(progress: float, total: float | None, message: str | None) -> str:
    amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
    return f"{message} ({amount})" if message else f"Progress: {amount}"


def _text_content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def convert_result(result: Any) -> ToolResult:
    """An MCP `CallToolResult` → model text, ACP tool call content, raw output; `isError` → a failed call."""
    model_parts: list[str] = []
    content: list[dict[str, Any]] = []
    for block in result.content or []:
        data = block.model_dump(by_alias=True, exclude_none=True, mode="json")
        text, acp = convert_block(data)
        if text:
            model_parts.append(text)
        if acp is not None:
            content.append({"type": "content", "content": acp})
    structured = result.structured_content
    has_text = any(p for p in model_parts)
    if structured is not None and not has_text:
        dumped = orjson.dumps(structured, option=orjson.OPT_INDENT_2).decode()
        model_parts.append(dumped)
        content.append(_text_content(_cap(dumped)))
    output = "\n".join(model_parts)
    if not output:
        output = "the tool reported an error and gave no details" if result.is_error else "(no output)"
    return ToolResult(
        output=output,
        is_error=bool(result.is_error),
        content=tuple(content) or (_text_content(_cap(output)),),
        raw_output={"structuredContent": structured} if structured is not None else None,
    )


def convert_block(b: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """One MCP content block → (text for the model, ACP ContentBlock for the editor or None)."""
    kind = b.get("type")
    if kind == "text":
        text = str(b.get("text", ""))
        return text, {"type": "text", "text": _cap(text)}
    if kind in ("image", "audio"):
        data, mime = str(b.get("data", "")), str(b.get("mimeType", "application/octet-stream"))
        return f"[{kind} {mime}, {_b64_size(data)} bytes]", {"type": kind, "data": data, "mimeType": mime}
    if kind == "resource_link":
        uri, name = str(b.get("uri", "")), str(b.get("name") or b.get("uri", ""))
        link: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name}
        for k in ("title", "description", "mimeType", "size"):
            if b.get(k) is not None:
                link[k] = b[k]
        return f"[resource link] {name}: {uri}", link
    if kind == "resource":
        res = r if isinstance(r := b.get("resource"), dict) else {}
        uri = str(res.get("uri", ""))
        kept: dict[str, Any] = {"uri": uri}
        if res.get("mimeType"):
            kept["mimeType"] = res["mimeType"]
        if isinstance(res.get("text"), str):
            kept["text"] = res["text"]
            return f'<resource uri="{uri}">\n{res["text"]}\n</resource>', {"type": "resource", "resource": kept}
        kept["blob"] = str(res.get("blob", ""))
        mime = kept.get("mimeType", "binary")
        return f"[binary resource {uri} ({mime}, {_b64_size(kept['blob'])} bytes)]", {
            "type": "resource",
            "resource": kept,
        }
    # A block type from a newer protocol: tell the model it was there rather than dropping it silently.
    return f"[unsupported content block {str(kind)[:40]}]", None


def _b64_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except Exception:
        return len(data) * 3 // 4


def _cap(text: str) -> str:
    return text if len(text) <= EDITOR_TEXT_LIMIT else text[:EDITOR_TEXT_LIMIT] + "\n[… truncated …]"
