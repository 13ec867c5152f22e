"""A streamable-HTTP (`http`) or SSE (`sse`) MCP server on 127.0.0.1, port chosen by the OS and printed first.

Usage: http_server.py http|sse. The `whoami` tool reports the Authorization header it received.
"""

from __future__ import annotations

import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("web")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def whoami(ctx: Context) -> str:
    """Which Authorization header did this request carry?"""
    request = ctx.request_context.request
    auth = request.headers.get("authorization") if request is not None else None
    return f"authorization: {auth}"


@server.tool()
async def countdown(n: int, ctx: Context) -> str:
    """Counts down with progress."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"tick {i + 1}")
        await anyio.sleep(0.15)
    return "liftoff"


def main() -> None:
    kind = sys.argv[1]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    app = server.streamable_http_app() if kind == "http" else server.sse_app()
    config = uvicorn.Config(app, log_level="warning")
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
