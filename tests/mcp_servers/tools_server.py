"""A stdio MCP server with one tool per behaviour the tests need.

Environment: MCP_TEST_GATE=PATH makes the server wait until PATH exists before it serves (to prove that nothing waits
for it); MCP_TEST_PIDFILE=PATH records the pids of the server and of a grandchild it starts (to prove both die). The
pids are those of the server's sandbox (its own pid namespace): tests find both processes by PATH instead, which is
in the server's environment and in the grandchild's argv. MCP_TEST_ERA=legacy makes it speak the handshake-era
protocol only (it refuses the 2026-07-28 `server/discover` probe, so the client falls back to `initialize`), where
`ctx.elicit` sends a real server-to-client `elicitation/create` in the middle of the call; in the 2026-07-28 era the
questions of `ask_resolved` ride the call's result instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

pidfile = os.environ.get("MCP_TEST_PIDFILE")
if pidfile:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", pidfile])
    with open(pidfile, "w") as f:
        f.write(f"{os.getpid()} {child.pid}\n")

gate = os.environ.get("MCP_TEST_GATE")
if gate:
    while not os.path.exists(gate):
        time.sleep(0.02)

if os.environ.get("MCP_TEST_ERA") == "legacy":
    # Sit between the client and the SDK's stdin: answer the probe ourselves (nothing else is written before its
    # answer, so the two writers of stdout never interleave) and pass everything else through.
    _pipe_r, _pipe_w = os.pipe()
    _client_in = os.dup(0)
    os.dup2(_pipe_r, 0)
    os.close(_pipe_r)

    def _filter_stdin() -> None:
        with os.fdopen(_client_in, "rb") as src, os.fdopen(_pipe_w, "wb") as dst:
            for line in src:
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = None
                if isinstance(msg, dict) and msg.get("method") == "server/discover" and "id" in msg:
                    refusal = {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "error": {"code": -32601, "message": "Method not found"},
                    }
                    os.write(1, json.dumps(refusal).encode() + b"\n")
                    continue
                dst.write(line)
                dst.flush()

    threading.Thread(target=_filter_stdin, daemon=True).start()

from typing import Annotated  # noqa: E402

import anyio  # noqa: E402
from mcp.server.elicitation import ElicitationResult  # noqa: E402
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve  # noqa: E402
from mcp.types import EmbeddedResource, ImageContent, TextContent, TextResourceContents, ToolAnnotations  # noqa: E402
from pydantic import BaseModel  # noqa: E402

server = MCPServer(os.environ.get("MCP_TEST_NAME", "tools"))


class Name(BaseModel):
    name: str


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool()
def shout(text: str) -> str:
    """Upper-case the text (not marked read-only)."""
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


@server.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Reports progress for each step."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await anyio.sleep(0.15)
    return f"finished {steps} steps"


@server.tool()
def picture() -> list[TextContent | ImageContent | EmbeddedResource]:
    """A text, an image and an embedded resource."""
    return [
        TextContent(type="text", text="a red dot"),
        ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="file:///notes.txt", text="hello notes", mime_type="text/plain"),
        ),
    ]


@server.tool()
def search(query: str, tenant: str) -> str:
    """Search tickets of a tenant."""
    return f"results for {query!r} in tenant {tenant}"


@server.tool()
def getenv(name: str) -> str:
    """Read an environment variable of the server process."""
    return os.environ.get(name, "<unset>")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def cwd() -> str:
    """The server's working directory."""
    return os.getcwd()


@server.tool()
def crash() -> str:
    """The server process dies in the middle of the call."""
    os._exit(7)


@server.tool()
async def hang(marker: str) -> str:
    """Waits forever; writes MARKER when the call is cancelled."""
    try:
        await anyio.sleep(600)
    except anyio.get_cancelled_exc_class():
        with open(marker, "w") as f:
            f.write("cancelled")
        raise
    return "never"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool NAME at run time and tells the client its tool list changed."""

    def added() -> str:
        return f"{name} says hi"

    server.add_tool(added, name=name, description="Added at run time.")
    await ctx.notify_tools_changed()  # to `subscriptions/listen` subscribers
    return f"added {name}"


@server.tool()
async def shrink(name: str, ctx: Context) -> str:
    """Removes the tool NAME at run time and tells the client its tool list changed."""
    server.remove_tool(name)
    await ctx.notify_tools_changed()
    return f"removed {name}"


def _outcome(result: object) -> str:
    data = getattr(result, "data", None)
    action = str(getattr(result, "action", "?"))
    return f"{action}: {data.name}" if data is not None else action


@server.tool()
async def ask(question: str, ctx: Context, marker: str = "") -> str:
    """Asks the user for a name with ctx.elicit (handshake era only); writes the outcome to MARKER. The question is
    shielded from the call's cancellation, so the outcome recorded is what the client answered."""
    with anyio.CancelScope(shield=True):
        result = await ctx.elicit(question, Name)
        if marker:
            with open(marker, "w") as f:
                f.write(_outcome(result))
    return _outcome(result)


def _who() -> Elicit[Name]:
    return Elicit("Who are you?", Name)


@server.tool()
async def ask_resolved(answer: Annotated[ElicitationResult[Name], Resolve(_who)]) -> str:
    """Asks the user for a name the way that works in both eras (a resolver)."""
    return _outcome(answer)


@server.tool()
async def ask_nested(ctx: Context) -> str:
    """Asks with a form no ACP editor can show (a nested object), sent raw (handshake era only)."""
    schema = {
        "type": "object",
        "properties": {"address": {"type": "object", "properties": {"street": {"type": "string"}}}},
    }
    result = await ctx.session.elicit_form("Where do you live?", schema, related_request_id=ctx.request_id)
    return result.action


@server.tool()
async def open_page(url: str, ctx: Context) -> str:
    """Asks the user to open URL (URL mode, handshake era only) and says it is done once they accepted."""
    result = await ctx.elicit_url("Sign in to continue", url, "login-1")
    if result.action == "accept":
        await ctx.session.send_elicit_complete("login-1", related_request_id=ctx.request_id)
    return result.action


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def client_elicitation(ctx: Context) -> str:
    """The elicitation capability the client declared, as JSON."""
    caps = ctx.client_capabilities
    el = caps.elicitation if caps is not None else None
    return json.dumps(el.model_dump(mode="json", exclude_none=True) if el is not None else None)


@server.tool(name="weird name!", annotations=ToolAnnotations(readOnlyHint=True))
def weird() -> str:
    """A tool whose name needs normalising."""
    return "weird ok"


if __name__ == "__main__":
    server.run()
