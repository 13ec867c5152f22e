"""A hand-written stdio MCP server that speaks only the pre-2026-07-28 protocol (the `initialize` handshake, no
`server/discover`, no `subscriptions/listen`) and announces tool changes with a bare
`notifications/tools/list_changed`, as servers built on older SDKs do. Tools: `grow NAME` adds a tool NAME,
`shrink NAME` removes it, and every added tool answers "NAME says hi"."""

from __future__ import annotations

import json
import sys

tools: dict[str, str] = {"grow": "Add a tool NAME.", "shrink": "Remove the tool NAME."}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def send(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def text(value: str) -> dict:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def handle(msg: dict) -> None:
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if rid is None:
        return  # notifications (initialized, cancelled): nothing to answer
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "legacy", "version": "1"},
                },
            }
        )
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif method == "tools/list":
        listed = [
            {"name": n, "description": d, "inputSchema": NAME_SCHEMA if n in ("grow", "shrink") else {"type": "object"}}
            for n, d in tools.items()
        ]
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": listed}})
    elif method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "grow":
            tools[args["name"]] = "Added at run time."
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": rid, "result": text(f"added {args['name']}")})
        elif name == "shrink":
            tools.pop(args["name"], None)
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": rid, "result": text(f"removed {args['name']}")})
        elif name in tools:
            send({"jsonrpc": "2.0", "id": rid, "result": text(f"{name} says hi")})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"unknown tool {name}"}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"method not found: {method}"}})


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
